"""delayed: a Redis task queue for Python that speaks go-delayed's wire format.

Names are imported on first use, so `python -m delayed.worker` runs its module
once and `import delayed` stays cheap.
"""
import importlib
from typing import TYPE_CHECKING, Any

__version__ = "2.0.0.dev0"

_EXPORTS = {
    "Queue": "queue",
    "AsyncQueue": "queue",
    "PyTask": "task",
    "GoTask": "task",
    "Float32": "task",
    "delayed": "delay",
    "Worker": "worker",
    "Sweeper": "sweeper",
    "DelayedError": "errors",
    "MalformedTaskError": "errors",
    "TaskTooLargeError": "errors",
    "FunctionNotAllowedError": "errors",
    "SkipRetry": "errors",
    "DuplicateTaskError": "errors",
    "NotReplicatedError": "errors",
    "QueueFullError": "errors",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .delay import delayed
    from .errors import (DelayedError, DuplicateTaskError, FunctionNotAllowedError, MalformedTaskError, NotReplicatedError,
                         QueueFullError, SkipRetry, TaskTooLargeError)
    from .queue import AsyncQueue, Queue
    from .sweeper import Sweeper
    from .task import Float32, GoTask, PyTask
    from .worker import Worker


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'delayed' has no attribute {name!r}")
    value = getattr(importlib.import_module("." + _EXPORTS[name], __name__), name)
    globals()[name] = value
    return value
