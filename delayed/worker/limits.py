"""Limits per key in the worker: the Limits middleware admits a task with a rate_limit or a
concurrency_limit just before its call (delayed/protocol/lua/admit.lua, one script call by Redis's clock,
shared by every worker of the queue), or holds it back: it is not called, and runs later."""
import logging
from typing import Callable, Optional, Tuple

from ..protocol.queue import Queue
from ..wire.limits import Admission, Limit, limit_of
from .holding import Held
from .middleware import Middleware
from .run import Run

logger = logging.getLogger("delayed.worker")

Admit = Callable[[Queue, str, bytes, Limit, Optional[str]], Optional[Tuple[Admission, float]]]
"""How the worker admits a held task (Holdings.admit): queue, worker id, blob, limits, tracked id ->
what admit.lua did and a rate-held task's due time; None if it gave up as the worker stopped."""


class Limits(Middleware):
    """Admits each task with limits, or holds it back (run.hold, see delayed.worker.holding.Held). The
    innermost middleware, so that admission comes last, right before the call: a task refused by the
    allowlist or its arguments never takes a slot or a start. A Run without a worker id (Worker.execute,
    which claims nothing) is not admitted: it has nothing to fence with."""

    options_only = True

    def __init__(self, admit: Admit) -> None:
        self._admit = admit

    def before(self, run: Run) -> None:
        task = run.task
        assert task is not None
        limit = limit_of(task.options, task.func_path)
        if limit is None or not run.worker_id:
            return
        admitted = self._admit(run.queue, run.worker_id, run.blob, limit, task.options.id)
        if admitted is None:
            run.hold(Held())
            return
        admission, due = admitted
        if admission is Admission.ADMITTED:
            return
        run.hold(Held(admission, due))
        if admission is Admission.FENCED:
            logger.warning("did not start task %s: %s no longer holds it (a sweeper requeued it after its keep-alive "
                           "lapsed)", task.func_path, run.worker_id)
        else:
            logger.debug("task %s held back by its limits on key %r (%s)", task.func_path, limit.key, admission)
