"""The sweeper: periodically requeues tasks held by dead workers (go-delayed's requeue-lost)."""
import logging
import threading
from typing import Sequence

import redis

from .connection import Backoff
from .queue import DEFAULT_MAX_CRASHES, Queue
from .signals import restore, stop_gracefully_then_at_once

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
        self._stopping = threading.Event()
        self._backoff = Backoff(logger, "sweeper", wait=self._stopping.wait)

    def sweep(self) -> int:
        """One pass over every queue; returns the notifications pushed (requeued tasks included)."""
        total = 0
        for queue in self.queues:
            count = queue.requeue_lost(self.max_crashes)
            if count > 0:
                logger.info("queue %r: requeued lost tasks, pushed %d notifications", queue.name, count)
            total += count
        return total

    def run(self, handle_signals: bool = True) -> None:
        """Sweep until stop(); with handle_signals, stop signals as for Worker.run."""
        handlers = stop_gracefully_then_at_once(self.stop, "sweeper") if handle_signals else {}
        try:
            self._run()
        finally:
            restore(handlers)

    def _run(self) -> None:
        logger.info("sweeping %s every %s s", ", ".join(repr(q.name) for q in self.queues), self.interval)
        while not self._stopping.is_set():
            try:
                self.sweep()
            except redis.RedisError as exc:
                self._backoff.failed(exc)
                continue
            self._backoff.succeeded()
            self._stopping.wait(self.interval)
        logger.info("sweeper stopped")

    def stop(self) -> None:
        self._stopping.set()


if __name__ == "__main__":
    from .cli import sweeper_main

    raise SystemExit(sweeper_main())
