"""Tracked tasks in the worker: the Tracking middleware adds to a tracked task's settlement what its
record gets (delayed.wire.tracking.Tracked), which the settling script writes."""
from dataclasses import replace

from ..errors import message_of
from ..wire import tracking
from ..wire.tracking import Tracked
from .holding import Bury, Cancelled, Release, Requeue, Reschedule
from .middleware import Middleware
from .run import Run


class Tracking(Middleware):
    """A tracked task's run is timed, and its settlement carries its record's news: a release its result
    and run time (a cancelled run's release only its run time), a retry the error and run time, a dead letter the status its reason ends in and the
    error. A tracked task carries its id in its options; a blob that did not decode is looked at for one
    (tracking.task_id)."""

    options_only = True
    times_runs = True  # the runs of tasks with options, tracked ones among them

    def after(self, run: Run) -> None:
        settlement = run.settlement
        task_id = tracking.task_id(run.blob) if run.task is None else run.task.options.id
        if task_id is None or settlement is None:
            return
        if isinstance(settlement, Cancelled):  # its record ends cancelled, its result not kept
            run.settlement = replace(settlement, tracked=Tracked(task_id, run.seconds))
        elif isinstance(settlement, Release):
            data, note = tracking.pack_result(run.result, run.queue.max_task_size)
            run.settlement = Release(settlement.lock, Tracked(task_id, run.seconds, data, note))
        elif isinstance(settlement, (Requeue, Reschedule)):
            error = message_of(run.error) if run.error is not None else ""
            run.settlement = replace(settlement, tracked=Tracked(task_id, run.seconds, error=error))
        elif isinstance(settlement, Bury):
            error = run.refusal.error if run.refusal is not None else message_of(run.error) if run.error else ""
            run.settlement = replace(settlement, tracked=Tracked(task_id, status=settlement.status, error=error))
