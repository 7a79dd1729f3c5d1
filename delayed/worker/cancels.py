"""Cancelling a running task, in the worker: the calls a cancel can reach (Cancels), and the thread that
hears the cancels published on the worker's queues (Listening, on its own pubsub connection).

A cancel of a tracked task a worker holds is requested in its record and published (tracking.lua's
track.cancel). When the worker hears it:

- a coroutine's task is cancelled: the function gets CancelledError where it awaits;
- a plain function (main thread or slot thread) has its call marked: `delayed.current().cancelled`;
- a task claimed but not started yet is not called at all (ids heard are remembered for that).

However the run ends, the worker settles it as cancelled (delayed.worker.decide), and the script that
ends it reads the request in its record and ends it cancelled in any case: a worker that missed the
message (its connection was down) still ends the task cancelled, once the task returns.
"""
import asyncio
import logging
import threading
from collections import OrderedDict
from typing import Dict, Optional, Sequence, Tuple

from ..protocol.base import QueueBase
from ..protocol.cancels import CancelListener
from ..runtime.backoff import Outage, OutageBackoff
from ..runtime.lifecycle import Lifecycle
from ..runtime.role import rounds
from .run import Run

logger = logging.getLogger(__name__)

LISTEN_WAIT = 0.1
"""Seconds the listening thread waits for a message at a time: how soon it sees a stop."""


class Cancels:
    """The tracked calls a worker is making, by task id, and the ids whose cancel it heard.

    Calls start and stop in the threads that make them, cancels are heard in Listening's. No lock: each
    step is one dict operation (atomic), and a call is noted before its id is looked up among those
    heard, as a heard id is noted before its call is looked up, so one of the two always sees the other.
    A heard id is remembered (the last REMEMBERED of them), so that a task claimed but not yet started,
    or one whose claim was still on its way when its cancel came, is not called.
    """

    REMEMBERED = 10000

    def __init__(self) -> None:
        self._calls: Dict[str, Tuple[Run, Optional["asyncio.Task[None]"]]] = {}
        self._heard: "OrderedDict[str, None]" = OrderedDict()

    def starting(self, task_id: str, run: Run, task: Optional["asyncio.Task[None]"] = None) -> bool:
        """Before the call of run, a tracked task's (task: the asyncio task a coroutine runs in): True, and
        the call can be reached until stopped(task_id); False if its cancel was heard already: its call is
        marked cancelled, and it must not be made."""
        self._calls[task_id] = (run, task)
        if task_id in self._heard:
            self._calls.pop(task_id, None)
            assert run.call is not None
            run.call.cancel()
            return False
        return True

    def stopped(self, task_id: str) -> None:
        """After a tracked task's call: it can no longer be reached."""
        self._calls.pop(task_id, None)

    def heard(self, task_id: str) -> None:
        """A cancel of task_id was published: remember it, and reach its call if one is being made (called
        from one thread: Listening's)."""
        self._heard[task_id] = None
        if len(self._heard) > self.REMEMBERED:
            self._heard.popitem(last=False)
        found = self._calls.get(task_id)
        if found is None:
            return
        run, task = found
        assert run.call is not None
        run.call.cancel()
        logger.debug("task %s: cancel requested, stopping it", task_id)
        if task is not None:
            task.get_loop().call_soon_threadsafe(self._cancel_task, task_id, task)

    def _cancel_task(self, task_id: str, task: "asyncio.Task[None]") -> None:
        """On the event loop: cancel the coroutine's task, if it is still in its call (not past it: a task
        cancelled after its call returned would end cancelled, not with the call's outcome)."""
        found = self._calls.get(task_id)
        if found is not None and found[1] is task:
            task.cancel()


class Listening(threading.Thread):
    """Hears the cancels published on the queues' channels and tells cancels, until stop(); a Redis error
    is ridden out as the worker's other threads ride theirs (said by outage), then it subscribes again.
    `tried` is set once its first subscription is made (or failed): a worker waits for it before it
    claims a task, so that it does not miss the cancel of a task it runs from its start."""

    def __init__(self, queues: Sequence[QueueBase], cancels: Cancels, outage: Optional[Outage] = None) -> None:
        super().__init__(name="delayed cancels", daemon=True)
        self._listener = CancelListener(queues)
        self._cancels = cancels
        self._lifecycle = Lifecycle("listen for cancels")
        self._backoff = OutageBackoff(logger, "listen for cancels", wait=self._lifecycle.wait, outage=outage)
        self.tried = threading.Event()

    def run(self) -> None:
        try:
            rounds(self._lifecycle, self._backoff, self._round)
        finally:
            self.tried.set()  # (stopped before it tried)
            self._listener.close()

    def _round(self) -> float:
        heard = []
        if not self._listener.subscribed:
            try:
                heard = self._listener.subscribe()
            finally:
                self.tried.set()
        for task_id in heard + self._listener.listen(LISTEN_WAIT):
            self._cancels.heard(task_id)
        return 0

    def stop(self) -> None:
        self._lifecycle.stop()
        self.join()
