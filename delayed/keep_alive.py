"""The heartbeat: a thread that keeps a worker's keep-alive key from expiring while it runs."""
import logging
import threading
from typing import Sequence

import redis

from .connection import Backoff
from .queue import Queue

logger = logging.getLogger(__name__)


class KeepAlive(threading.Thread):
    """Refreshes the keep-alive keys of worker_ids every interval seconds until stopped."""

    def __init__(self, queue: Queue, worker_ids: Sequence[str], interval: float) -> None:
        super().__init__(name="delayed-keep-alive", daemon=True)
        self._queue = queue
        self._worker_ids = list(worker_ids)
        self._interval = interval
        self._stopped = threading.Event()

    def run(self) -> None:
        backoff = Backoff(logger, f"keep-alive of {self._worker_ids[0]}", wait=self._stopped.wait)
        while not self._stopped.wait(self._interval):
            try:
                self._queue.keep_alive(self._worker_ids)
            except redis.RedisError as exc:
                backoff.failed(exc)
            else:
                backoff.succeeded()

    def stop(self) -> None:
        self._stopped.set()
        self.join()
