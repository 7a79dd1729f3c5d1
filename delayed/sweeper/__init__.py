"""The sweeper: periodically requeues tasks held by dead workers (go-delayed's requeue-lost),
and moves due scheduled tasks into their queues between sweeps."""
import logging
import time
from typing import Callable, List, Sequence, Union

from ..protocol.queue import Queue
from ..protocol.sweeper_ops import DEFAULT_MAX_CRASHES
from ..runtime.due import MOVE_DUE_INTERVAL, move_due_tasks
from ..runtime.role import Role
from ..runtime.sweeping import Sweeps

logger = logging.getLogger(__name__)


class Sweeper(Role):
    """Requeues the tasks of dead workers, and moves due scheduled tasks into their queues, until stopped.

    A worker that dies (killed, or cut off from Redis) leaves the tasks it held; once its keep-alive
    lapses, a sweep puts them back in their queue and tops up missing notifications (go-delayed's
    requeue-lost: see `SweeperOps.sweep`). It counts our workers' deaths in each task, and
    dead-letters a task once workers died holding it more than `max_crashes` times, so a task that
    kills its worker cannot kill them all. Between sweeps the sweeper moves due scheduled tasks
    (delays, retries with backoff) into the queues twice a second, so a queue that only go-delayed
    workers drain still gets them.

    Our workers sweep the queues they serve themselves (see `Worker`'s `sweep_interval`): a sweeper is
    for queues only go-delayed's workers serve. Each periodic sweep of a queue is claimed first
    (`SweeperOps.claim_sweep`), so that workers and sweepers, between them, sweep a queue at most once
    per interval: a queue some worker swept within the interval is left for the next round.

    `run()` says all of this as it starts, e.g. `sweeping 'default' every 60 s: requeuing dead workers'
    tasks, dead-lettering a task once workers died holding it more than 3 times; and moving due
    scheduled tasks into it every 0.5 s`. It logs a WARNING for each crash loop it dead-letters, and an
    ERROR for each held task it could not handle (counted in `failures`; the sweep goes on with the
    rest). It rides out Redis errors, waiting longer after each. `python -m delayed.sweeper` runs one.

    Args:
        queues: The queues to sweep; or a function that finds them, called again before each sweep
            (`python -m delayed.sweeper` without `--queue` passes one that finds every queue).
        interval: Seconds between sweeps.
        max_crashes: Dead-letter a task once workers died holding it more often than this (default
            3); 0 counts no crashes and requeues every task as it is.

    Attributes:
        lifecycle (Lifecycle): Where the sweeper is: `lifecycle.state` is `"starting"`, `"online"`,
            `"draining"` or `"offline"`.
        queues (list[Queue]): The queues it sweeps: those found by the last look, if it finds them.
    """

    def __init__(self, queues: Union[Sequence[Queue], Callable[[], Sequence[Queue]]], interval: float = 60,
                 max_crashes: int = DEFAULT_MAX_CRASHES) -> None:
        super().__init__("sweeper", logger, "sweep")
        self._find = queues if callable(queues) else None
        self.queues: List[Queue] = [] if callable(queues) else list(queues)
        self._sweeps = Sweeps(logger, interval, max_crashes)
        self._next_sweep = 0.0  # time.monotonic() of the next sweep

    @property
    def interval(self) -> float:
        """Seconds between sweeps."""
        return self._sweeps.interval

    @property
    def max_crashes(self) -> int:
        """Dead-letter a task once workers died holding it more often than this; 0: never."""
        return self._sweeps.max_crashes

    @property
    def failures(self) -> int:
        """Held tasks a sweep could not handle (left for the next sweep), and sweeps of a queue that
        failed other than by Redis, so far; each logged."""
        return self._sweeps.failures

    def sweep(self) -> int:
        """Sweep every queue once, now, whenever another sweep was (finding the queues first, if it finds them).

        A sweep of one queue that fails other than by Redis is logged and counted in `failures`; the other
        queues are still swept.

        Returns:
            The notifications pushed: one per task requeued, and the missing ones.

        Raises:
            redis.RedisError: Redis could not be reached, or refused (`run()` waits it out).
        """
        self._look()
        return self._sweeps.sweep(self.queues, now=True)

    def starting(self) -> None:
        """Log, in one line, all the sweeper does: the sweeps, what a sweep counts, and the moves between them.

        `run()` calls it as it starts.
        """
        if self._find is None:
            queues = ", ".join(repr(q.name) for q in self.queues)
            into = "it" if len(self.queues) == 1 else "them"
        else:
            queues, into = "every queue it finds (looking again at each sweep)", "them"
        logger.info("sweeping %s every %g s: %s; and moving due scheduled tasks into %s every %g s", queues,
                    self.interval, self._sweeps.describe(), into, MOVE_DUE_INTERVAL)

    def round(self) -> float:
        """Move the due tasks, and sweep the queues no one swept within the interval if a sweep is due: one
        round of the loop `run()` repeats.

        Returns:
            The seconds until the next round.
        """
        sweeping = time.monotonic() >= self._next_sweep
        if sweeping:
            self._look()
        move_due_tasks(self.queues)  # due delayed tasks and retries, for Go workers too
        if sweeping:
            self._sweeps.sweep(self.queues)
            self._next_sweep = time.monotonic() + self.interval
        return max(0.0, min(MOVE_DUE_INTERVAL, self._next_sweep - time.monotonic()))

    def _look(self) -> None:
        """Find the queues again, if it finds them, saying which ones it had not swept before."""
        if self._find is None:
            return
        known = {queue.name for queue in self.queues}
        self.queues = list(self._find())
        new = [queue.name for queue in self.queues if queue.name not in known]
        if new:
            logger.info("found %s %s: sweeping %s", "queues" if len(new) > 1 else "queue",
                        ", ".join(map(repr, new)), "them" if len(new) > 1 else "it")
