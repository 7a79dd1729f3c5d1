"""The limits in force on the queues, for `delayed stats` and the dashboard: per queue that has any, its
limit keys (a task's limit_key, or its function's path) with their rate_limit and concurrency_limit,
the slots their running tasks hold, and what each holds back, those holding back the most first.

Bounded: only a queue whose stats row counts limit keys (its registry's HLEN, read with its counts) is
read at all, a bounded script call per DEFAULT_COUNT keys (delayed.protocol.limits.read_limits), and
at most READ keys of a queue; never a SCAN of the database."""
from dataclasses import dataclass
from typing import Dict, List, Sequence

import redis

from ..protocol.limits import KeyLimits, each_limit
from .admin import Row, utc_time

READ = 10_000
"""Limit keys read per queue at most: READ / DEFAULT_COUNT script calls. A queue with more (one key per
customer, say) is read that far, and its Limits says it is not complete."""


@dataclass(frozen=True)
class Limits:
    """One queue's limits, as a look found them.

    keys: its limit keys read (rows of key_row), those holding back the most tasks first (then those
    running the most, then by key). total: the keys its registry held when its counts were read.
    complete: whether every key was read (False once READ were: total says how many there are).
    """

    queue: str
    keys: List[Row]
    total: int
    complete: bool

    def sum(self, field: str) -> int:
        """A count (running, waiting, scheduled, held) summed over the keys read."""
        return sum(int(key[field]) for key in self.keys)


def read(conn: redis.Redis, rows: Sequence[Row], at_most: int = READ) -> Dict[str, Limits]:
    """The Limits of each queue of admin.stats rows whose registry has keys ("limit_keys"), by queue
    name; a queue without limits is left out, and costs nothing. At most at_most keys a queue."""
    return {row["queue"]: _read_queue(conn, row["queue"], row["limit_keys"], at_most)
            for row in rows if row["limit_keys"]}


def _read_queue(conn: redis.Redis, name: str, total: int, at_most: int) -> Limits:
    found: Dict[str, KeyLimits] = {}
    complete = True
    for limits in each_limit(conn, name):
        found[limits.key] = limits  # a key read twice (the registry grew meanwhile) is shown once
        if len(found) >= at_most:
            complete = len(found) >= total
            break
    keys = sorted(found.values(), key=lambda limits: (-limits.held, -limits.running, limits.key))
    return Limits(name, [key_row(limits) for limits in keys], total, complete)


def key_row(limits: KeyLimits) -> Row:
    """One limit key as a row: limit_key; rate_limit and concurrency_limit (None where its tasks have
    none), as its last admitted task carried them; running: the slots held; waiting: tasks held back
    for a slot (out of the queue: no other count has them); scheduled: tasks held back for its rate (in
    the queue's scheduled set, not due yet); held: both; next_due_in: seconds until the first of those
    is due (None: none); started: starts within its rate's last period; last_admitted: when a task of
    it was last admitted (ISO 8601, UTC)."""
    return {"limit_key": limits.key, "rate_limit": limits.rate_limit, "concurrency_limit": limits.concurrency_limit,
            "running": limits.running, "waiting": limits.waiting, "scheduled": limits.scheduled,
            "held": limits.held, "next_due_in": None if limits.next_due_in is None else round(limits.next_due_in, 1), "started": limits.started,
            "last_admitted": utc_time(limits.seen) if limits.seen else None}


def summary(limits: Limits) -> str:
    """For people, over a queue's limit keys: how many, and what they run and hold back, summed."""
    read_note = "" if limits.complete else f" (the first {len(limits.keys)} read)"
    return (f"{_count(limits.total, 'key')}{read_note}, {limits.sum('running')} running, "
            f"{limits.sum('waiting')} held for a slot, {limits.sum('scheduled')} for their rate")


def shown(limits: Limits, top: int) -> List[Row]:
    """The first top keys of a queue's limits (those holding back the most), for a table: the counts of a
    limit its tasks do not have left blank."""
    return [{**key, **({} if key["rate_limit"] else {"scheduled": None, "started": None}),
             **({} if key["concurrency_limit"] else {"running": None, "waiting": None})}
            for key in limits.keys[:top]]


def unshown(limits: Limits, top: int) -> str:
    """What a table of the first top keys leaves out, for people ("" when nothing)."""
    more = limits.total - min(top, len(limits.keys))
    if more <= 0:
        return ""
    held = sum(key["held"] for key in limits.keys[top:])
    return (f"and {_count(more, 'more key')}, holding back {_count(held, 'task')}"
            f"{'' if limits.complete else ' among those read'}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
