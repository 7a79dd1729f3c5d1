"""delayed: a Redis task queue for Python that speaks go-delayed's wire format.

Everything in __all__ is importable from here (the manual's Python API page, docs/reference/api.md, lists them).
Names are imported on first use, so `python -m delayed.worker` runs its module once and
`import delayed` stays cheap.
"""
import importlib
from typing import TYPE_CHECKING, Any

__version__ = "2.0.0.dev0"

_EXPORTS = {
    "Queue": "protocol.queue",
    "AsyncQueue": "protocol.queue",
    "TaskHandle": "protocol.handles",
    "AsyncTaskHandle": "protocol.handles",
    "WorkflowHandle": "protocol.handles",
    "AsyncWorkflowHandle": "protocol.handles",
    "chain": "wire.flow",
    "group": "wire.flow",
    "Step": "wire.flow",
    "StepFailed": "wire.ext",
    "FlowStatus": "wire.flow",
    "WorkflowInfo": "wire.flow",
    "TaskInfo": "wire.tracking",
    "Cancel": "wire.tracking",
    "PyTask": "wire.task",
    "GoTask": "wire.task",
    "Float32": "wire.task",
    "TaskOptions": "wire.options",
    "Middleware": "wire.hooks",
    "Enqueuing": "wire.hooks",
    "Call": "wire.hooks",
    "current": "wire.hooks",
    "connect": "protocol.connection",
    "connect_async": "protocol.connection",
    "delayed": "delay",
    "Worker": "worker.loop",
    "Sweeper": "sweeper",
    "Scheduler": "scheduler",
    "Periodic": "scheduler",
    "setup_logger": "logger",
    "DelayedError": "errors",
    "ContractError": "errors",
    "MalformedTaskError": "errors",
    "TaskTooLargeError": "errors",
    "TaskArgumentError": "errors",
    "FunctionNotAllowedError": "errors",
    "SkipRetry": "errors",
    "DuplicateTaskError": "errors",
    "NotReplicatedError": "errors",
    "QueueFullError": "errors",
    "TaskNotFoundError": "errors",
    "TaskFailedError": "errors",
    "DeadLetterError": "errors",
    "RedisURLError": "errors",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .delay import delayed
    from .errors import (
        ContractError,
        DeadLetterError,
        DelayedError,
        DuplicateTaskError,
        FunctionNotAllowedError,
        MalformedTaskError,
        NotReplicatedError,
        QueueFullError,
        RedisURLError,
        SkipRetry,
        TaskArgumentError,
        TaskFailedError,
        TaskNotFoundError,
        TaskTooLargeError,
    )
    from .logger import setup_logger
    from .protocol.connection import connect, connect_async
    from .protocol.handles import AsyncTaskHandle, AsyncWorkflowHandle, TaskHandle, WorkflowHandle
    from .protocol.queue import AsyncQueue, Queue
    from .scheduler import Periodic, Scheduler
    from .sweeper import Sweeper
    from .wire.ext import StepFailed
    from .wire.flow import FlowStatus, Step, WorkflowInfo, chain, group
    from .wire.hooks import Call, Enqueuing, Middleware, current
    from .wire.options import TaskOptions
    from .wire.task import Float32, GoTask, PyTask
    from .wire.tracking import Cancel, TaskInfo
    from .worker.loop import Worker


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'delayed' has no attribute {name!r}")
    value = getattr(importlib.import_module("." + _EXPORTS[name], __name__), name)
    globals()[name] = value
    return value
