"""keakon/delayed 1.x's import path of the tasks: they live in delayed.wire.task."""
from .wire.task import Float32, GoTask, PyTask

__all__ = ["Float32", "GoTask", "PyTask"]
