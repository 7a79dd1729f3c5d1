"""The forwarder: moves scheduled tasks (delays, retries with backoff) into their queue when due.

It runs in every Python worker and in the sweeper, so a queue only Go workers drain still
gets its delayed tasks as long as a Python sweeper runs.
"""
import logging
import threading
from typing import Sequence

import redis

from .connection import Backoff
from .queue import Queue

logger = logging.getLogger(__name__)

FORWARD_INTERVAL = 0.5
"""Seconds between looks at the scheduled set: how late a due task may start."""
MOVE_LIMIT = 1000
"""Most tasks one script call moves, so a burst of due tasks never blocks Redis for long."""


def forward(queues: Sequence[Queue]) -> int:
    """Move every due task of every queue, MOVE_LIMIT per call; returns how many moved."""
    total = 0
    for queue in queues:
        while True:
            moved = queue.move_due(MOVE_LIMIT)
            total += moved
            if moved < MOVE_LIMIT:
                break
    return total


class Forwarder(threading.Thread):
    """Calls forward(queues) every FORWARD_INTERVAL seconds until stopped."""

    def __init__(self, queues: Sequence[Queue]) -> None:
        super().__init__(name="delayed-forwarder", daemon=True)
        self._queues = list(queues)
        self._stopped = threading.Event()

    def run(self) -> None:
        backoff = Backoff(logger, "forwarder", wait=self._stopped.wait)
        while not self._stopped.wait(FORWARD_INTERVAL):
            try:
                forward(self._queues)
            except redis.RedisError as exc:
                backoff.failed(exc)
            else:
                backoff.succeeded()

    def stop(self) -> None:
        self._stopped.set()
        self.join()
