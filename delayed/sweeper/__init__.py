"""The sweeper: periodically requeues tasks held by dead workers (go-delayed's requeue-lost),
and moves due scheduled tasks into their queues between sweeps."""
import logging
import time
from typing import Sequence

import redis

from ..wire import dead_letter
from ..protocol.queue import Queue
from ..protocol.sweeper_ops import DEFAULT_MAX_CRASHES, SweeperOps
from ..runtime.due import MOVE_DUE_INTERVAL, move_due_tasks
from ..runtime.role import Role

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

    `run()` says all of this as it starts, e.g. `sweeping 'default' every 60 s: requeuing dead workers'
    tasks, dead-lettering a task once workers died holding it more than 3 times; and moving due
    scheduled tasks into it every 0.5 s`. It logs a WARNING for each crash loop it dead-letters, and an
    ERROR for each held task it could not handle (counted in `failures`; the sweep goes on with the
    rest). It rides out Redis errors, waiting longer after each. `python -m delayed.sweeper` runs one.

    Args:
        queues: The queues to sweep.
        interval: Seconds between sweeps.
        max_crashes: Dead-letter a task once workers died holding it more often than this (default
            3); 0 counts no crashes and requeues every task as it is.

    Attributes:
        lifecycle (Lifecycle): Where the sweeper is: `lifecycle.state` is `"starting"`, `"online"`,
            `"draining"` or `"offline"`.
    """

    def __init__(self, queues: Sequence[Queue], interval: float = 60,
                 max_crashes: int = DEFAULT_MAX_CRASHES) -> None:
        super().__init__("sweeper", logger, "sweep")
        self.queues = list(queues)
        self.interval = interval
        self.max_crashes = max_crashes
        self.failures = 0
        """Held tasks a sweep could not handle (left for the next sweep), and sweeps of a queue that
        failed other than by Redis, so far; each logged."""
        self._next_sweep = 0.0  # time.monotonic() of the next sweep

    def sweep(self) -> int:
        """Sweep every queue once, now.

        A sweep of one queue that fails other than by Redis is logged and counted in `failures`; the other
        queues are still swept.

        Returns:
            The notifications pushed: one per task requeued, and the missing ones.

        Raises:
            redis.RedisError: Redis could not be reached, or refused (`run()` waits it out).
        """
        total = 0
        for queue in self.queues:
            try:
                swept = SweeperOps(queue).sweep(self.max_crashes)
            except redis.RedisError:
                raise  # Redis is away, or refuses: run() waits it out
            except Exception:  # a bug, not data (decoding never raises): the other queues are still swept
                self.failures += 1
                logger.exception("queue %r: the sweep failed; trying again at the next one (%d failures so far)",
                                 queue.name, self.failures)
                continue
            for loop in swept.crash_loops:
                if not loop.buried:
                    continue
                if loop.reason == dead_letter.Reason.CRASH_LOOP:
                    logger.warning("queue %r: dead-lettered a crash loop in %s: function %s, its workers died "
                                   "holding it %d times (--max-crashes %d)", queue.name, queue.keys.dead_letters,
                                   dead_letter.func_of(loop.blob) or "<undecodable>", loop.crashes,
                                   self.max_crashes)
                else:
                    logger.warning("queue %r: dead-lettered in %s a task its worker died holding (%s): it is not "
                                   "a task our workers run", queue.name, queue.keys.dead_letters, loop.reason)
            for worker_id, problem in swept.failures:
                self.failures += 1
                logger.error("queue %r: could not sweep the task %s held (%s); left for the next sweep "
                             "(%d such failures so far)", queue.name, worker_id, problem, self.failures)
            if swept.notified > 0:
                logger.info("queue %r: requeued lost tasks, pushed %d notifications", queue.name, swept.notified)
            total += swept.notified
        return total

    def starting(self) -> None:
        """Log, in one line, all the sweeper does: the sweeps, what a sweep counts, and the moves between them.

        `run()` calls it as it starts.
        """
        crashes = (f"dead-lettering a task once workers died holding it more than {self.max_crashes} times"
                   if self.max_crashes else "counting no crashes (max crashes 0)")
        logger.info("sweeping %s every %g s: requeuing dead workers' tasks, %s; and moving due scheduled tasks "
                    "into %s every %g s", ", ".join(repr(q.name) for q in self.queues), self.interval, crashes,
                    "it" if len(self.queues) == 1 else "them", MOVE_DUE_INTERVAL)

    def round(self) -> float:
        """Move the due tasks, and sweep if a sweep is due: one round of the loop `run()` repeats.

        Returns:
            The seconds until the next round.
        """
        move_due_tasks(self.queues)  # due delayed tasks and retries, for Go workers too
        if time.monotonic() >= self._next_sweep:
            self.sweep()
            self._next_sweep = time.monotonic() + self.interval
        return max(0.0, min(MOVE_DUE_INTERVAL, self._next_sweep - time.monotonic()))
