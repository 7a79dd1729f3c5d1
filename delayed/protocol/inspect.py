"""The operators' reads of Redis: which keys may be queues', each queue's counts, its pending tasks, its
workers and who holds what, its scheduled tasks and periodic entries, and which queue holds a tracked
task's record. Replies come back as plain data; what to show and how is delayed.ops.admin's."""
import math
import re
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, cast

import redis

from ..wire.keys import (
    COUNTED_EVENTS,
    COUNTED_WORKFLOWS,
    COUNTS_SUFFIX,
    DEAD_LETTERS_SUFFIX,
    DEAD_SUFFIX,
    FLOW_INFIX,
    GO_WORKER_ID,
    LEGACY_PERIODIC_KEY,
    NOTI_SUFFIX,
    PROCESSING_SUFFIX,
    SCHEDULED_PREFIX_BYTES,
    SCHEDULED_SUFFIX,
    TASK_INFIX,
    WORKERS_SUFFIX,
    QueueKeys,
    scheduled_kind,
)
from .connection import is_cluster
from .scheduled import ref_of
from .scripts import Script, Scripts

PEEK_QUEUE = Script("peek_queue")
PEEK_SCHEDULED = Script("peek_scheduled")
PEEK_PROCESSING = Script("peek_processing")
PEEK_RECORD = Script("peek_record")

WAITING_SINCE = Script("waiting_since")

# Replies are cast to what a connection that does not decode responses returns (ours never do).

KEY_TYPES = {NOTI_SUFFIX: "list", PROCESSING_SUFFIX: "hash", DEAD_SUFFIX: "list", DEAD_LETTERS_SUFFIX: "stream",
             SCHEDULED_SUFFIX: "zset", WORKERS_SUFFIX: "zset", COUNTS_SUFFIX: "hash"}
"""The keys of a queue N that tell it is there, by suffix, with the type our queues give each."""


@dataclass(frozen=True)
class Sample:
    """The head of key name + suffix, one of a would-be queue's keys that has its type (KEY_TYPES):
    up to 10 of a hash's field names (HRANDFIELD: all of a small hash's; never its values), a sorted
    set's first member (a scheduled task's blob, its prefix cut off) or a list's first item; none if
    it is empty. name_is_list: whether the key `name` itself is a list, as a queue's is."""

    name: str
    suffix: str
    head: List[bytes]
    name_is_list: bool


class Candidates(NamedTuple):
    """The would-be queues a SCAN found: samples of their keys, and the names with a dead-letter
    stream (N_dead_letters), to be read through DeadLetters (queue.dead)."""

    samples: List[Sample]
    streams: List[str]


def candidates(conn: redis.Redis) -> Candidates:
    """Every name N with a key N + suffix (KEY_TYPES) of the type our queues give it, sampled.

    Cost: one SCAN, one pipeline of TYPEs (the keys, and the names themselves) and one of
    samples; never a whole key read."""
    found: Dict[str, List[str]] = {}
    for key in _keys(conn):
        for suffix in KEY_TYPES:
            if key.endswith(suffix) and len(key) > len(suffix):
                found.setdefault(key[: -len(suffix)], []).append(suffix)
    names = sorted(found)
    probed = [(name, suffix) for name in names for suffix in found[name]]
    types = _types(conn, [name + suffix for name, suffix in probed] + names)
    list_names = {name for name, kind in zip(names, types[len(probed):]) if kind == "list"}
    typed = [(name, suffix) for (name, suffix), kind in zip(probed, types) if kind == KEY_TYPES[suffix]]
    streams = [name for name, suffix in typed if suffix == DEAD_LETTERS_SUFFIX]
    typed = [(name, suffix) for name, suffix in typed if suffix != DEAD_LETTERS_SUFFIX]
    with conn.pipeline(transaction=False) as pipe:
        for name, suffix in typed:
            kind = KEY_TYPES[suffix]
            if kind == "hash":
                pipe.hrandfield(name + suffix, 10)  # field names only: a processing hash's values are tasks
            elif kind == "zset":
                pipe.zrange(name + suffix, 0, 0)
            else:
                pipe.lindex(name + suffix, 0)
        replies = pipe.execute()
    samples = [Sample(name, suffix, _head(suffix, reply), name in list_names)
               for (name, suffix), reply in zip(typed, replies)]
    return Candidates(samples, streams)


def _keys(conn: redis.Redis, match: Optional[str] = None) -> Iterator[str]:
    """Every key in the database (every node's, on a cluster), or those matching the glob pattern
    match, decoded."""
    for raw in conn.scan_iter(match=match, count=1000):
        yield cast(bytes, raw).decode(errors="replace")


def task_queues(conn: redis.Redis, task_id: str) -> List[str]:
    """The queues holding a tracked record of task_id (a hash N_task:<id>), by name (see id_queues)."""
    return id_queues(conn, task_id).tasks


class IdQueues(NamedTuple):
    """The queues, by name, holding a tracked task's record (a hash N_task:<id>) of an id, and those
    holding a workflow (a hash N_flow:<id>) of it."""

    tasks: List[str]
    workflows: List[str]


_INFIXES = "".join(a if a == b else f"[{a}{b}]" for a, b in zip(TASK_INFIX, FLOW_INFIX))
"""A glob matching TASK_INFIX and FLOW_INFIX (of one length: "_task:", "_flow:"), and a few strings
besides, which id_queues leaves out."""


def id_queues(conn: redis.Redis, some_id: str) -> IdQueues:
    """The queues holding a tracked record or a workflow of this id (a handle's .id): one SCAN MATCH over
    the whole keyspace (every node's, on a cluster; Redis filters the keys, the id matched literally,
    glob characters and all), then their TYPEs."""
    if not some_id:
        return IdQueues([], [])
    keys = sorted(key for key in _keys(conn, "*" + _INFIXES + _GLOB_SPECIAL.sub(r"\\\g<0>", some_id))
                  if any(key.endswith(infix + some_id) and len(key) > len(infix + some_id)
                         for infix in (TASK_INFIX, FLOW_INFIX)))
    hashes = [key for key, kind in zip(keys, _types(conn, keys)) if kind == "hash"]
    return IdQueues(*([key[: -len(infix + some_id)] for key in hashes if key.endswith(infix + some_id)]
                      for infix in (TASK_INFIX, FLOW_INFIX)))


class Record(NamedTuple):
    """A tracked task's record as people see it: its fields but its blob, its TTL (as TTL says it), and
    the first bytes of its blob with the blob's length (None, -1 without one)."""

    fields: Dict[bytes, bytes]
    ttl: int
    blob: Optional[bytes]
    length: int


def task_record(conn: redis.Redis, name: str, task_id: str, head: int) -> Optional[Record]:
    """The record of a tracked task of the queue, its blob cut to its first head bytes; None if there is
    none. One script call, never a whole blob."""
    reply = cast(List[Any], Scripts(conn)[PEEK_RECORD](record=QueueKeys.of(name).task(task_id), head=head))
    fields = dict(zip(reply[2::2], reply[3::2]))
    if not fields:
        return None
    blob = fields.pop(b"blob", None)
    return Record(fields, int(reply[0]), blob, int(reply[1]))


_GLOB_SPECIAL = re.compile(r"[*?\[\]\\]")
"""What a SCAN MATCH pattern reads as a wildcard or an escape: escaped to match an id as it is."""


def _types(conn: redis.Redis, keys: Sequence[str]) -> List[str]:
    """The type of each key ("none" for a missing one), in one round trip."""
    with conn.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.type(key)
        return [kind.decode() if isinstance(kind, bytes) else kind for kind in pipe.execute()]


def _head(suffix: str, reply: object) -> List[bytes]:
    """A sample's reply as the Sample.head of a key with this suffix."""
    kind = KEY_TYPES[suffix]
    if kind == "hash":  # HRANDFIELD: [field, ...]
        return cast(List[bytes], reply)
    if kind == "zset":
        members = cast(List[bytes], reply)
        return [member[SCHEDULED_PREFIX_BYTES:] for member in members] if suffix == SCHEDULED_SUFFIX else members
    return [] if reply is None else [cast(bytes, reply)]


class HeadWait(NamedTuple):
    """How long the task at the head of a queue has waited, in seconds by Redis's clock: measured (its
    tracked record says since when it waits), or a lower bound (since a sweep first saw it at the head)."""

    seconds: float
    measured: bool


@dataclass(frozen=True)
class Counts:
    """A queue's numbers: tasks pending, held by workers (processing), scheduled and dead (in the
    dead-letter stream and in an N_dead list of older versions, not yet moved); its live workers (see
    live_go_workers: ours and go-delayed's); whether it is paused; its counters by COUNTED_EVENTS (0
    without a counts hash), and its workflows' by COUNTED_WORKFLOWS; limit_keys: the limit keys in its
    limits registry (0: no task of it ever ran under a limit; see delayed.protocol.limits); waited: how
    long the task at the head of the queue has waited, if anything in Redis says (see head_wait), else
    None; with heads, the blob at the head of the queue (else, or if it is empty, None)."""

    pending: int
    processing: int
    scheduled: int
    dead: int
    workers: int
    paused: bool
    events: Tuple[int, ...]
    workflows: Tuple[int, ...]
    limit_keys: int
    waited: Optional[HeadWait] = None
    head: Optional[bytes] = None


def counts(conn: redis.Redis, names: Sequence[str], heads: bool = False) -> List[Counts]:
    """The Counts of each queue, in one round trip; one more if go-delayed ids hold tasks (their
    keep-alive keys, see live_go_workers), and one per queue that has tasks pending and is tracked or
    noted by a sweep (see head_wait): other queues pay nothing for it. Reads field names of the
    processing hashes, never a task."""
    per_queue = 13 if heads else 12
    with conn.pipeline(transaction=False) as pipe:
        for keys in map(QueueKeys.of, names):
            pipe.llen(keys.name)
            pipe.hlen(keys.processing)
            pipe.zcard(keys.scheduled)
            pipe.xlen(keys.dead_letters)
            pipe.llen(keys.dead)
            pipe.zcount(keys.workers, time.time(), "+inf")
            pipe.hkeys(keys.processing)
            pipe.hmget(keys.counts, COUNTED_EVENTS + COUNTED_WORKFLOWS)
            pipe.exists(keys.paused)
            pipe.exists(keys.tracked)
            pipe.exists(keys.head_since)
            pipe.hlen(keys.limits)
            if heads:
                pipe.lindex(keys.name, 0)
        replies = pipe.execute()
    rows = [replies[i * per_queue:(i + 1) * per_queue] for i in range(len(names))]
    go_workers = live_go_workers(conn, [[field.decode(errors="replace") for field in row[6]] for row in rows])
    found = []
    for name, row, go in zip(names, rows, go_workers):
        pending, processing, scheduled, dead_letters, dead, ours, _, events, paused, tracked, noted, limited, *head = row
        counted = tuple(int(count or 0) for count in events)
        found.append(Counts(pending, processing, scheduled, dead_letters + dead, ours + len(go), bool(paused),
                            counted[:len(COUNTED_EVENTS)], counted[len(COUNTED_EVENTS):], limited,
                            head_wait(conn, name) if pending and (tracked or noted) else None, *head))
    return found


def head_wait(conn: redis.Redis, name: str) -> Optional[HeadWait]:
    """How long the task at the head of the queue has waited, by Redis's clock: measured if it is
    tracked and its record is there (since its record's due, else enqueued); else a lower bound, since
    a sweep first saw it at the head, if the queue's head_since marker names this head (by its sha1);
    else None. One script call (lua/waiting_since.lua)."""
    reply = cast(Optional[List[bytes]], Scripts(conn, QueueKeys.of(name))[WAITING_SINCE]())
    if not reply:
        return None
    kind, since_text, now_text = reply
    try:
        since, now = float(since_text), float(now_text)
    except ValueError:  # a record whose times do not read as ours write them
        return None
    measured = kind == b"tracked"
    since = since if measured else since / 1000  # a sweep notes milliseconds
    return HeadWait(max(now - since, 0.0), measured) if math.isfinite(since) else None


def dead_counts(conn: redis.Redis, names: Sequence[str]) -> List[int]:
    """Per queue, its dead letters: in its stream, and in an N_dead list of older versions not yet
    moved (as Counts.dead). One round trip."""
    with conn.pipeline(transaction=False) as pipe:
        for keys in map(QueueKeys.of, names):
            pipe.xlen(keys.dead_letters)
            pipe.llen(keys.dead)
        replies = pipe.execute()
    return [int(replies[i]) + int(replies[i + 1]) for i in range(0, len(replies), 2)]


class Worker(NamedTuple):
    """One of our live workers on a queue: its id, and the unix time its keep-alive lapses."""

    id: str
    expires: float


def holder_ids(conn: redis.Redis, name: str) -> List[str]:
    """The worker ids that hold a task of the queue now (the fields of N_processing), any worker's."""
    return [field.decode(errors="replace") for field in
            cast(List[bytes], conn.hkeys(QueueKeys.of(name).processing))]


def live_workers(conn: redis.Redis, name: str, now: float) -> List[Worker]:
    """Our workers on the queue whose keep-alive lapses after now, soonest first."""
    live = cast(List[Tuple[bytes, float]],
                conn.zrangebyscore(QueueKeys.of(name).workers, now, "+inf", withscores=True))
    return [Worker(member.decode(errors="replace"), expires) for member, expires in live]


def live_go_workers(conn: redis.Redis, held: Sequence[Sequence[str]]) -> List[List[Tuple[str, float]]]:
    """Per queue, given the ids holding its tasks (the field names of its N_processing), its live
    go-delayed workers: (id, seconds until its keep-alive lapses). A go-delayed worker registers
    nowhere: it is live on a queue while its id (GO_WORKER_ID) holds one of its tasks (it never
    releases its last one) and its keep-alive key (the bare id) lives. With our workers (N_workers,
    see live_workers), these are the workers every view counts and lists. One round trip for all
    queues; none if no go-delayed id holds a task."""
    go_ids = [[worker_id for worker_id in ids if GO_WORKER_ID.fullmatch(worker_id)] for ids in held]
    lapses = iter(keep_alive_lapses(conn, [worker_id for ids in go_ids for worker_id in ids]) if any(go_ids) else [])
    return [[(worker_id, lapse) for worker_id, lapse in zip(ids, lapses) if lapse is not None] for ids in go_ids]


def keep_alive_lapses(conn: redis.Redis, worker_ids: Sequence[str]) -> List[Optional[float]]:
    """Per worker id, the seconds until its keep-alive key (the bare id) lapses; None where there is
    none (gone, or one without an expiry). One round trip."""
    with conn.pipeline(transaction=False) as pipe:
        for worker_id in worker_ids:
            pipe.pttl(worker_id)
        return [ttl / 1000 if ttl >= 0 else None for ttl in pipe.execute()]


def live_holders(conn: redis.Redis, name: str, limit: int, head: int) -> List[Tuple[str, bytes, int]]:
    """(worker id, the first head bytes of its task, the task's length) for the tasks held in the queue
    (at most limit, read with HSCAN in a script) whose worker's keep-alive key (its bare id) exists, go-delayed's
    workers included; a task whose keep-alive is gone is a lapsed worker's, which a sweeper will
    requeue: left out. Two round trips, never a whole blob."""
    reply = cast(List[object], Scripts(conn, QueueKeys.of(name))[PEEK_PROCESSING](limit=limit, head=head))
    held = [(cast(bytes, reply[i]).decode(errors="replace"), cast(bytes, reply[i + 2]), cast(int, reply[i + 1]))
            for i in range(0, len(reply), 3)]
    with conn.pipeline(transaction=False) as pipe:
        for worker_id, _, _ in held:
            pipe.exists(worker_id)
        alive = pipe.execute()
    return [task for task, live in zip(held, alive) if live]


def redis_time(conn: redis.Redis) -> float:
    """Redis's clock, unix seconds: what our scripts' times are written by."""
    seconds, micros = cast(Tuple[int, int], conn.time())
    return seconds + micros / 1_000_000


def worker_infos(conn: redis.Redis, name: str, worker_ids: Sequence[str]) -> List[Dict[bytes, bytes]]:
    """What each of our workers on the queue, by main id, says of itself: its description (a hash, see
    delayed.wire.worker_info), empty where there is none. One round trip."""
    keys = QueueKeys.of(name)
    with conn.pipeline(transaction=False) as pipe:
        for worker_id in worker_ids:
            pipe.hgetall(keys.worker_info(worker_id))
        return cast(List[Dict[bytes, bytes]], pipe.execute())


def claim_notes(conn: redis.Redis, name: str, worker_ids: Sequence[str]) -> List[Optional[bytes]]:
    """Per id of the queue, what its worker noted of when it claimed the task it holds (its field in the
    worker's description, see delayed.wire.worker_info), or None: not one of ours, or nothing noted. One
    round trip."""
    keys = QueueKeys.of(name)
    with conn.pipeline(transaction=False) as pipe:
        for worker_id in worker_ids:
            pipe.hget(keys.worker_info(keys.main_worker_id(worker_id) or worker_id), worker_id)
        return cast(List[Optional[bytes]], pipe.execute())


class Tick(NamedTuple):
    """A periodic entry and the last tick a scheduler claimed of it, as stored (a unix time, as
    text); queue: whose N_periodic hash holds it, None for the one hash older versions kept."""

    queue: Optional[str]
    name: str
    last_tick: str


def periodic_ticks(conn: redis.Redis, names: Sequence[str], limit: int) -> List[Tick]:
    """The entries of these queues' N_periodic hashes, then (outside a cluster) those of the old one
    that the queues' hashes do not know, each entry once (the first found), read with HSCAN until
    limit are found (each hash after that adds at most one more)."""
    found: Dict[str, Tick] = {}
    sources: List[Tuple[Optional[str], str]] = [(name, QueueKeys.of(name).periodic) for name in names]
    if not is_cluster(conn):
        sources.append((None, LEGACY_PERIODIC_KEY))
    for queue, key in sources:
        for field, value in conn.hscan_iter(key, count=100):
            entry = cast(bytes, field).decode(errors="replace")
            found.setdefault(entry, Tick(queue, entry, cast(bytes, value).decode(errors="replace")))
            if len(found) >= limit:
                break
    return list(found.values())


def pending_heads(conn: redis.Redis, name: str, start: int, count: int, head: int) -> List[Tuple[bytes, int]]:
    """At most count tasks of the queue from position start (0: the next a worker takes), in order, each
    cut to its first head bytes: (head, its full length). One round trip, never a whole blob."""
    reply = cast(List[object], Scripts(conn, QueueKeys.of(name))[PEEK_QUEUE](start=start, count=count, head=head))
    return [(cast(bytes, reply[i + 1]), cast(int, reply[i])) for i in range(0, len(reply), 2)]


def head_waits(conn: redis.Redis, names: Sequence[str]) -> List[Optional[float]]:
    """Per queue, the seconds its head task has stood there untaken as our sweeper saw it (its
    head_since key, written by Redis's clock, read against this machine's: a cluster's nodes each have
    their own), or None: no sweep noted one, or the queue was empty. One round trip."""
    with conn.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.get(QueueKeys.of(name).head_since)
        markers = pipe.execute()
    now_ms = time.time() * 1000
    waits: List[Optional[float]] = []
    for marker in markers:
        since = cast(bytes, marker or b"").rpartition(b":")[2]
        waits.append(max(now_ms - int(since), 0) / 1000 if since.isdigit() else None)
    return waits


class Scheduled(NamedTuple):
    """A scheduled task as operators see it: the head of its blob, the blob's length, when it is due
    (unix time), its ref (see delayed.protocol.scheduled), which names its member exactly, and why it
    waits, as its member's nonce says: "delayed", "retry", "limited" or "unknown" (see SCHEDULED_KINDS)."""

    head: bytes
    length: int
    due: float
    ref: str
    kind: str


def next_scheduled(conn: redis.Redis, name: str, count: int, start: int, head: int) -> List[Scheduled]:
    """count scheduled tasks of the queue, in the order they are due, from position start (0: due
    soonest), each cut to its first head bytes. One round trip, never a whole blob."""
    reply = cast(List[List[object]], Scripts(conn, QueueKeys.of(name))[PEEK_SCHEDULED](start=start, count=count, head=head))
    return [Scheduled(cast(bytes, blob_head), cast(int, length), float(cast(bytes, due)),
                      ref_of(cast(bytes, due).decode(), cast(bytes, nonce), cast(bytes, digest).decode()),
                      scheduled_kind(cast(bytes, nonce)))
            for due, length, blob_head, nonce, digest in reply]


class LastSweep(NamedTuple):
    """When a sweep of ours last claimed a queue (its N_swept record): seconds ago, by Redis's clock,
    and the interval of whoever claimed it."""

    ago: float
    interval: float


def last_sweeps(conn: redis.Redis, names: Sequence[str]) -> List[Optional[LastSweep]]:
    """Per queue, its LastSweep, or None: never swept by ours, or not for three of its intervals (the
    record expired). Two round trips: Redis's TIME (on a cluster, one node's), then the records."""
    seconds, micros = cast(Tuple[int, int], conn.time())
    now_ms = seconds * 1000 + micros // 1000
    with conn.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.get(QueueKeys.of(name).swept)
        records = pipe.execute()
    found: List[Optional[LastSweep]] = []
    for record in records:
        at, _, interval = cast(bytes, record or b"").partition(b":")
        found.append(LastSweep(max(now_ms - int(at), 0) / 1000, int(interval) / 1000)
                     if at.isdigit() and interval.isdigit() else None)
    return found


def lapsed_holders(conn: redis.Redis, names: Sequence[str]) -> List[int]:
    """Per queue, the tasks held by workers whose keep-alive key (the bare worker id) is gone: dead
    workers' tasks that a sweep will requeue. Two round trips, the ids (HKEYS) then one EXISTS each;
    never a blob."""
    with conn.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hkeys(QueueKeys.of(name).processing)
        holders = cast(List[List[bytes]], pipe.execute())
    with conn.pipeline(transaction=False) as pipe:
        for worker_id in (worker_id for ids in holders for worker_id in ids):
            pipe.exists(worker_id)
        alive = iter(pipe.execute())
    return [sum(not next(alive) for _ in ids) for ids in holders]
