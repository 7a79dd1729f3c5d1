"""What `python -m delayed` shows and does: queue counts, dead letters, scheduled tasks, workers, tracked tasks."""
import datetime
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import msgpack
import redis

from ..errors import DeadLetterError, MalformedTaskError
from ..protocol import inspect, samples
from ..protocol.discovery import queue_names  # noqa: F401  (the operating views find queues here)
from ..protocol.queue import Queue
from ..protocol.scheduled import ScheduledTasks
from ..wire import preview, worker_info
from ..wire.dead_letter import MAX_ERROR, check_ids, id_order
from ..wire.keys import COUNTED_EVENTS, COUNTED_WORKFLOWS, GO_WORKER_ID
from ..wire.task import BIN_MARKERS, GoTask, decode_task
from ..wire.tracking import Cancel, Status
from ..wire.tracking import parse as parse_record

Row = Dict[str, Any]

COUNTER_FIELDS = tuple(event + "_total" for event in COUNTED_EVENTS)
"""The counters in a stats row: enqueued_total, done_total, retried_total, dead_total (see QueueKeys.counts)."""
WORKFLOW_FIELDS = tuple(field + "_total" for field in COUNTED_WORKFLOWS)
"""The workflow counters in a stats row: workflows_started_total, workflows_done_total, workflows_failed_total
(see QueueKeys.counts)."""


def stats(conn: redis.Redis, names: Sequence[str], heads: bool = False) -> List[Row]:
    """Per queue (in the round trips of inspect.counts): tasks pending, held by workers, scheduled, dead;
    its live workers, ours and go-delayed's (those `workers` lists); whether it is paused (`delayed pause`);
    the queue's counters (COUNTER_FIELDS: tasks our scripts enqueued, released done, retried and
    dead-lettered since its counts hash was created, 0 without one) and those of the workflows
    enqueued on it (WORKFLOW_FIELDS: started, done, failed); "limit_keys": the limit keys its tasks
    ran under (0: none, and delayed.ops.limits reads nothing of it);
    "latency": how long a task waits in the queue before a worker takes it, in seconds, None if
    nothing tells; "latency_measured": True when measured, False when estimated, None when unknown;
    and "latency_basis", what it comes from (LATENCY_BASES);
    with heads, also "head": the blob at the head of the queue (None if empty)."""
    return [{"queue": name, "pending": counts.pending, "processing": counts.processing, "scheduled": counts.scheduled,
             "dead": counts.dead, "workers": counts.workers, "paused": counts.paused,
             **dict(zip(COUNTER_FIELDS, counts.events)), **dict(zip(WORKFLOW_FIELDS, counts.workflows)),
             "limit_keys": counts.limit_keys, **_measured_latency(counts),
             **({"head": counts.head} if heads else {})}
            for name, counts in zip(names, inspect.counts(conn, names, heads))]


LATENCY_BASES = {
    "empty": "measured: nothing is pending, 0",
    "tracked": "measured: the age of the task at the head of the queue, which is tracked (since it was "
               "enqueued, or came due), by Redis's clock",
    "sweep": "estimated, a lower bound: how long a sweep has seen the task now at the head of the queue "
             "there, by Redis's clock (untracked tasks carry no enqueue time)",
    "rate": "estimated: pending / out_per_s, the rate tasks left since the sample before",
    "unknown": "tasks wait, and nothing tells since when: the head is untracked, no sweep has seen it "
               "yet, and no rate is known",
}
"""What a stats row's latency comes from ("latency_basis"), best first: a table shows an estimate
with "~" and an unknown latency as "?"."""


def _measured_latency(counts: inspect.Counts) -> Row:
    """A stats row's latency fields (see stats) as far as one look tells them."""
    if not counts.pending:
        return {"latency": 0.0, "latency_measured": True, "latency_basis": "empty"}
    if counts.waited is not None:
        return {"latency": round(counts.waited.seconds, 1), "latency_measured": counts.waited.measured,
                "latency_basis": "tracked" if counts.waited.measured else "sweep"}
    return {"latency": None, "latency_measured": None, "latency_basis": "unknown"}


def estimated(rows: List[Row], rated: Optional[List[Row]] = None) -> List[Row]:
    """rows with the latency nothing else told estimated (see stats) from the out_per_s of the same
    queue in rated (rows of with_rates; default: rows themselves), where it is above 0."""
    out = {row["queue"]: row.get("out_per_s") for row in (rows if rated is None else rated)}
    return [{**row, "latency": round(row["pending"] / out[row["queue"]], 1), "latency_measured": False,
             "latency_basis": "rate"}
            if row.get("latency") is None and out.get(row["queue"]) else row for row in rows]


def with_rates(rows: List[Row], previous: List[Row], seconds: float) -> List[Row]:
    """rows with how fast each queue's counts and counters changed since previous (the same queues,
    seconds ago).

    in_per_s: tasks enqueued per second (enqueued_total); out_per_s: tasks that left per second,
    done or dead-lettered (done_total + dead_total). Both count our producers and workers only:
    go-delayed's pushes and releases do not count. None if the counters went down (their hash
    was deleted, or Redis restarted without it).
    net_per_s: the change of pending + processing + scheduled per second, everyone's tasks
    included: above 0 the queue fills, below 0 it drains. dead_per_s: dead letters added per
    second (less any deleted meanwhile). All None for a queue seen for the first time.
    A latency not measured is estimated from out_per_s (see stats).
    """
    before = {row["queue"]: row for row in previous}

    def held(row: Row) -> int:
        return row["pending"] + row["processing"] + row["scheduled"]

    def out(row: Row) -> int:
        return row["done_total"] + row["dead_total"]

    def rate(row: Row, then: Optional[Row], count: Callable[[Row], int], counter: bool = False) -> Optional[float]:
        if then is None or (counter and count(row) < count(then)):
            return None
        return round((count(row) - count(then)) / seconds, 1)

    rated = []
    for row in rows:
        then = before.get(row["queue"])
        rated.append({**row, "in_per_s": rate(row, then, lambda r: r["enqueued_total"], counter=True),
                      "out_per_s": rate(row, then, out, counter=True), "net_per_s": rate(row, then, held),
                      "dead_per_s": rate(row, then, lambda r: r["dead"])})
    return estimated(rated)


SAMPLED = ("pending", "processing", "scheduled", "dead") + COUNTER_FIELDS
"""The numbers of a stats row that record_samples keeps: what with_rates makes rates of."""


def record_samples(conn: redis.Redis, rows: List[Row], keep: int, ttl: int) -> None:
    """Add stats rows' SAMPLED numbers to their queues' sample history (each keeps its newest keep,
    and expires ttl seconds after the last)."""
    samples.append(conn, [(row["queue"], {field: row[field] for field in SAMPLED}) for row in rows], keep, ttl)


def sampled(conn: redis.Redis, names: Sequence[str], count: int, gap: float) -> Dict[str, List[Row]]:
    """Each queue's newest count samples, oldest first, as rows ("queue", "at": unix time, SAMPLED) with
    the rates of with_rates since the sample before (None for the first, and after more than gap
    seconds without one)."""
    history = {}
    for name, entries in samples.newest(conn, names, count).items():
        rows: List[Row] = []
        for at, numbers in entries:
            row = {"queue": name, "at": at, **{field: numbers.get(field, 0) for field in SAMPLED}}
            then = rows[-1] if rows and 0 < at - rows[-1]["at"] <= gap else None
            rows.append(with_rates([row], [then] if then else [], at - then["at"] if then else 1.0)[0])
        history[name] = rows
    return history


def workers(conn: redis.Redis, names: Sequence[str]) -> List[Row]:
    """The live workers per queue, those stats counts: id, host, pid, started (when it went online, ISO
    8601, UTC) and queues (those it serves) as ours say of themselves (None for go-delayed's), seconds
    until their keep-alive lapses, tasks they hold now, and "go": whether it is go-delayed's. Ours list
    themselves; a go-delayed worker registers nowhere, and is seen once it holds a task (it never
    releases its last one) while its keep-alive key lives (inspect.live_go_workers)."""
    now = time.time()
    rows = []
    for name in names:
        held = inspect.holder_ids(conn, name)
        live = inspect.live_workers(conn, name, now)
        for worker, fields in zip(live, inspect.worker_infos(conn, name, [worker.id for worker in live])):
            rows.append({"queue": name, "worker": worker.id, **_about(fields), "expires_in": round(worker.expires - now, 1),
                         "holding": sum(field.startswith(worker.id) for field in held), "go": False})
        rows += [{"queue": name, "worker": worker_id, **_about({}), "expires_in": round(lapses, 1), "holding": 1,
                  "go": True}
                 for worker_id, lapses in inspect.live_go_workers(conn, [held])[0]]
    return rows


def _about(fields: Dict[bytes, bytes]) -> Row:
    """A worker's description (delayed.wire.worker_info) as a row's host, pid, started (ISO 8601) and queues."""
    about = worker_info.about(fields)
    return {**about, "started": None if about["started"] is None else utc_time(about["started"])}


def holders(conn: redis.Redis, names: Sequence[str], limit: int = 200) -> List[Row]:
    """Who holds what, per queue, go-delayed's workers included (they register nowhere else): each
    field of N_processing (at most limit per queue, read with HSCAN) whose keep-alive key (the bare
    worker id) exists. Rows: queue, worker, "go" (a go-delayed id: 32 hex digits), task (described
    from its first PREVIEW_BYTES), and "claimed" (ISO 8601, UTC) and "running_for" (seconds since, by
    Redis's clock) where the worker noted when it claimed the task (ours do once they held it a second),
    else None.
    A field whose keep-alive is gone is a lapsed worker's task that a sweeper will requeue: left out."""
    rows = []
    for name in names:
        held = inspect.live_holders(conn, name, limit, PREVIEW_BYTES)
        since = [worker_info.claimed_at(note)
                 for note in inspect.claim_notes(conn, name, [worker_id for worker_id, _, _ in held])]
        now = inspect.redis_time(conn) if any(claimed is not None for claimed in since) else 0.0
        rows += [{"queue": name, "worker": worker_id, "go": GO_WORKER_ID.fullmatch(worker_id) is not None,
                  "task": describe_task(head, length), "claimed": None if claimed is None else utc_time(claimed),
                  "running_for": None if claimed is None else round(max(now - claimed, 0.0), 1)}
                 for (worker_id, head, length), claimed in zip(held, since)]
    return rows


def periodic(conn: redis.Redis, names: Sequence[str], limit: int = 1000) -> List[Row]:
    """The periodic entries schedulers have claimed ticks of, in these queues' N_periodic hashes (and,
    outside a cluster, the one hash older versions kept: its entries the queues' hashes do not know),
    at most limit, by name: queue (None for an old entry), name, last_tick (ISO 8601, UTC; the raw
    value if it is not a unix time)."""
    return [{"queue": tick.queue, "name": tick.name, "last_tick": _tick_time(tick.last_tick)}
            for tick in sorted(inspect.periodic_ticks(conn, names, limit), key=lambda tick: tick.name)]


def _tick_time(text: str) -> str:
    """A periodic tick as stored (a unix time) in ISO 8601; the raw value if it is not a number."""
    try:
        return utc_time(float(text))
    except ValueError:
        return text


PREVIEW_BYTES = 64 * 1024
"""Bytes of a blob the operating views read and decode: a longer one is shown from its head."""
_PY_FIELDS = ("args", "kwargs", "retry", "options")


def describe_task(blob: bytes, length: Optional[int] = None) -> Row:
    """A task blob, or the head of one length bytes long, as a bounded preview: JSON-able data
    (delayed.preview.value) for --json and tables alike, whatever the bytes.

    A PyTask: {"func", "args", "kwargs", "retry", "options"}; a GoTask: {"go": true, "func",
    "payload"} (its decoded argument), and "options" when it carries some; anything else:
    {"undecodable": <its length in bytes>}. A blob
    over PREVIEW_BYTES is read as far as its first PREVIEW_BYTES go, unchecked: its fields that did
    not fit are left out, and "truncated": true and "bytes": its length say so.
    """
    length = len(blob) if length is None else length
    if length > len(blob) or length > PREVIEW_BYTES:
        return _describe_head(blob[:PREVIEW_BYTES], length)
    try:
        task = decode_task(blob)
    except MalformedTaskError:
        return {"undecodable": length}
    if isinstance(task, GoTask):
        carried = task.options.wire_map()
        return {"go": True, "func": preview.value(task.func_path), "payload": preview.value(task.args),
                **({"options": preview.value(carried)} if carried else {})}
    return {"func": preview.value(task.func_path), "args": preview.value(task.args),
            "kwargs": preview.value(task.kwargs), "retry": task.retry, "options": preview.value(task.options.wire_map())}


def _describe_head(head: bytes, length: int) -> Row:
    """describe_task of a blob too long to decode whole: its fields as far as head holds them."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(head)
    fields: List[Any] = []
    size, second = 0, b""
    try:
        size = unpacker.read_array_header()
        while len(fields) < min(size, 5):
            fields.append(unpacker.unpack())
            if len(fields) == 1:
                second = head[unpacker.tell():unpacker.tell() + 1]  # the type byte of the second field
    except Exception:  # the head ends (OutOfData), or is not msgpack: keep the fields read so far
        pass
    if not fields or not isinstance(fields[0], str):
        return {"undecodable": length}
    shown: Row = {"func": preview.value(fields[0])}
    if size in (2, 3) and second and second[0] in BIN_MARKERS:  # a GoTask: [func, payload, options?]
        shown["go"] = True
        if len(fields) >= 2:
            try:
                shown["payload"] = preview.value(msgpack.unpackb(fields[1], raw=False, strict_map_key=False))
            except Exception:  # not msgpack: show the bytes
                shown["payload"] = preview.value(fields[1])
        if len(fields) == 3:
            shown["options"] = preview.value(fields[2])
    else:
        shown.update(zip(_PY_FIELDS, map(preview.value, fields[1:])))
    return {**shown, "truncated": True, "bytes": length}


def dead_letters(conn: redis.Redis, name: str, after: Optional[str] = None, count: int = 20,
                 migrate: bool = True) -> List[Row]:
    """Up to count dead letters after the letter id `after` (default: from the oldest), parsed, with
    their ids, each task read up to PREVIEW_BYTES (see DeadLetters.list's head). migrate=False never
    writes: letters still in an old N_dead list are then not moved, nor listed."""
    return Queue(name, conn).dead.list(after, count, migrate, head=PREVIEW_BYTES)


def dead_letters_of(conn: redis.Redis, names: Sequence[str], after: Optional[str] = None,
                    count: int = 20) -> Tuple[List[Row], bool]:
    """Up to count dead letters of these queues after the letter id `after` (default: from the oldest),
    merged oldest first by id (a letter's id is the millisecond it was written), each with "queue": the
    queue whose stream holds it; and whether more remain. Two queues may write a letter in the same
    millisecond, under the same id: a page ends only after every letter that shares its last id, so
    that the next page, after that id, misses none. Reads count + 1 letters of each queue that has
    letters (one round trip for the counts, then one call each; see dead_letters), and moves old
    N_dead lists into the streams as dead_letters does. DeadLetterError if `after` is no letter id."""
    if after is not None:
        check_ids([after])
    found = [{**entry, "queue": name} for name, letters in zip(names, inspect.dead_counts(conn, names)) if letters
             for entry in dead_letters(conn, name, after, count + 1)]
    found.sort(key=lambda entry: (id_order(entry["id"]), entry["queue"]))
    shown = count
    while shown < len(found) and found[shown]["id"] == found[shown - 1]["id"]:
        shown += 1
    return found[:shown], shown < len(found)


def letter_queues(conn: redis.Redis, names: Sequence[str], letter_id: str) -> List[str]:
    """The queues, among names, whose dead letters hold one with this id (each queue numbers its own:
    two may have one), by name. Asks each queue that has letters, reading none of their tasks."""
    check_ids([letter_id])
    found = []
    for name, letters in zip(names, inspect.dead_counts(conn, names)):
        try:
            if letters and Queue(name, conn).dead.show(letter_id, migrate=False, head=0):
                found.append(name)
        except DeadLetterError:
            pass
    return found


def filtered_dead(conn: redis.Redis, name: str, after: Optional[str] = None, reason: str = "", func: str = "",
                  count: int = 20, scan: int = 1000) -> Tuple[List[Row], Optional[str]]:
    """Up to count dead letters after `after` whose reason and func (the record's) are these (an empty
    one matches any), described (describe_dead; never migrating), looking at most scan letters: the
    letters, and where the next page starts (None at the end of the stream). The letters the bulk
    operations (requeue_dead, purge_dead, count_dead) take with the same filter."""
    letters, after = Queue(name, conn).dead.find(PREVIEW_BYTES, after, count, reason, func, scan)
    return [describe_dead(entry) for entry in letters], after


def dead_letter(conn: redis.Redis, name: str, letter_id: str, migrate: bool = True, whole: bool = False) -> Row:
    """One dead letter, parsed, its task read up to PREVIEW_BYTES (whole: all of it); DeadLetterError
    if there is none with this id (migrate: as dead_letters)."""
    return Queue(name, conn).dead.show(letter_id, migrate, head=None if whole else PREVIEW_BYTES)


def requeue_dead(conn: redis.Redis, name: str, letter_ids: Optional[Sequence[str]] = None,
                 progress: Optional[Callable[[int, int], None]] = None, reason: str = "", func: str = "",
                 through: Optional[str] = None) -> int:
    """Move dead letters back into the queue, each task with its notification: those with letter_ids
    (a missing id: DeadLetterError, and nothing moves), or else, in chunks, reporting progress, all
    those up to through (default: the newest as it starts) whose reason and func are these (an empty one
    matches any; see DeadLetters.requeue_all); returns how many moved."""
    queue = Queue(name, conn)
    if letter_ids is None:
        return queue.dead.requeue_all(progress, reason, func, through)
    return queue.dead.requeue(letter_ids)


def delete_dead(conn: redis.Redis, name: str, letter_ids: Sequence[str]) -> int:
    """Delete these dead letters; a missing id: DeadLetterError, and nothing is deleted."""
    return Queue(name, conn).dead.delete(letter_ids)


def purge_dead(conn: redis.Redis, name: str, reason: str = "", func: str = "", through: Optional[str] = None) -> int:
    """Delete every dead letter of the queue at once, or, with a filter or through, in chunks, those up to
    through (default: the newest as it starts) whose reason and func are these (an empty one matches any;
    see DeadLetters.purge); returns how many were deleted."""
    return Queue(name, conn).dead.purge(reason, func, through)


def matching(reason: str, func: str) -> str:
    """A dead-letter filter as the messages say it: ' with reason failed and function tasks:resize' ('' for none)."""
    said = [f"{what} {value}" for what, value in (("reason", reason), ("function", func)) if value]
    return " with " + " and ".join(said) if said else ""


def newest_dead(conn: redis.Redis, name: str) -> Optional[str]:
    """The id of the queue's newest dead letter (None if there is none): as through, what a bulk operation
    goes no further than."""
    return Queue(name, conn).dead.newest()


def count_dead(conn: redis.Redis, name: str, reason: str = "", func: str = "") -> Tuple[int, Optional[str]]:
    """How many dead letters of the queue there are (an old list's included), or, with a filter, how many
    have this reason and func (an empty one matches any), counted in chunks without writing; and, with a
    filter, the newest letter's id (else, or if there is none, None): pass it as through to purge_dead
    or requeue_dead to act on the letters counted, not on those written since."""
    dead = Queue(name, conn).dead
    if not reason and not func:
        return dead.count(), None
    through = dead.newest()
    return (0 if through is None else dead.count(reason, func, through)), through


def set_paused(conn: redis.Redis, name: str, paused: bool) -> bool:
    """Pause the queue (our workers take no new task from it; go-delayed's do not know about pausing)
    or resume it; False if it already was so."""
    queue = Queue(name, conn)
    return queue.pause() if paused else queue.resume()


def scheduled(conn: redis.Redis, name: str, count: int = 20, start: int = 0, refs: bool = False) -> List[Row]:
    """The next tasks to become due (from the start-th on): when; "kind", why it waits ("delayed",
    "retry", or "unknown" for one scheduled before members said it); "attempt" and "attempts", the
    run it will be and how many it may have, where its options carry them (a max_retries retry; else
    None); and what (each read at most PREVIEW_BYTES); with refs, also "ref", which names the task
    to run_scheduled and delete_scheduled."""
    rows = []
    for task in inspect.next_scheduled(conn, name, count, start, PREVIEW_BYTES):
        shown = describe_task(task.head, task.length)
        attempt, attempts = _attempt(shown.get("options"))
        rows.append({"due": utc_time(task.due), "kind": task.kind, "attempt": attempt, "attempts": attempts,
                     "task": shown, **({"ref": task.ref} if refs else {})})
    return rows


def _attempt(options: Any) -> Tuple[Optional[int], Optional[int]]:
    """The run a retry will be, and how many runs it may have, where a task's options (previewed) carry
    them (a max_retries task counts its failed attempts); else (None, None)."""
    if isinstance(options, dict):
        attempt, retries = options.get("attempt"), options.get("max_retries")
        if isinstance(attempt, int) and isinstance(retries, int):
            return attempt + 1, retries + 1
    return None, None


def run_scheduled(conn: redis.Redis, name: str, ref: str) -> bool:
    """Move the scheduled task ref names into the queue now, with its notification; False if it is no
    longer scheduled (moved when due, cancelled, or run or deleted by someone else)."""
    return ScheduledTasks(conn, name).run_now(ref)


def delete_scheduled(conn: redis.Redis, name: str, ref: str) -> bool:
    """Delete the scheduled task ref names; False if it is no longer scheduled."""
    return ScheduledTasks(conn, name).delete(ref)


def pending(conn: redis.Redis, name: str, start: int = 0, count: int = 50) -> List[Row]:
    """Tasks waiting in the queue from position start (0: the next a worker takes), in order: position,
    and the task as a preview (each read at most PREVIEW_BYTES)."""
    return [{"position": start + i, "task": describe_task(head, length)}
            for i, (head, length) in enumerate(inspect.pending_heads(conn, name, start, count, PREVIEW_BYTES))]


FUNC_HEAD = 1024
"""Bytes of each task pending_by_func reads: enough for its func path."""


def untaken_go_tasks(conn: redis.Redis, names: Sequence[str], older_than: float) -> List[Row]:
    """The queues whose head is a GoTask that has stood there untaken for more than older_than seconds,
    as our sweeper saw it (a go-delayed worker with that handler would have taken it): queue, func and
    waited (seconds). Queues no sweeper of ours sweeps are never flagged."""
    found = []
    for name, waited in zip(names, inspect.head_waits(conn, names)):
        if waited is None or waited <= older_than:
            continue
        for head, length in inspect.pending_heads(conn, name, 0, 1, FUNC_HEAD):
            shown = describe_task(head, length)
            if shown.get("go"):
                found.append({"queue": name, "func": shown.get("func"), "waited": round(waited, 1)})
    return found


UNSWEPT_INTERVALS = 2
"""A queue holding dead workers' tasks is flagged once no sweep of ours claimed it for this many of its intervals."""


def unswept(conn: redis.Redis, names: Sequence[str]) -> List[Row]:
    """The queues that hold tasks of dead workers (whose keep-alive key is gone) and that no sweep of ours
    claimed for UNSWEPT_INTERVALS of its interval (a queue never swept, or whose record expired, counts as
    not swept): nothing sweeps them, so those tasks wait. Rows: queue, lapsed (the tasks), swept_ago and
    interval (seconds, of the last sweep recorded; None if none is). Reads the sweep records, then the
    holders of the flagged queues (inspect.lapsed_holders), never a blob."""
    stale = [(name, last) for name, last in zip(names, inspect.last_sweeps(conn, names))
             if last is None or last.ago > UNSWEPT_INTERVALS * last.interval]
    return [{"queue": name, "lapsed": lapsed, "swept_ago": None if last is None else round(last.ago),
             "interval": None if last is None else last.interval}
            for (name, last), lapsed in zip(stale, inspect.lapsed_holders(conn, [name for name, _ in stale]))
            if lapsed]


def unswept_warning(row: Row) -> str:
    """What an unswept row (see unswept) means, and what to do, in one line."""
    tasks = f"{row['lapsed']} task{'s' if row['lapsed'] != 1 else ''} of dead workers"
    last = ("no sweep is recorded" if row["swept_ago"] is None else
            f"the last sweep was {row['swept_ago']} s ago, at an interval of {row['interval']:g} s")
    return (f"queue {row['queue']!r}: {tasks} {'wait' if row['lapsed'] != 1 else 'waits'} for a sweep, and {last}: "
            "start a worker of ours on it (workers sweep the queues they serve), or python -m delayed.sweeper")


def pending_by_func(conn: redis.Redis, name: str, first: int = 1000) -> List[Row]:
    """How many of the first `first` tasks in the queue call each function, most first: func (a
    preview; "(undecodable)" for what is no task), go (a GoTask's), count. Reads FUNC_HEAD bytes of each."""
    counted: Dict[Any, int] = {}
    for head, length in inspect.pending_heads(conn, name, 0, first, FUNC_HEAD):
        shown = describe_task(head, length)
        key = (shown.get("func", "(undecodable)"), bool(shown.get("go")))
        counted[key] = counted.get(key, 0) + 1
    return [{"func": func, "go": go, "count": count}
            for (func, go), count in sorted(counted.items(), key=lambda item: (-item[1], item[0]))]


def utc_time(timestamp: float) -> str:
    """A unix time as ISO 8601 (UTC); one no calendar holds (inf, from a producer's infinite delay) as it is."""
    try:
        return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).isoformat(timespec="seconds")
    except (OverflowError, ValueError, OSError):
        return str(timestamp)


def describe_dead(entry: Row) -> Row:
    """A dead letter for display: its task previewed (describe_task; None if it has none)."""
    task = entry["task"]
    return {**entry, "task": None if task is None else describe_task(task, entry.get("task_bytes"))}


CANCELLABLE = (Status.SCHEDULED, Status.PENDING, Status.RETRYING, Status.RUNNING)
"""The statuses of a tracked task that cancel() can still cancel: take off its queue, or stop while it runs."""
_TIMES = ("enqueued_at", "due", "started_at", "finished_at", "cancel_requested_at")


def tracked_task(conn: redis.Redis, task_id: str, queue: Optional[str] = None) -> Optional[Row]:
    """A tracked task's record, on queue, or else found on any queue (inspect.task_queues: the first by name),
    for display: TaskInfo's fields,
    times in ISO 8601 (UTC), the result and error as bounded previews, "cancellable" (whether cancel_task may
    still cancel it), "task": its blob, which the record keeps until it expires, as describe_task previews it
    (reading at most PREVIEW_BYTES; None in a record without one), and for a failed or dead task, from its
    dead letter, "traceback" (None without one) and "letter_found" (False once the letter was requeued,
    deleted or trimmed); None if no queue has a record of this id."""
    if queue is None:
        queues = inspect.task_queues(conn, task_id)
        if not queues:
            return None
        queue = queues[0]
    try:
        Queue(queue, conn)  # a name no queue can have (on a cluster, one without a hash tag) holds none of ours
    except ValueError:
        return None
    record = inspect.task_record(conn, queue, task_id, PREVIEW_BYTES)
    if record is None:  # expired since the scan found it
        return None
    info = parse_record(task_id, queue, record.fields, record.ttl).as_dict()
    for field in _TIMES:
        info[field] = None if info[field] is None else utc_time(info[field])
    letter = _letter_of(conn, queue, info["letter"])
    return {**info, "result": preview.value(info["result"]), "error": _cut(info["error"]), "note": _cut(info["note"]),
            "cancellable": info["status"] in CANCELLABLE, "task": None if record.blob is None else describe_task(record.blob, record.length),
            "traceback": None if letter is None else letter.get("traceback"), "letter_found": letter is not None}


def _letter_of(conn: redis.Redis, queue: str, letter_id: Optional[str]) -> Optional[Row]:
    """A task's dead letter (never migrating), or None: it has none, or it is no longer there."""
    if letter_id is None:
        return None
    try:
        return dead_letter(conn, queue, letter_id, migrate=False)
    except DeadLetterError:
        return None


def _cut(text: Optional[str]) -> Optional[str]:
    """A record's error or note, at most MAX_ERROR characters (a worker writes one line that long; a
    record may hold more)."""
    return text if text is None or len(text) <= MAX_ERROR else f"{text[:MAX_ERROR]}… ({len(text)} characters)"


def cancel_task(conn: redis.Redis, name: str, task_id: str) -> Cancel:
    """Queue.cancel: take a waiting tracked task off the queue, or request the cancel of a running one, its
    record ended as cancelled; TaskNotFoundError if there is no record of it."""
    return Queue(name, conn).cancel(task_id)


def cancel_workflow(conn: redis.Redis, name: str, flow_id: str) -> Cancel:
    """WorkflowHandle.cancel: cancel every step of the workflow, running ones too; TaskNotFoundError if
    there is no such workflow."""
    return Queue(name, conn).workflow(flow_id).cancel()
