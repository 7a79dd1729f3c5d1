"""The limits in force on a queue, read for people (`delayed stats`, the dashboard): per limit key, its
limits, the slots its running tasks hold, and what it holds back (admission itself is a worker's:
WorkerOps.admit)."""
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Tuple, cast

import redis

from ..wire.keys import QueueKeys
from ..wire.limits import LimitsSeen
from .scripts import Script, Scripts

PEEK_LIMITS = Script("peek_limits")

DEFAULT_COUNT = 100
"""Limit keys a read looks at per call, by default (a hint to HSCAN: a call may return a few more)."""


@dataclass(frozen=True)
class KeyLimits:
    """One limit key of a queue, as a read found it.

    key: the limit key (a task's limit_key, or its function's path). rate_limit, concurrency_limit: its
    tasks' limits when one was last admitted (None: it had none), at seen (unix seconds). running: the
    slots held (tasks running under its concurrency_limit). waiting: tasks held back for a slot, out of
    the queue. scheduled: tasks held back for its rate, in the scheduled set, not due yet. started: the
    starts within its rate's last period (those reserved for held tasks due by now included).
    next_due_in: seconds until the first task held for its rate is due, by Redis's clock (None: none is
    held for it).
    """

    key: str
    rate_limit: Optional[str]
    concurrency_limit: Optional[int]
    seen: float
    running: int
    waiting: int
    scheduled: int
    started: int
    next_due_in: Optional[float] = None

    @property
    def held(self) -> int:
        """Tasks it holds back, for a slot or for its rate."""
        return self.waiting + self.scheduled


def read_limits(conn: redis.Redis, name: str, cursor: int = 0,
                count: int = DEFAULT_COUNT) -> Tuple[int, List[KeyLimits]]:
    """One bounded step through queue name's limit keys (one script call).

    Args:
        conn: The queue's Redis.
        name: The queue's name.
        cursor: 0 to start, then the cursor the last step returned.
        count: About how many keys to read (HSCAN's COUNT).

    Returns:
        The cursor of the next step (0 once every key was read) and the keys this step read.
    """
    reply = cast(List[Any], Scripts(conn, QueueKeys.of(name))[PEEK_LIMITS](cursor=cursor, count=count))
    found = []
    for i in range(1, len(reply), 7):
        key, seen, running, waiting, scheduled, started, due_in = reply[i:i + 7]
        limits = LimitsSeen.parse(seen)
        found.append(KeyLimits(key.decode("utf-8", "replace"), limits.rate_limit, limits.concurrency_limit,
                               limits.seen, int(running), int(waiting), int(scheduled), int(started),
                               float(due_in) if due_in else None))
    return int(reply[0]), found


def each_limit(conn: redis.Redis, name: str, count: int = DEFAULT_COUNT) -> Iterator[KeyLimits]:
    """Every limit key of queue name, read a bounded script call (read_limits) per count keys as the
    caller takes them: one that stops early sends no more. In the registry's scan order; a key added or
    deleted meanwhile may come or not, and one may come twice while the registry grows (HSCAN's terms)."""
    cursor = 0
    while True:
        cursor, step = read_limits(conn, name, cursor, count)
        yield from step
        if not cursor:
            return


def all_limits(conn: redis.Redis, name: str) -> List[KeyLimits]:
    """Every limit key of queue name, a bounded script call per DEFAULT_COUNT keys, sorted by key."""
    return sorted(each_limit(conn, name), key=lambda limits: limits.key)
