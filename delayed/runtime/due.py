"""Moving due tasks: scheduled tasks (delays, retries with backoff) go into their queue when due.

Every Python worker does it (in a background thread) and so does the sweeper, so a queue only
Go workers drain still gets its delayed tasks as long as a Python sweeper runs.
"""
from typing import Sequence

from ..protocol.queue import Queue

MOVE_DUE_INTERVAL = 0.5
"""Seconds between looks at the scheduled set: how late a due task may start."""
MOVE_LIMIT = 1000
"""Most tasks one script call moves, so a burst of due tasks never blocks Redis for long."""


def move_due_tasks(queues: Sequence[Queue]) -> int:
    """Move every due task of every queue, MOVE_LIMIT per call; returns how many moved."""
    total = 0
    for queue in queues:
        while True:
            moved = queue.move_due(MOVE_LIMIT)
            total += moved
            if moved < MOVE_LIMIT:
                break
    return total
