"""Tracked tasks (enqueued with result_ttl): their ids, results as a worker stores them, and records
as the scripts write them (delayed/protocol/lua/tracking.lua: the one place that writes one) read
back. The handles enqueue returns are in delayed.protocol.handles.

A tracked task is a PyTask or a GoTask whose options hold its id (`id`); an untracked task's blob is
unchanged, and costs nothing more anywhere. Its record lives in <queue>_task:<id> and expires
result_ttl seconds after the task ended.
"""
import math
import time
import uuid
from dataclasses import dataclass, fields
from typing import Any, Dict, NamedTuple, Optional, Tuple

import msgpack

from ..errors import TaskFailedError
from .strenum import StrEnum
from .task import TRACKED_TAIL, carries_options


class Status(StrEnum):
    """A tracked task's status, as its record stores it; `TaskInfo` says what each means.

    A `str` enum: `info.status == "done"` and `info.status == Status.DONE` are the same test. A task
    ends as done, failed, dead or cancelled.

    Attributes:
        WAITING: `"waiting"`: a workflow's step waiting on the steps before it
        SCHEDULED: `"scheduled"`
        PENDING: `"pending"`
        RUNNING: `"running"`
        RETRYING: `"retrying"`
        DONE: `"done"`
        FAILED: `"failed"`
        DEAD: `"dead"`
        CANCELLED: `"cancelled"`
    """

    WAITING = "waiting"
    SCHEDULED = "scheduled"
    PENDING = "pending"
    RUNNING = "running"
    RETRYING = "retrying"
    DONE = "done"
    FAILED = "failed"
    DEAD = "dead"
    CANCELLED = "cancelled"


ENDED = (Status.DONE, Status.FAILED, Status.DEAD, Status.CANCELLED)


def new_id() -> str:
    """A tracked task's id: 128 random bits, hex."""
    return uuid.uuid4().hex


def ttl_seconds(result_ttl: float) -> int:
    """result_ttl (checked by TaskOptions) as the whole seconds a record's expiry takes: rounded up."""
    return math.ceil(result_ttl)


def task_id(blob: bytes) -> Optional[str]:
    """The tracked id at the end of a blob (see delayed.task), or None: what the scripts' track.key
    reads, for the settlements Python writes without a decoded task (dead-lettered blobs, give-backs)."""
    if blob[-37:-32] != TRACKED_TAIL or not carries_options(blob):
        return None
    return blob[-32:].decode("ascii", errors="replace")


class Tracked(NamedTuple):
    """What a tracked task's settlement writes into its record (the scripts write it): on release,
    the result (msgpack) and a note; on a retry, the error; on a dead letter, the status (failed or
    dead) and the error. (A NamedTuple: one is made per finished task, on the worker's hot path.)"""

    task_id: str
    seconds: float = 0.0
    result: bytes = b""
    note: str = ""
    error: str = ""
    status: str = ""


def pack_result(value: Any, max_size: int) -> Tuple[bytes, str]:
    """A return value as the record keeps it, msgpack as task arguments are, and a note when it
    could not be: a value msgpack cannot take is stored as its repr, one over max_size bytes not at all."""
    try:
        return _bounded(msgpack.packb(value), "", max_size)
    except Exception as exc:  # msgpack raises TypeError, ValueError, OverflowError ...
        try:
            text = repr(value)
        except Exception as repr_exc:
            text = f"<{type(value).__name__} whose repr raised {type(repr_exc).__name__}>"
        return _bounded(msgpack.packb(text), f"not serialisable with msgpack ({type(exc).__name__}: {exc}): "
                        "stored as its repr", max_size)


def _bounded(data: bytes, note: str, max_size: int) -> Tuple[bytes, str]:
    if len(data) <= max_size:
        return data, note
    return msgpack.packb(None), f"{len(data)} bytes, over the queue's max_task_size of {max_size}: not stored"


@dataclass(frozen=True)
class TaskInfo:
    """A tracked task's record, as `handle.info()` and `queue.task_info(id)` read it.

    `status` says where the task is; the other fields hold what goes with it, and are None where it has
    none. Times are unix seconds.

    | status | meaning | with |
    | --- | --- | --- |
    | `waiting` | a workflow's step that waits on the steps before it (see `chain`) | `enqueued_at` |
    | `scheduled` | waits in the scheduled set (a delay, or `at`) | `due` |
    | `pending` | waits in the queue (or is due and about to be moved there) | `enqueued_at` |
    | `running` | a worker claimed it | `worker`, `started_at` |
    | `done` | it returned | `result`, `finished_at`, `seconds`, and `note` if the result was stored otherwise |
    | `retrying` | it raised and runs again | `attempts`, `due` (the next run), `error` |
    | `failed` | it raised (or its arguments did not fit) with no retries left: dead-lettered | `error`, `letter` |
    | `dead` | dead-lettered without running (not allowed, too large, a crash loop) | `error`, `letter` |
    | `cancelled` | `cancel()` removed it before it ran, or it ran and its cancel was requested meanwhile | `finished_at` |

    A running task whose cancel was requested (`cancel()` of a running task) still says `running`, with
    `cancel_requested_at`, until it stops: then it ends `cancelled`, whatever it did.

    Attributes:
        id (str): The task's id.
        queue (str): The queue's name.
        status (str): One of the statuses above, a `Status` value. A scheduled task that is due reads
            as pending.
        func (str): The task's function, `"module:func"`.
        enqueued_at (float | None): When it was enqueued.
        attempts (int): The runs a worker started so far (a task given back unstarted is not counted).
        due (float | None): When it is due (scheduled), or runs again (retrying).
        worker (str | None): The id of the worker that claimed it.
        started_at (float | None): When its last run started.
        finished_at (float | None): When it ended.
        seconds (float | None): How long its last run took.
        result (Any): What it returned (done): msgpack, as its arguments are.
        note (str | None): Why the result was stored otherwise: a value msgpack cannot take is stored as
            its `repr()`, and one over the queue's `max_task_size` is not stored.
        error (str | None): What its last run raised (retrying, failed, dead).
        letter (str | None): Its dead letter's id (failed, dead).
        expires_in (int | None): The seconds its record has left once the task ended (None before).
        cancel_requested_at (float | None): When a cancel was requested while a worker ran the task
            (or was taking it): it ends cancelled.
    """

    id: str
    queue: str
    status: str
    func: str
    enqueued_at: Optional[float]
    attempts: int
    due: Optional[float]
    worker: Optional[str]
    started_at: Optional[float]
    finished_at: Optional[float]
    seconds: Optional[float]
    result: Any
    note: Optional[str]
    error: Optional[str]
    letter: Optional[str]
    expires_in: Optional[int]
    cancel_requested_at: Optional[float] = None

    def as_dict(self) -> Dict[str, Any]:
        """The fields as a dict, shallow (`dataclasses.asdict` would copy the result all the way down)."""
        return {field.name: getattr(self, field.name) for field in fields(self)}


def parse(task_id: str, queue: str, fields: Dict[bytes, bytes], ttl: int, now: Optional[float] = None) -> TaskInfo:
    """A record's fields (HGETALL) and TTL as a TaskInfo; never raises, whatever the hash holds (a
    field that does not read as what our scripts write reads as missing)."""
    text = {key.decode(errors="replace"): value.decode(errors="replace")
            for key, value in fields.items() if key != b"result"}

    def number(name: str) -> Optional[float]:
        try:
            value = float(text[name])
        except (KeyError, ValueError):
            return None
        return value if math.isfinite(value) else None

    status, due = text.get("status", "?"), number("due")
    if status == Status.SCHEDULED and due is not None and due <= (time.time() if now is None else now):
        status = Status.PENDING.value  # due: moving due tasks puts it into the queue, if not done yet
    result, note = _result(fields.get(b"result")), text.get("note") or None
    if result is _UNREADABLE:
        result, note = None, "the stored result is not msgpack"
    return TaskInfo(
        id=task_id, queue=queue, status=status, func=text.get("func", ""), enqueued_at=number("enqueued"),
        attempts=int(number("attempts") or 0), due=due, worker=text.get("worker"), started_at=number("started"),
        finished_at=number("finished"), seconds=number("seconds"), result=result, note=note,
        error=text.get("error"), letter=text.get("letter"), expires_in=ttl if ttl >= 0 else None,
        cancel_requested_at=number("cancel_requested"))


_UNREADABLE = object()


def _result(raw: Optional[bytes]) -> Any:
    """A record's result, decoded; _UNREADABLE if it is not msgpack."""
    if raw is None:
        return None
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception:  # msgpack raises several unrelated types for bad input
        return _UNREADABLE


def outcome(info: TaskInfo) -> Any:
    """The result of an ended task; TaskFailedError for one that ended without one."""
    if info.status == Status.DONE:
        return info.result
    detail = f": {info.error}" if info.error else ""
    raise TaskFailedError(f"task {info.id} ({info.func}) {info.status}{detail}", info)


@dataclass(frozen=True)
class Cancel:
    """What `cancel()` did; true, as a bool, if it cancelled the task or requested its cancel.

    Attributes:
        cancelled (bool): Whether the task was cancelled: it waited, and will never run.
        status (str): The status the task had: what it was when cancelled, or why it was not (ended).
        reason (str): What happened, in a line, e.g. `cancel requested: task ... is running on worker ...`.
        requested (bool): Whether its cancel was requested: a worker runs it (or is taking it). The
            worker stops it (a coroutine gets `CancelledError`, a function in a thread sees
            `delayed.current().cancelled`, a Go handler's context is cancelled), and whatever it does
            then, it ends `cancelled`, its result not kept, never retried.
        worker (str | None): With `requested`, the id of the worker that runs it (None while one is taking it).
    """

    cancelled: bool
    status: str
    reason: str
    requested: bool = False
    worker: Optional[str] = None

    def __bool__(self) -> bool:
        return self.cancelled or self.requested


def cancel_outcome(task_id: str, queue: str, outcome: str, status: str, worker: str = "") -> Cancel:
    """The cancel script's reply, said for people."""
    if outcome == "requested":
        where = f"is running on worker {worker}" if worker else "is being taken by a worker"
        return Cancel(False, status, f"cancel requested: task {task_id} {where}; it ends cancelled", True,
                      worker or None)
    reasons = {
        "cancelled": f"cancelled task {task_id} ({status}) in {queue}",
        "lost": f"task {task_id} is no longer in {queue} though its record says {status}: "
                "a worker that does not track tasks took it",
        "not_waiting": f"task {task_id} already ended ({status})",
    }
    return Cancel(outcome == "cancelled", status, reasons[outcome])
