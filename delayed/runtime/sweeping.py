"""Sweeping queues: the sweep of each queue under its lock, and the log lines that say what it did.

The sweeper sweeps the queues it is told (or every one it finds), and every worker sweeps the queues
it serves, both through Sweeps, so that a queue is swept the same way whoever does it, and at most
once per interval between them (SweeperOps.claim_sweep).
"""
import logging
from typing import Sequence

import redis

from ..protocol.queue import Queue
from ..protocol.sweeper_ops import DEFAULT_MAX_CRASHES, Sweep, SweeperOps
from ..wire import dead_letter


class Sweeps:
    """Sweeps of queues: each claimed first (at most one per interval per queue, across every worker and
    sweeper), then made, then told on logger.

    A crash loop dead-lettered is a WARNING; a held task that could not be handled an ERROR, counted in
    `failures` (the sweep goes on with the rest); requeued tasks and topped-up notifications an INFO.
    """

    def __init__(self, logger: logging.Logger, interval: float, max_crashes: int = DEFAULT_MAX_CRASHES) -> None:
        self.logger = logger
        self.interval = interval
        self.max_crashes = max_crashes
        self.failures = 0
        """Held tasks a sweep could not handle (left for the next sweep), and sweeps of a queue that
        failed other than by Redis, so far; each logged."""

    def sweep(self, queues: Sequence[Queue], now: bool = False) -> int:
        """Sweep each queue whose sweep this claims: those no one swept within the interval, or, with
        now, every one (a sweep asked for now, recorded all the same).

        A sweep of one queue that fails other than by Redis is logged and counted in `failures`; the other
        queues are still swept.

        Returns:
            The notifications pushed: one per task requeued, and the missing ones.

        Raises:
            redis.RedisError: Redis could not be reached, or refused (the caller waits it out).
        """
        total = 0
        for queue in queues:
            ops = SweeperOps(queue)
            try:
                if not ops.claim_sweep(self.interval, force=now):
                    continue
                swept = ops.sweep(self.max_crashes)
            except redis.RedisError:
                raise
            except Exception:  # a bug, not data (decoding never raises): the other queues are still swept
                self.failures += 1
                self.logger.exception("queue %r: the sweep failed; trying again at the next one (%d failures so "
                                      "far)", queue.name, self.failures)
                continue
            self._tell(queue, swept)
            total += swept.notified
        return total

    def _tell(self, queue: Queue, swept: Sweep) -> None:
        """Log what a sweep of queue did, and count the held tasks it could not handle."""
        for loop in swept.crash_loops:
            if not loop.buried:
                continue
            func = dead_letter.func_of(loop.blob)
            fields = {"queue": queue.name, "func": func}  # the JSON logs' fields (see delayed.logger)
            if loop.reason == dead_letter.Reason.CRASH_LOOP:
                self.logger.warning("queue %r: dead-lettered a crash loop in %s: function %s, its workers died "
                                    "holding it %d times (--max-crashes %d)", queue.name, queue.keys.dead_letters,
                                    func or "<undecodable>", loop.crashes, self.max_crashes, extra=fields)
            else:
                self.logger.warning("queue %r: dead-lettered in %s a task its worker died holding (%s): it is not "
                                    "a task our workers run", queue.name, queue.keys.dead_letters, loop.reason,
                                    extra=fields)
        for worker_id, problem in swept.failures:
            self.failures += 1
            self.logger.error("queue %r: could not sweep the task %s held (%s); left for the next sweep "
                              "(%d such failures so far)", queue.name, worker_id, problem, self.failures,
                              extra={"queue": queue.name})
        if swept.notified > 0:
            self.logger.info("queue %r: requeued lost tasks, pushed %d notifications", queue.name, swept.notified,
                             extra={"queue": queue.name})

    def describe(self) -> str:
        """What a sweep does, for the line a role logs as it starts."""
        crashes = (f"dead-lettering a task once workers died holding it more than {self.max_crashes} times"
                   if self.max_crashes else "counting no crashes (max crashes 0)")
        return f"requeuing dead workers' tasks, {crashes}"
