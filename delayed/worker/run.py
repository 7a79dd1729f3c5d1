"""Run: one claimed task on its way through the worker's pipeline (delayed.worker.middleware), from
its blob to how it is settled. The middleware, invoke() and decide() read and fill it in turn."""
from typing import Any, Dict, NamedTuple, Optional

from ..protocol.queue import Queue
from ..wire.dead_letter import Reason
from ..wire.hooks import Call
from ..wire.options import NO_OPTIONS, TaskOptions
from ..wire.task import PyTask
from .callee import Callee
from .holding import Held, Settlement


class Refusal(NamedTuple):
    """Why a task is not called: its dead letter's reason and error, its func path where known, and the
    options of a task that decoded as another kind (a GoTask's: its unique lock is released too)."""

    reason: Reason
    error: str
    func: Optional[str] = None
    options: TaskOptions = NO_OPTIONS


class Run:
    """A claimed task: its blob, the queue it came from and the worker id holding it; once decoded, the
    task, the Call that middleware and `delayed.current()` see, its function (callee), and the time
    limit its call gets; then what happened: it returned result, raised error,
    or was refused before its call; if timed, when its call started (time.monotonic()) and how long it
    ran (seconds), or was held back by its limits before its call (held: how it is settled); and how it
    is settled.

    One is made per task: it has slots, and every field is set from the start, so reading one costs
    what reading a local's attribute does.
    """

    __slots__ = ("blob", "queue", "worker_id", "task", "call", "callee", "limit", "timed", "started", "seconds", "result", "error",
                 "refusal", "held", "settlement")

    def __init__(self, blob: bytes, queue: Queue, worker_id: str = "") -> None:
        self.blob = blob
        self.queue = queue
        self.worker_id = worker_id
        self.task: Optional[PyTask] = None
        self.call: Optional[Call] = None
        self.callee: Optional[Callee] = None
        self.limit: Optional[float] = None
        self.timed = False
        self.started = 0.0
        self.seconds = 0.0
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.refusal: Optional[Refusal] = None
        self.held: Optional[Held] = None
        self.settlement: Optional[Settlement] = None

    def log_fields(self) -> Dict[str, Optional[str]]:
        """What a log line about this run says of its task as extra fields (the JSON logs' "task", "queue"
        and "func", see delayed.logger; our Go worker's log lines have attributes of the same names):
        the tracked task's id (None untracked), the queue, the func path where known."""
        task = self.task
        if task is None:
            return {"task": None, "queue": self.queue.name, "func": self.refusal.func if self.refusal else None}
        return {"task": task.options.id, "queue": self.queue.name, "func": task.func_path}

    def refuse(self, reason: Reason, error: str, func: Optional[str] = None, options: TaskOptions = NO_OPTIONS) -> None:
        """Settle the task without calling it: it is dead-lettered for reason."""
        self.refusal = Refusal(reason, error, func, options)

    def hold(self, held: Held) -> None:
        """Settle the task without calling it: its limits held it back (see Held), nothing is left to send."""
        self.held = held
