"""Exceptions raised by delayed, and how a task's exception is said in one line."""
from typing import Any, Optional


def one_line(text: str, limit: int) -> str:
    """text with its runs of whitespace (newlines included) made one space, cut to limit characters."""
    text = " ".join(text[:4 * limit].split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def message_of(exc: BaseException, limit: int = 1000) -> str:
    """"Type: message" of what a task raised, in one line of at most limit characters; never raises,
    even for an exception whose str() does."""
    try:
        message = str(exc)
    except Exception as failure:
        message = f"<str() of it raised {type(failure).__name__}>"
    return one_line(f"{type(exc).__name__}: {message}", limit)


class DelayedError(Exception):
    """Base class of every error delayed raises on purpose."""


class MalformedTaskError(DelayedError, ValueError):
    """A blob that is not a task this worker can decode; `reason` is the dead-letter reason."""

    def __init__(self, message: str, reason: str = "malformed", func_path: Optional[str] = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.func_path = func_path


class TaskTooLargeError(DelayedError, ValueError):
    """A task blob over the queue's max_task_size; raised before anything is written to Redis."""


class TaskArgumentError(DelayedError, TypeError):
    """A task argument msgpack cannot write (an object, a datetime, an int past 64 bits): the message
    names the task, the argument's path (args[1], kwargs['when']['at']) and its type. Raised as the
    task is serialized, before anything is written to Redis."""


class ContractError(DelayedError):
    """A GoTask its handler's contract refuses (an unknown handler, a missing, extra or mistyped argument),
    or a contract file that cannot be read: raised before anything is enqueued, naming the handler, the
    parameter's path and the Go type expected."""


class FunctionNotAllowedError(DelayedError, LookupError):
    """A task names a function the worker was not told to allow."""


class QueueFullError(DelayedError):
    """Redis refused an enqueue for want of memory (at maxmemory, evicting nothing); nothing was written."""


class DuplicateTaskError(DelayedError):
    """enqueue(unique_for=...) found the lock of an identical task (or one with the same key) held."""


class SkipRetry(DelayedError):
    """Raise it in a task to fail it for good: it goes to the dead-letter list, whatever retries it has left."""


class TaskNotFoundError(DelayedError, LookupError):
    """No record of this tracked task: it was never tracked (enqueued without result_ttl), or its
    record expired result_ttl seconds after it ended."""


class TaskFailedError(DelayedError):
    """result() of a tracked task that ended without a result: failed, dead or cancelled; `info`
    (a delayed.wire.tracking.TaskInfo) says how."""

    def __init__(self, message: str, info: Any) -> None:
        super().__init__(message)
        self.info = info


class DeadLetterError(DelayedError, LookupError):
    """Dead letters asked for by id that do not exist (or hold no task to requeue); nothing was changed."""


class NotReplicatedError(DelayedError):
    """An enqueue that Redis applied on the primary, but that fewer replicas than the queue's
    wait_replicas acknowledged within wait_timeout_ms: a failover now could lose it."""

    def __init__(self, message: str, acknowledged: int) -> None:
        super().__init__(message)
        self.acknowledged = acknowledged
