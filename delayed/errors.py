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
    """The base class of every error delayed raises on purpose: catch it to catch them all."""


class RedisURLError(DelayedError, ValueError):
    """A Redis URL that does not parse, or starts with a scheme `connect` does not take.

    Raised by `connect` and `connect_async` before anything is sent; the message shows the URL with
    its passwords masked, and says what is wrong where it can.
    """


class MalformedTaskError(DelayedError, ValueError):
    """A blob that is not a task this worker can decode: not msgpack, the wrong shape, or not the kind expected.

    Raised by `PyTask.deserialize` (and so by `Queue.dequeue`) and `GoTask.deserialize`. A worker that
    claims such a blob dead-letters it with `reason` as the dead letter's reason.

    Attributes:
        reason (str): Why, as a dead letter's reason: `"malformed"`, or `"go_task"` for a GoTask where
            a PyTask was expected (`"py_task"` the other way round).
        func_path (str | None): The task's function, if the blob decoded that far.
    """

    def __init__(self, message: str, reason: str = "malformed", func_path: Optional[str] = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.func_path = func_path


class TaskTooLargeError(DelayedError, ValueError):
    """A task blob over the queue's `max_task_size`: raised at enqueue, before anything is written to Redis."""


class TaskArgumentError(DelayedError, TypeError):
    """A task argument msgpack cannot write: an object, a datetime, an int past 64 bits.

    Raised as the task is serialized, so before anything is written to Redis. The message names the
    task, the argument's path (`args[1]`, `kwargs['when']['at']`) and its type, e.g. `task tasks:send:
    kwargs['when'] is of type datetime.datetime, which msgpack cannot serialize (...)`.
    """


class ContractError(DelayedError):
    """A GoTask its handler's contract refuses, or a contract that cannot be read.

    A task is refused for an unknown handler or a missing, extra or mistyped argument: raised before
    anything is enqueued, naming the handler, the parameter's path and the Go type expected.
    """


class FunctionNotAllowedError(DelayedError, LookupError):
    """A task names a function the worker was not told to allow.

    The worker dead-letters such a task (reason `not_allowed`) instead of raising.
    """


class QueueFullError(DelayedError):
    """Redis refused an enqueue for want of memory (at `maxmemory`, evicting nothing); nothing was written."""


class DuplicateTaskError(DelayedError):
    """`enqueue(..., unique_for=...)` found the lock of an identical task (or one with the same `unique_key`) held.

    Nothing was enqueued. The message says when the lock expires.
    """


class SkipRetry(DelayedError):
    """Raise it in a task to fail it for good: it goes to the dead letters at once, whatever retries it has left.

    Example:
        ```python
        from delayed import SkipRetry

        def send(address):
            if "@" not in address:
                raise SkipRetry(f"not an address: {address}")
            ...
        ```
    """


class TaskNotFoundError(DelayedError, LookupError):
    """No record of this tracked task: it was never tracked (enqueued without `result_ttl`), or its record expired.

    A record expires `result_ttl` seconds after its task ended.
    """


class TaskFailedError(DelayedError):
    """`result()` of a tracked task that ended without a result: it failed, went dead or was cancelled;
    or of a workflow that a failed step stopped, that ended failed, or that was cancelled.

    Attributes:
        info (TaskInfo | WorkflowInfo): The task's record, which says how (`info.status`, `info.error`,
            `info.letter`); for a workflow, its `WorkflowInfo` (`info.status`, `info.failed`, `info.error`).
    """

    def __init__(self, message: str, info: Any) -> None:
        super().__init__(message)
        self.info = info


class DeadLetterError(DelayedError, LookupError):
    """Dead letters asked for by id that do not exist (or hold no task to requeue), or an id that is not one.

    Nothing was changed.
    """


class NotReplicatedError(DelayedError):
    """An enqueue Redis applied on the primary, but that fewer replicas than `wait_replicas` acknowledged in time.

    The task is on the primary, and workers will run it; a failover now could lose it.

    Attributes:
        acknowledged (int): How many replicas acknowledged it within `wait_timeout_ms`.
    """

    def __init__(self, message: str, acknowledged: int) -> None:
        super().__init__(message)
        self.acknowledged = acknowledged
