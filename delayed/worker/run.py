"""Run: one claimed task on its way through the worker's pipeline (delayed.worker.middleware), from
its blob to how it is settled. The middleware, invoke() and decide() read and fill it in turn."""
from typing import Any, NamedTuple, Optional

from ..protocol.queue import Queue
from ..wire.dead_letter import Reason
from ..wire.task import PyTask
from .callee import Callee
from .holding import Settlement


class Refusal(NamedTuple):
    """Why a task is not called: its dead letter's reason and error, and its func path where known."""

    reason: Reason
    error: str
    func: Optional[str] = None


class Run:
    """A claimed task: its blob and the queue it came from; once decoded, the task and its function
    (callee), and the time limit its call gets; then what happened: it returned result, raised error,
    or was refused before its call; when its call started (time.monotonic()) and how long it ran; and
    how it is settled.

    One is made per task: the fields that start empty are class attributes until set, which costs
    less than setting them all.
    """

    task: Optional[PyTask] = None
    callee: Optional[Callee] = None
    limit: Optional[float] = None
    started = 0.0
    seconds = 0.0
    result: Any = None
    error: Optional[BaseException] = None
    refusal: Optional[Refusal] = None
    settlement: Optional[Settlement] = None

    def __init__(self, blob: bytes, queue: Queue) -> None:
        self.blob = blob
        self.queue = queue

    def refuse(self, reason: Reason, error: str, func: Optional[str] = None) -> None:
        """Settle the task without calling it: it is dead-lettered for reason."""
        self.refusal = Refusal(reason, error, func)
