"""The sweeper: periodically requeues tasks held by dead workers (go-delayed's requeue-lost),
and moves due scheduled tasks into their queues between sweeps."""
import logging
import threading
import time
from typing import Sequence

import redis

from .connection import Backoff
from .forwarder import FORWARD_INTERVAL, forward
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
        next_sweep = 0.0
        while not self._stopping.is_set():
            try:
                forward(self.queues)  # due delayed tasks and retries, for Go workers too
                if time.monotonic() >= next_sweep:
                    self.sweep()
                    next_sweep = time.monotonic() + self.interval
            except redis.RedisError as exc:
                self._backoff.failed(exc)
                continue
            self._backoff.succeeded()
            self._stopping.wait(max(0.0, min(FORWARD_INTERVAL, next_sweep - time.monotonic())))
        logger.info("sweeper stopped")

    def stop(self) -> None:
        self._stopping.set()


if __name__ == "__main__":
    from .cli import sweeper_main

    raise SystemExit(sweeper_main())
