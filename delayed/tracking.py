"""Tracked tasks (enqueued with result_ttl): their ids, results as a worker stores them, records
as the scripts write them (delayed/lua/tracking.lua: the one place that writes one) read back, and
the handles enqueue returns.

A tracked task is a PyTask whose options hold its id (`id`); an untracked task's blob is
unchanged, and costs nothing more anywhere. Its record lives in <queue>_task:<id> and expires
result_ttl seconds after the task ended.
"""
import asyncio
import math
import time
import uuid
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Dict, Iterator, NamedTuple, Optional, Tuple

import msgpack

from .errors import TaskFailedError
from .task import ID_OPTION, TRACKED_TAIL

if TYPE_CHECKING:
    from .queue import AsyncQueue, Queue

ENDED = ("done", "failed", "dead", "cancelled")
STATUSES = ("scheduled", "pending", "running", "retrying", *ENDED)
FIRST_POLL, MAX_POLL = 0.005, 0.5
"""result() looks at the record after 5 ms, then twice as long each time, at most every 0.5 s."""
_WITH_OPTIONS = b"\x95"  # a five-element msgpack array: a PyTask blob with options


def new_id() -> str:
    """A tracked task's id: 128 random bits, hex."""
    return uuid.uuid4().hex


def ttl_seconds(result_ttl: float) -> int:
    """result_ttl as the whole seconds a record's expiry takes (rounded up); ValueError unless positive."""
    if isinstance(result_ttl, bool) or not isinstance(result_ttl, (int, float)) or not 0 < result_ttl < math.inf:
        raise ValueError(f"result_ttl must be a positive number of seconds, got {result_ttl!r}")
    return math.ceil(result_ttl)


def task_id(blob: bytes) -> Optional[str]:
    """The tracked id at the end of a blob (see delayed.task), or None: what the scripts' track.key
    reads, for the settlements Python writes without a decoded task (dead-lettered blobs, give-backs)."""
    if blob[:1] != _WITH_OPTIONS or blob[-37:-32] != TRACKED_TAIL:
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
    """A tracked task as its record says: status (one of STATUSES; a scheduled task that is due
    reads as pending), and what its status has (None where it has none).

    Times are unix seconds; seconds is how long its last run took; result is the return value
    (done), note why it was stored otherwise; error is what its last run raised (retrying, failed,
    dead); letter is its dead letter's id; expires_in is the seconds its record has left (once ended).
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

    def as_dict(self) -> Dict[str, Any]:
        """The fields as a dict, shallow (dataclasses.asdict would copy the result all the way down)."""
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
    if status == "scheduled" and due is not None and due <= (time.time() if now is None else now):
        status = "pending"  # due: the forwarder moves it into the queue, if it has not yet
    result, note = _result(fields.get(b"result")), text.get("note") or None
    if result is _UNREADABLE:
        result, note = None, "the stored result is not msgpack"
    return TaskInfo(
        id=task_id, queue=queue, status=status, func=text.get("func", ""), enqueued_at=number("enqueued"),
        attempts=int(number("attempts") or 0), due=due, worker=text.get("worker"), started_at=number("started"),
        finished_at=number("finished"), seconds=number("seconds"), result=result, note=note,
        error=text.get("error"), letter=text.get("letter"), expires_in=ttl if ttl >= 0 else None)


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
    if info.status == "done":
        return info.result
    detail = f": {info.error}" if info.error else ""
    raise TaskFailedError(f"task {info.id} ({info.func}) {info.status}{detail}", info)


@dataclass(frozen=True)
class Cancel:
    """What cancel() did: cancelled (true as a bool) or not, the status the task had, and why, in a line."""

    cancelled: bool
    status: str
    reason: str

    def __bool__(self) -> bool:
        return self.cancelled


def cancel_outcome(task_id: str, queue: str, outcome: str, status: str) -> Cancel:
    """The cancel script's reply, said for people."""
    reasons = {
        "cancelled": f"cancelled task {task_id} ({status}) in {queue}",
        "taking": f"task {task_id} is being taken by a worker: too late to cancel",
        "lost": f"task {task_id} is no longer in {queue} though its record says {status}: "
                "a worker that does not track tasks took it",
    }
    if outcome == "not_waiting":
        reason = (f"task {task_id} is running: a running task is not interrupted" if status == "running" else
                  f"task {task_id} already ended ({status})")
    else:
        reason = reasons[outcome]
    return Cancel(outcome == "cancelled", status, reason)


def _polls(timeout: Optional[float]) -> Iterator[float]:
    """How long to sleep before each next look at a record; stops once timeout seconds have passed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    wait = FIRST_POLL
    while True:
        left = math.inf if deadline is None else deadline - time.monotonic()
        if left <= 0:
            return
        yield min(wait, left)
        wait = min(2 * wait, MAX_POLL)


def _timed_out(task_id: str, info: TaskInfo, timeout: Optional[float]) -> TimeoutError:
    return TimeoutError(f"task {task_id} still {info.status} after {timeout} s")


class TaskHandle:
    """A tracked task on a Queue: what enqueue(..., result_ttl=...) returns, and queue.task(id)."""

    def __init__(self, queue: "Queue", task_id: str) -> None:
        self.queue = queue
        self.id = task_id

    def info(self) -> TaskInfo:
        """Its record, read now; TaskNotFoundError once it expired (or for an id never tracked)."""
        return self.queue.task_info(self.id)

    def status(self) -> str:
        """One of STATUSES (info() has what goes with it)."""
        return self.info().status

    def result(self, timeout: Optional[float] = None) -> Any:
        """Wait up to timeout seconds (None: as long as it takes) for the task to end, then its return
        value; TaskFailedError if it failed, went dead or was cancelled; TimeoutError if still going."""
        info = self.info()
        for wait in _polls(timeout):
            if info.status in ENDED:
                break
            time.sleep(wait)
            info = self.info()
        if info.status not in ENDED:
            raise _timed_out(self.id, info, timeout)
        return outcome(info)

    def cancel(self) -> Cancel:
        """queue.cancel(self.id)."""
        return self.queue.cancel(self.id)

    def __repr__(self) -> str:
        return f"TaskHandle({self.id!r}, queue={self.queue.name!r})"


class AsyncTaskHandle:
    """A tracked task on an AsyncQueue, as TaskHandle with coroutines: `await handle.result()`."""

    def __init__(self, queue: "AsyncQueue", task_id: str) -> None:
        self.queue = queue
        self.id = task_id

    async def info(self) -> TaskInfo:
        return await self.queue.task_info(self.id)

    async def status(self) -> str:
        return (await self.info()).status

    async def result(self, timeout: Optional[float] = None) -> Any:
        info = await self.info()
        for wait in _polls(timeout):
            if info.status in ENDED:
                break
            await asyncio.sleep(wait)
            info = await self.info()
        if info.status not in ENDED:
            raise _timed_out(self.id, info, timeout)
        return outcome(info)

    async def cancel(self) -> Cancel:
        return await self.queue.cancel(self.id)

    def __repr__(self) -> str:
        return f"AsyncTaskHandle({self.id!r}, queue={self.queue.name!r})"
