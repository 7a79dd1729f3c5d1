"""The forwarder: moves scheduled tasks (delays, retries with backoff) into their queue when due.

It runs in every Python worker (in a background thread) and in the sweeper, so a queue only
Go workers drain still gets its delayed tasks as long as a Python sweeper runs.
"""
from typing import Sequence

from ..protocol.queue import Queue

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
