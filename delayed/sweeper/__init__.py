"""The sweeper: periodically requeues tasks held by dead workers (go-delayed's requeue-lost),
and moves due scheduled tasks into their queues between sweeps."""
import logging
import time
from typing import Sequence

import redis

from ..wire import dead_letter
from ..runtime.backoff import OutageBackoff
from ..runtime.due import FORWARD_INTERVAL, forward
from ..protocol.queue import DEFAULT_MAX_CRASHES, Queue
from ..runtime.lifecycle import Lifecycle

logger = logging.getLogger(__name__)


class Sweeper:
    """Sweeps every queue once per interval seconds until stopped.

    max_crashes: dead-letter a task once workers died holding it more often than this (0: never).
    """

    def __init__(self, queues: Sequence[Queue], interval: float = 60,
                 max_crashes: int = DEFAULT_MAX_CRASHES) -> None:
        self.queues = list(queues)
        self.interval = interval
        self.max_crashes = max_crashes
        self.failures = 0
        """Held tasks a sweep could not handle (left for the next sweep), and sweeps of a queue that
        failed other than by Redis, so far; each logged."""
        self.lifecycle = Lifecycle("sweeper")
        self._backoff = OutageBackoff(logger, "sweeper", wait=self.lifecycle.wait)

    def sweep(self) -> int:
        """One pass over every queue; returns the notifications pushed (requeued tasks included)."""
        total = 0
        for queue in self.queues:
            try:
                swept = queue.sweep(self.max_crashes)
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
                if loop.reason == "crash_loop":
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

    def run(self, handle_signals: bool = True) -> int:
        """Sweep until stop(); returns the exit status (0: a forced stop never returns).

        handle_signals: in the main thread, SIGTERM, SIGINT and SIGHUP stop it after the current
        pass and a second one exits at once (status 128 + signal), as for a worker.
        """
        status = self.lifecycle.run(self._run, handle_signals)
        logger.info("sweeper stopped")
        return status

    def _run(self) -> None:
        logger.info("sweeping %s every %s s", ", ".join(repr(q.name) for q in self.queues), self.interval)
        self.lifecycle.online()
        next_sweep = 0.0
        while not self.lifecycle.stopping:
            try:
                forward(self.queues)  # due delayed tasks and retries, for Go workers too
                if time.monotonic() >= next_sweep:
                    self.sweep()
                    next_sweep = time.monotonic() + self.interval
            except redis.RedisError as exc:
                self._backoff.failed(exc)
                continue
            self._backoff.succeeded()
            self.lifecycle.wait(max(0.0, min(FORWARD_INTERVAL, next_sweep - time.monotonic())))

    def stop(self) -> None:
        """Stop after the current pass (from any thread)."""
        self.lifecycle.stop()

