"""Redis key names of a queue: the one place the wire format names them.

A queue named N uses the keys below, as go-delayed and keakon/delayed 1.x do.
Each live worker also owns a string key named by its bare worker id (its
keep-alive), at the root of the database: any sweeper, Python or Go, treats a
worker whose key is gone as dead and requeues the task it holds.

In a Redis Cluster a queue's name carries a hash tag ("{orders}"): every key it owns then lives in
one slot, our workers' ids (so their keep-alive keys) included, since they end with that tag.
"""
import re
import secrets
from dataclasses import dataclass
from typing import List, Optional

NOTI_SUFFIX = "_noti"
PROCESSING_SUFFIX = "_processing"
DEAD_SUFFIX = "_dead"
DEAD_LETTERS_SUFFIX = "_dead_letters"
SCHEDULED_SUFFIX = "_scheduled"
UNIQUE_INFIX = "_unique:"
WORKERS_SUFFIX = "_workers"
UNNOTIFIED_SUFFIX = "_unnotified"
COUNTS_SUFFIX = "_counts"
TRACKED_SUFFIX = "_tracked"
TASK_INFIX = "_task:"
FLOW_INFIX = "_flow:"
WORKER_INFIX = "_worker:"
PAUSED_SUFFIX = "_paused"
SAMPLES_SUFFIX = "_samples"
HEAD_SINCE_SUFFIX = "_head_since"
SWEPT_SUFFIX = "_swept"
CANCELS_SUFFIX = "_cancels"
"""A queue's cancels channel (a pubsub channel, not a key: see QueueKeys.cancels)."""
LIMITS_SUFFIX = "_limits"
LIMIT_HOLDERS_SUFFIX = "_limit_holders"
LIMIT_RUNNING_INFIX = "_limit_running:"
LIMIT_WAITING_INFIX = "_limit_waiting:"
LIMIT_STARTS_INFIX = "_limit_starts:"
LIMIT_RESERVED_INFIX = "_limit_reserved:"

WORKER_ID_PREFIX = "delayed-py-"
GO_WORKER_ID = re.compile(r"[0-9a-fA-F]{32}")
"""A go-delayed worker's id, which is also its keep-alive key: 32 hex digits (ours start with WORKER_ID_PREFIX)."""
_OUR_ID = re.compile("(" + re.escape(WORKER_ID_PREFIX) + r"[0-9a-f]{32})(-[0-9]+)?(.*)", re.DOTALL)
"""Our worker ids (see new_worker_ids): the random base, maybe -N for an extra id, then the queue's suffix."""
SCHEDULED_PREFIX_BYTES = 8
"""The nonce before the blob in a member of a queue's scheduled set (see QueueKeys.scheduled)."""
SCHEDULED_KINDS = {b"d": "delayed", b"r": "retry", b"l": "limited"}
"""Why a scheduled task waits, by the first byte of its member's nonce: "delayed" (a producer's delay=
or at=), "retry" (a worker's retry with backoff, or a retry=-1 task run again later) or "limited" (its
rate_limit held it back at its claim until a start is free for it: see delayed/protocol/lua/admit.lua);
members written before the nonce said it (its first byte random) read as "unknown"."""

COUNTED_EVENTS = ("enqueued", "done", "retried", "dead")
"""The fields of a queue's counts hash that count tasks (see QueueKeys.counts)."""
WORKFLOW_EVENTS = ("started", "done", "failed")
"""What a queue's counts hash counts of the workflows enqueued on it, each in the field "workflows_" + event
(enqueue_flow.lua, flow.lua; see QueueKeys.counts)."""
COUNTED_WORKFLOWS = tuple("workflows_" + event for event in WORKFLOW_EVENTS)
"""The fields of a queue's counts hash that count workflows, in WORKFLOW_EVENTS' order."""

PERIODIC_SUFFIX = "_periodic"
LEGACY_PERIODIC_KEY = "delayed_periodic"
"""The one hash of every queue's periodic ticks, as versions before per-queue ones kept them: read
(outside a cluster) for an entry its queue's hash does not know yet."""

CRASHES_SUFFIX = "_crashes"
"""A hash versions before counted crash loops in; no longer read or written, but a queue's name still."""
KEY_SUFFIXES = (NOTI_SUFFIX, PROCESSING_SUFFIX, DEAD_SUFFIX, DEAD_LETTERS_SUFFIX, SCHEDULED_SUFFIX, WORKERS_SUFFIX,
                UNNOTIFIED_SUFFIX, COUNTS_SUFFIX, TRACKED_SUFFIX, PAUSED_SUFFIX, PERIODIC_SUFFIX, SAMPLES_SUFFIX,
                HEAD_SINCE_SUFFIX, SWEPT_SUFFIX, CRASHES_SUFFIX, LIMITS_SUFFIX, LIMIT_HOLDERS_SUFFIX)
"""What a queue's keys add to its name: a name ending with one is another queue's key (see check_queue_name)."""
KEY_INFIXES = (UNIQUE_INFIX, TASK_INFIX, WORKER_INFIX, FLOW_INFIX, LIMIT_RUNNING_INFIX, LIMIT_WAITING_INFIX,
               LIMIT_STARTS_INFIX, LIMIT_RESERVED_INFIX)
"""What a queue's keys of many add to its name, before their own part."""


@dataclass(frozen=True)
class QueueKeys:
    """The keys of queue `name`.

    name: list of msgpack task blobs.
    noti: list holding one "1" per enqueued task; workers BLPOP it.
    processing: hash, worker id -> the blob that worker holds.
    dead: list of dead-letter records (JSON) as versions before dead_letters wrote them; moved
    into dead_letters when an operator's command first touches it (ours only).
    dead_letters: stream of dead letters, fields "record" (JSON) and "task" (the raw blob); the
    stream ids are the letters' ids; ours only, Go peers ignore it.
    scheduled: sorted set of delayed tasks and retries waiting to be due (score: unix time);
    each member is an 8-byte nonce then the blob: its first byte says a delayed task from a retry
    (SCHEDULED_KINDS), the rest are random; ours only, moved into `name` when due.
    workers: sorted set, our workers' main ids -> when their keep-alive expires (unix time);
    for `python -m delayed stats` and `workers` (go-delayed's workers are not listed).
    unnotified: string, "<sha1 of the queue's head>:<unix ms>": when a sweep first saw tasks
    without notifications behind that head; the sweeper tops them up once it stood still long
    enough (ours only).
    counts: hash, event -> how many tasks our scripts saw it happen to, since the key was created
    (ours only; go-delayed's producers and workers do not count): "enqueued" (our producers,
    the periodic scheduler and dead-letter requeues put a task in the queue or the scheduled
    set), "done" (our workers released a finished task), "retried" (requeued or rescheduled
    after a failure), "dead" (dead-lettered, crash loops included; a task that ends cancelled counts in
    none of these three, even one cancelled while it ran); and of the workflows enqueued on
    the queue (COUNTED_WORKFLOWS): "workflows_started" (enqueued), "workflows_done" (ended done: no
    failure stopped it or went to an on_failure step), "workflows_failed" (a step's failure stopped
    it, or it ended after an on_failure step took a failure: each workflow once; one resumed by
    requeuing that step counts in "workflows_done" too if it then ends well; one cancelled counts
    in neither).
    tracked: string, exists once a tracked task (enqueued with result_ttl) was enqueued to the queue:
    until then claims and sweeps do not look inside blobs for tracked ids (ours only).
    paused: string, present while the queue is paused (`delayed pause`), holding the unix time it
    was paused: our workers' claim scripts take no task from a paused queue (ours only: go-delayed's
    workers do not know about it).
    periodic: hash, periodic entry name -> the last tick a scheduler replica claimed for this queue (ours).
    head_since: string, "<sha1 of the queue's head>:<unix ms>": when a sweep first saw that task at the
    head of the queue, gone with an empty queue (ours only): how long a task has waited there
    untaken, for `delayed stats` (see --go-wait, and the latency of a queue whose head is untracked).
    samples: stream, the dashboard's samples of the queue's counts and counters (the entry id says
    when), capped and expiring, so its charts survive a restart (ours; see delayed.protocol.samples).
    swept: string, "<unix ms>:<interval ms>": when a sweep of ours last claimed the queue, by Redis's
    clock, and the interval of whoever claimed it; a periodic sweep claims the queue only once its own
    interval has passed since, so workers and sweepers sweep it at most once per interval between them.
    Expires three intervals after it was written (ours; see delayed/protocol/lua/claim_sweep.lua).
    limits: hash, limit key -> the limits its tasks carried when one was last admitted, as JSON:
    {"rate_limit": "100/m", "period": 60, "concurrency_limit": 5, "seen": unix seconds} (the limits it
    does not have left out), for `delayed stats` and the dashboard (ours; see limits.lua).
    limit_holders: hash, worker id -> the limit key whose concurrency slot that id holds while it runs
    the task it was admitted for: every script that ends a hold frees the slot through it (ours).
    Per limit key K (see the methods below; limits.lua documents each): limit_running(K), the ids
    holding its slots; limit_waiting(K), the blobs held back for a slot; limit_starts(K), its starts;
    limit_reserved(K), the starts reserved for the blobs its rate_limit held back.
    cancels: a pubsub channel, not a key: the cancel of a tracked task a worker runs publishes the
    task's id (32 hex digits) on it, and our workers (Python's and Go's) serving the queue listen, to
    stop that task (see delayed/protocol/lua/tracking.lua's track.cancel).
    """

    name: str
    noti: str
    processing: str
    dead: str
    scheduled: str
    workers: str
    unnotified: str
    dead_letters: str
    counts: str
    tracked: str
    paused: str
    periodic: str
    samples: str
    head_since: str
    swept: str
    limits: str
    limit_holders: str
    cancels: str

    @property
    def task_prefix(self) -> str:
        """What a tracked task's record key is: this, then the task's id (see `task`)."""
        return self.name + TASK_INFIX

    def task(self, task_id: str) -> str:
        """The record of a tracked task: a hash the scripts write (see delayed/protocol/lua/tracking.lua), kept
        result_ttl seconds after the task ended; named after the queue, so a hash tag in it holds too."""
        return self.task_prefix + task_id

    def flow(self, flow_id: str) -> str:
        """A workflow enqueued on this queue: a hash the scripts write (see delayed/protocol/lua/flow.lua),
        kept result_ttl seconds after the workflow ended; named after the queue, so in its slot."""
        return self.name + FLOW_INFIX + flow_id

    def worker_info(self, worker_id: str) -> str:
        """One of our workers' description (host, pid, ...: see delayed.wire.worker_info), named after its
        main id on this queue: a hash with its keep-alive keys' expiry, in the queue's slot."""
        return self.name + WORKER_INFIX + worker_id

    def main_worker_id(self, worker_id: str) -> Optional[str]:
        """The main id of the worker that one of our ids on this queue is of: the id itself, or the id
        without its -N (see new_worker_ids); None for an id that is not ours."""
        match = _OUR_ID.fullmatch(worker_id)
        return match.group(1) + self.worker_id_suffix if match and match.group(3) == self.worker_id_suffix else None

    @property
    def limit_running_prefix(self) -> str:
        """What the set of the ids holding a limit key's concurrency slots is: this, then the key."""
        return self.name + LIMIT_RUNNING_INFIX

    @property
    def limit_waiting_prefix(self) -> str:
        """What the list of the blobs a limit key's concurrency_limit held back is: this, then the key."""
        return self.name + LIMIT_WAITING_INFIX

    @property
    def limit_starts_prefix(self) -> str:
        """What the sorted set of a limit key's starts (its rate_limit's log) is: this, then the key."""
        return self.name + LIMIT_STARTS_INFIX

    @property
    def limit_reserved_prefix(self) -> str:
        """What the sorted set of the starts reserved for a limit key's rate-held blobs is: this, then the key."""
        return self.name + LIMIT_RESERVED_INFIX

    def limit_running(self, key: str) -> str:
        """A set: the worker ids holding limit key's concurrency slots (the tasks they run were admitted)."""
        return self.limit_running_prefix + key

    def limit_waiting(self, key: str) -> str:
        """A list: the blobs limit key's concurrency_limit held back at their claim, oldest first; one goes
        back to the head of the queue each time a slot frees."""
        return self.limit_waiting_prefix + key

    def limit_starts(self, key: str) -> str:
        """A sorted set: limit key's starts within its rate_limit's period (score: unix ms), those reserved
        for the rate-held blobs (due later) included."""
        return self.limit_starts_prefix + key

    def limit_reserved(self, key: str) -> str:
        """A sorted set: the starts reserved for the blobs limit key's rate_limit held back, not taken yet
        (as in limit_starts); a claim of the key takes one once it is due."""
        return self.limit_reserved_prefix + key

    def unique(self, key: str) -> str:
        """The lock of unique tasks with this key: a string key, holding a token, with an expiry."""
        return self.name + UNIQUE_INFIX + key

    @property
    def worker_id_suffix(self) -> str:
        """What our worker ids on this queue end with: ":{tag}" for a name with a hash tag, else nothing."""
        tag = hash_tag(self.name)
        return "" if tag is None else f":{{{tag}}}"

    def worker_ids(self, count: int) -> List[str]:
        """count ids for one worker process on this queue (see new_worker_ids), each ending with the
        queue's hash tag, if it has one, so that their keep-alive keys live in the queue's slot."""
        return [worker_id + self.worker_id_suffix for worker_id in new_worker_ids(count)]

    @classmethod
    def of(cls, name: str) -> "QueueKeys":
        return cls(name, name + NOTI_SUFFIX, name + PROCESSING_SUFFIX, name + DEAD_SUFFIX, name + SCHEDULED_SUFFIX,
                   name + WORKERS_SUFFIX, name + UNNOTIFIED_SUFFIX,
                   name + DEAD_LETTERS_SUFFIX, name + COUNTS_SUFFIX, name + TRACKED_SUFFIX, name + PAUSED_SUFFIX,
                   name + PERIODIC_SUFFIX, name + SAMPLES_SUFFIX, name + HEAD_SINCE_SUFFIX, name + SWEPT_SUFFIX,
                   name + LIMITS_SUFFIX, name + LIMIT_HOLDERS_SUFFIX,
                   name + CANCELS_SUFFIX)


def scheduled_nonce(kind: str) -> bytes:
    """A nonce for a scheduled-set member of this kind (SCHEDULED_KINDS): its byte, then random ones,
    which keep identical tasks due at the same time apart."""
    [first] = [byte for byte, name in SCHEDULED_KINDS.items() if name == kind]
    return first + secrets.token_bytes(SCHEDULED_PREFIX_BYTES - 1)


def scheduled_kind(nonce: bytes) -> str:
    """Why the scheduled task whose member starts with this nonce waits (SCHEDULED_KINDS), else "unknown"."""
    return SCHEDULED_KINDS.get(nonce[:1], "unknown")


def new_worker_id() -> str:
    """A worker id (and keep-alive key name) that cannot collide in practice: 128 random bits."""
    return WORKER_ID_PREFIX + secrets.token_hex(16)


def new_worker_ids(count: int) -> List[str]:
    """count ids for one worker process: one random base, then -1, -2, ... for the extra slots."""
    base = new_worker_id()
    return [base] + [f"{base}-{slot}" for slot in range(1, count)]


def hash_tag(name: str) -> Optional[str]:
    """The hash tag of a key as Redis Cluster reads it (what lies between the first "{" and the next
    "}", when not empty), or None: keys with the same tag live in the same slot."""
    start = name.find("{")
    end = name.find("}", start + 1) if start >= 0 else -1
    return name[start + 1:end] if end > start + 1 else None


def check_queue_name(name: str, cluster: bool = False) -> None:
    """ValueError, saying why, for a name no queue can have: an empty one, or one that is a key of
    another queue (`a_noti` is queue a's notification list: the two queues would mix their keys);
    in a Redis Cluster (cluster), also one without a hash tag (see check_cluster_name)."""
    if not name:
        raise ValueError("a queue's name cannot be empty")
    for suffix in KEY_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            raise ValueError(f"queue name {name!r} is a key of queue {name[:-len(suffix)]!r} (its {suffix} key): "
                             "the two queues would mix their keys; name it otherwise")
    for infix in KEY_INFIXES:
        if infix in name[1:]:
            base = name[:name.index(infix, 1)]
            raise ValueError(f"queue name {name!r} holds {infix!r}, as the keys of queue {base!r} do: "
                             "the two queues would mix their keys; name it otherwise")
    if cluster:
        check_cluster_name(name)


def check_cluster_name(name: str) -> None:
    """In a Redis Cluster a queue's keys must share one slot: refuse a name without a hash tag, saying how to name it."""
    if hash_tag(name) is None:
        raise ValueError(f"queue {name!r} has no hash tag, which a Redis Cluster needs to keep all its keys in one "
                         f"slot: name it {'{' + name + '}'!r} (braces and all, everywhere the queue is named)")
