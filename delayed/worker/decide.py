"""decide(): how to settle a run, from its task and what happened to it.

Pure: it sends nothing and keeps nothing, and what needs the clock, the allowlist or the worker's
memory (a backoff curve named by its path, the failures of a retry=-1 task) comes in through its
Policy, so a test can give every case fixed answers.

    cancelled (its call was)            Cancelled, whatever it returned or raised: never retried
    returned                            Release
    raised SkipRetry                    Bury, reason failed
    raised, max_retries left            Reschedule after the task's backoff, attempt counted in its blob
    raised, retry=-1                    Reschedule after the Policy's retry-forever delay
    raised, retry=N>0                   Requeue at once with retry N-1
    raised, no retries left             Bury, reason failed (timed_out for TimeLimitExceeded)
    refused before its call             Bury, for its reason (not_allowed, bad_arguments, malformed ...)
    held back by its limits             Held (nothing more to send: admit.lua moved it)

A retry's blob no longer carries the task's expires_at: a task that started once is not expired by its
retries. A decoded task that ended (Release, Cancelled or Bury) releases its unique lock, a GoTask refused too. (What a tracked task's record
gets is added by the Tracking middleware, delayed.worker.tracking.)
"""
import traceback
from dataclasses import replace
from typing import Any, Optional, Protocol

from ..errors import SkipRetry, message_of
from ..wire import dead_letter
from ..wire.dead_letter import Reason
from ..wire.options import NO_OPTIONS, TaskOptions
from ..wire.task import PyTask
from .holding import Bury, Cancelled, Release, Requeue, Reschedule, Settlement
from .run import Run
from .time_limit import TimeLimitExceeded

RELEASE = Release()
CANCELLED = Cancelled()


class Policy(Protocol):
    """What decide() asks of the world (delayed.worker.retry.Retries answers for a worker)."""

    @property
    def worker(self) -> Optional[str]:
        """The worker's id, for the dead letters it writes."""

    def now(self) -> float:
        """Unix seconds."""

    def backoff(self, task: PyTask, attempt: int) -> float:
        """Seconds before the next attempt of a task with max_retries, after attempt (1, 2, ...) failed."""

    def forever(self, blob: bytes) -> float:
        """Seconds before the next run of a retry=-1 task, after one more failure."""


def decide(run: Run, policy: Policy) -> Settlement:
    """How to settle run (see the module's docstring)."""
    task = run.task
    refusal = run.refusal
    if run.held is not None:
        return run.held
    if refusal is not None:
        settlement: Settlement = _bury(run, policy, refusal.reason, refusal.error, refusal.func)
        if task is None:  # not decoded as a PyTask: only a GoTask's options to honour
            return _unlocking(settlement, refusal.options)
    elif run.call is not None and run.call.cancelled:
        settlement = CANCELLED
    elif run.error is None:
        settlement = RELEASE
    else:
        assert task is not None
        settlement = _failed(task, run, policy)
    assert task is not None
    return _unlocking(settlement, task.options)


def _unlocking(settlement: Settlement, options: TaskOptions) -> Settlement:
    """settlement, releasing the task's unique lock if it has one and the settlement ends the task."""
    if options is NO_OPTIONS or options.unique_key is None:  # most tasks: no lock to release
        return settlement
    lock = (options.unique_key, options.unique_token or "")
    return replace(settlement, lock=lock) if isinstance(settlement, (Release, Bury)) else settlement


def _failed(task: PyTask, run: Run, policy: Policy) -> Settlement:
    """A run that raised run.error: a retry if its task has one left, else its dead letter."""
    error = run.error
    assert error is not None
    retries = task.options.max_retries
    if isinstance(error, SkipRetry):
        pass
    elif retries is not None:
        attempt = task.options.attempt + 1
        if attempt <= retries:
            return Reschedule(_retry(task, attempt=attempt).serialize(), policy.now() + policy.backoff(task, attempt))
    elif task.retry < 0:
        blob = run.blob if task.options.expires_at is None else _retry(task).serialize()  # else keakon's bytes
        return Reschedule(blob, policy.now() + policy.forever(blob))
    elif task.retry:
        return Requeue(_retry(task, retry=task.retry - 1).serialize())
    reason = Reason.TIMED_OUT if isinstance(error, TimeLimitExceeded) else Reason.FAILED
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return _bury(run, policy, reason, message_of(error), task.func_path, trace)


def _retry(task: PyTask, **changes: Any) -> PyTask:
    """The task a retry runs, with these options changed: it started once, so its expiry no longer
    applies (expires_at is dropped; see delayed.worker.expiry)."""
    if task.options.expires_at is not None:
        changes["expires_at"] = None
    return task.with_options(**changes)


def _bury(run: Run, policy: Policy, reason: Reason, error: str, func: Optional[str],
          trace: Optional[str] = None) -> Bury:
    """The dead letter of run's blob."""
    letter = dead_letter.record(reason=reason, error=error, blob=run.blob, queue=run.queue.name, worker=policy.worker,
                                func=func, traceback=trace, at=policy.now())
    return Bury(reason, letter)
