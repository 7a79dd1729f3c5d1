"""The handles of tracked tasks that enqueue returns: read a task's record, wait for its result, cancel it."""
import asyncio
import math
import time
from typing import Any, Awaitable, Iterator, Optional, Protocol

from ..wire.tracking import ENDED, Cancel, TaskInfo, outcome

FIRST_POLL, MAX_POLL = 0.005, 0.5
"""result() looks at the record after 5 ms, then twice as long each time, at most every 0.5 s."""


class Records(Protocol):
    """What a handle reads through: a Queue."""

    @property
    def name(self) -> str: ...

    def task_info(self, task_id: str) -> TaskInfo: ...

    def cancel(self, task_id: str) -> Cancel: ...


class AsyncRecords(Protocol):
    """What an async handle reads through: an AsyncQueue."""

    @property
    def name(self) -> str: ...

    def task_info(self, task_id: str) -> Awaitable[TaskInfo]: ...

    def cancel(self, task_id: str) -> Awaitable[Cancel]: ...


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

    def __init__(self, queue: Records, task_id: str) -> None:
        self.queue = queue
        self.id = task_id

    def info(self) -> TaskInfo:
        """Its record, read now; TaskNotFoundError once it expired (or for an id never tracked)."""
        return self.queue.task_info(self.id)

    def status(self) -> str:
        """One of Status (info() has what goes with it)."""
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

    def __init__(self, queue: AsyncRecords, task_id: str) -> None:
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
