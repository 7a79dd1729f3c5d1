"""Per-task time limits: the TimeLimit middleware says each call's limit; SIGALRM interrupts a plain call
in the main thread, asyncio cancels a coroutine (and Slots injects into a slot thread, see
delayed.worker.slots)."""
import asyncio
import signal
import sys
import threading
from typing import Any, Awaitable, Callable, Dict, Optional, Sequence

from .middleware import Middleware
from .run import Run


class TimeLimitExceeded(BaseException):
    """Raised inside a task that ran past its time limit.

    A BaseException, like KeyboardInterrupt, so a task's `except Exception` does not swallow it.
    """


def can_enforce() -> bool:
    """Signals reach only the main thread: a plain call in another thread cannot be limited by SIGALRM."""
    return threading.current_thread() is threading.main_thread()


def exceeded(seconds: float) -> TimeLimitExceeded:
    """The error of a task that ran past its limit of seconds: it says the limit, as every time-out's does."""
    return TimeLimitExceeded(f"ran longer than its time limit of {seconds:g} s")


def call(seconds: Optional[float], func: Callable[..., Any], args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
    """func(*args, **kwargs), with TimeLimitExceeded raised inside it once `seconds` have passed
    (SIGALRM: main thread only); None: no limit.

    The alarm raises only while a frame other than this one runs, that is inside the call: an
    alarm that lands after the call returned (or raised), before the timer is disarmed, is
    ignored, so a finished call is never reported as timed out. This frame does nothing but
    arm, call and disarm. A call stuck in C code that never returns to the interpreter cannot
    be interrupted; a blocking system call can (it is interrupted and the exception raised).
    """
    if not seconds:
        return func(*args, **kwargs)
    here = sys._getframe()
    limit = seconds

    def expire(signum: int, frame: Any) -> None:
        if frame is not here:
            raise exceeded(limit)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return func(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


async def within(awaitable: Awaitable[Any], seconds: Optional[float]) -> Any:
    """Await awaitable; past `seconds`, cancel it, wait until it has stopped, and raise TimeLimitExceeded.

    (Not asyncio.wait_for: a TimeoutError the task raises itself must stay a failure of its own.)
    """
    if not seconds:
        return await awaitable
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:  # the call was cancelled (delayed.worker.cancels): so is the task running it
        await _stopped(task)
        raise
    if task in done:
        return task.result()
    await _stopped(task)
    raise exceeded(seconds)


async def _stopped(task: "asyncio.Future[Any]") -> None:
    """Cancel task and wait until it has stopped: a task that swallows its cancellation still never outlives its run."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


class TimeLimit(Middleware):
    """The time limit of each call: the task's own (its time_limit), else the worker's default (None: none)."""

    def __init__(self, default: Optional[float]) -> None:
        self.default = default
        self.options_only = default is None  # without a default, only a task's own option sets a limit

    def before(self, run: Run) -> None:
        assert run.task is not None
        run.limit = run.task.options.time_limit or self.default
