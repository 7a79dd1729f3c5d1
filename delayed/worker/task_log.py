"""log_tasks: the TaskLog middleware writes one INFO line per task, as it was settled, on the logger
delayed.worker.tasks (the failure lines are the Retries middleware's, delayed.worker.retry)."""
import logging

from ..wire import dead_letter
from .holding import Bury, Outcome
from .middleware import Middleware
from .run import Run

task_logger = logging.getLogger("delayed.worker.tasks")
"""Where log_tasks writes its line per finished task."""


class TaskLog(Middleware):
    """`task ID FUNC OUTCOME in 12.3 ms` (ID `-` for an untracked task; a dead one's line says no time)."""

    times_runs = True

    def after(self, run: Run) -> None:
        settlement = run.settlement
        assert settlement is not None
        outcome = settlement.outcome
        if outcome is Outcome.DEAD:
            assert isinstance(settlement, Bury)
            func = dead_letter.func_of(settlement.letter[dead_letter.TASK])
            task_id = settlement.tracked.task_id if settlement.tracked else None
            task_logger.info("task %s %s %s", task_id or "-", func or "?", outcome,
                             extra={"task": task_id, "queue": run.queue.name, "func": func, "outcome": str(outcome)})
            return
        task = run.task
        assert task is not None
        if outcome is Outcome.HELD:
            task_logger.info("task %s %s held", task.options.id or "-", task.func_path)
            return
        task_logger.info("task %s %s %s in %.1f ms", task.options.id or "-", task.func_path, outcome,
                         run.seconds * 1000, extra={**run.log_fields(), "outcome": str(outcome),
                                                    "milliseconds": round(run.seconds * 1000, 1)})
