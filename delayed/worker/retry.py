"""Retries: how long a failed task waits before its next run, and the middleware that settles each run
(Retries: it gives decide() the clock, the backoff curves and the retry-forever counts, and logs each
failure: how it is retried, or where it was dead-lettered)."""
import hashlib
import logging
import random
import time
from collections import OrderedDict
from typing import Any, Callable, Optional, Union

from ..wire.dead_letter import Reason
from ..wire.task import PyTask
from .decide import decide
from .holding import Bury, Cancelled, Release, Requeue, Reschedule, Settlement
from .middleware import Middleware
from .run import Run

logger = logging.getLogger(__name__)
worker_logger = logging.getLogger("delayed.worker")  # the name users configure, for the failure lines

RetryBackoff = Union[None, float, str]
"""A task's backoff option: None (the default curve), seconds, or the 'module:func' path of a curve."""
RETRY_FOREVER_FIRST = 0.1
RETRY_FOREVER_MAX = 60.0
"""A retry=-1 task that keeps failing waits 0.1 s, 0.2 s, 0.4 s ... up to a minute between runs."""


def exponential_with_jitter(attempt: int) -> float:
    """Sidekiq's curve: attempt**4 + 15 s plus up to 10 * (attempt + 1) s of jitter
    (16-35 s after the first failure, 31-61 s after the second, about 5 minutes after the fourth)."""
    return attempt ** 4 + 15 + random.random() * 10 * (attempt + 1)


def backoff_seconds(backoff: RetryBackoff, attempt: int, resolve: Callable[[str], Callable[..., Any]]) -> float:
    """Seconds before attempt number `attempt` + 1: backoff is None (the default curve), a number
    of seconds, or the 'module:func' path of an allowed function called with the attempt number."""
    if backoff is None:
        return exponential_with_jitter(attempt)
    if not isinstance(backoff, str):
        return float(backoff)
    try:
        return float(resolve(backoff)(attempt))
    except Exception:
        logger.exception("backoff function %s failed; using the default curve", backoff)
        return exponential_with_jitter(attempt)


class RetryForever:
    """How long a retry=-1 task waits before its next run: doubling with each failure of the same
    blob this process saw, from RETRY_FOREVER_FIRST up to RETRY_FOREVER_MAX. The count lives here,
    not in the blob, so the retried blob stays byte-identical to keakon's."""

    REMEMBERED = 10000

    def __init__(self) -> None:
        self._failures: "OrderedDict[bytes, int]" = OrderedDict()

    def next_delay(self, blob: bytes) -> float:
        digest = hashlib.sha1(blob).digest()
        failures = self._failures.pop(digest, 0) + 1
        self._failures[digest] = failures
        if len(self._failures) > self.REMEMBERED:
            self._failures.popitem(last=False)
        return min(RETRY_FOREVER_FIRST * 2 ** min(failures - 1, 30), RETRY_FOREVER_MAX)


class Retries(Middleware):
    """Settles every run with decide(), answering its questions (delayed.worker.decide.Policy): the
    clock, a backoff curve named by its path (resolved as the worker's allowlist resolves a task's
    function), and this process's retry-forever counts; logs an ERROR line for each run that failed or
    was refused, and an INFO line for each one cancelled (no failure). worker(): the worker's id, for its
    dead letters."""

    def __init__(self, resolve: Callable[[str], Callable[..., Any]], worker: Callable[[], Optional[str]]) -> None:
        self._resolve = resolve
        self._worker = worker
        self._forever = RetryForever()

    @property
    def worker(self) -> Optional[str]:
        return self._worker()

    def now(self) -> float:
        return time.time()

    def backoff(self, task: PyTask, attempt: int) -> float:
        return backoff_seconds(task.options.backoff, attempt, self._resolve)

    def forever(self, blob: bytes) -> float:
        return self._forever.next_delay(blob)

    def after(self, run: Run) -> None:
        settlement = run.settlement = decide(run, self)
        if type(settlement) is Cancelled:
            assert run.task is not None
            worker_logger.info("task %s %s cancelled: its cancel was requested while it %s", run.task.options.id,
                               run.task.func_path, "ran" if run.started else "waited to start")
        elif type(settlement) is not Release and run.held is None:
            _log_failure(run, settlement)


def _log_failure(run: Run, settlement: Settlement) -> None:
    """The ERROR line of a run that failed or was refused: how it is retried, or where its letter went."""
    task, error, queue, fields = run.task, run.error, run.queue, run.log_fields()
    if isinstance(settlement, Bury):
        fields["reason"] = str(settlement.reason)
        if settlement.reason in (Reason.FAILED, Reason.TIMED_OUT):
            assert task is not None
            worker_logger.error("task %s failed; dead-lettered in %s", task.func_path, queue.keys.dead_letters,
                                exc_info=error, extra=fields)
        else:
            worker_logger.error("dead-lettered a task in %s (%s): %s", queue.keys.dead_letters, settlement.reason,
                                run.refusal.error if run.refusal else "", extra=fields)
        return
    assert task is not None
    if isinstance(settlement, Requeue):
        worker_logger.error("task %s failed; retrying (%s left)", task.func_path, task.retry - 1, exc_info=error,
                            extra=fields)
    elif isinstance(settlement, Reschedule):
        delay = settlement.due - time.time()
        retries = task.options.max_retries
        if retries is None:
            worker_logger.error("task %s failed; retrying forever, next in %.1f s", task.func_path, delay,
                                exc_info=error, extra=fields)
        else:
            worker_logger.error("task %s failed (attempt %d of %d); next attempt in %.1f s", task.func_path,
                                task.options.attempt + 1, retries + 1, delay, exc_info=error, extra=fields)
