"""Per-task time limits: SIGALRM interrupts a call that runs too long."""
import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional


class TimeLimitExceeded(BaseException):
    """Raised inside a task that ran past its time limit.

    A BaseException, like KeyboardInterrupt, so a task's `except Exception` does not swallow it.
    """


def can_enforce() -> bool:
    """Signals reach only the main thread: a worker running in another thread cannot limit time."""
    return threading.current_thread() is threading.main_thread()


@contextmanager
def time_limit(seconds: Optional[float]) -> Iterator[None]:
    """Raise TimeLimitExceeded in the calling (main) thread once `seconds` have passed; None: no limit.

    A call stuck in C code that never returns to the interpreter cannot be interrupted;
    a blocking system call can (it is interrupted and the exception raised).
    """
    if not seconds:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise TimeLimitExceeded(f"ran longer than its time limit of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
