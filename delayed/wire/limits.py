"""Limits per key: what a task's rate_limit, concurrency_limit and limit_key options ask of the worker
that claims it. Redis enforces them (delayed/protocol/lua/admit.lua, limits.lua), for every worker of
the queue, ours in Python and in Go; go/delayed reads the same options the same way (limitOf)."""
import json
from dataclasses import dataclass
from typing import Any, Dict, Optional

from .options import NO_OPTIONS, TaskOptions, count_of
from .strenum import StrEnum


class Admission(StrEnum):
    """What admit.lua did with a claimed task that has limits."""

    ADMITTED = "admitted"
    """It starts now: its start is logged (rate_limit), its id holds a slot (concurrency_limit)."""
    WAITING = "waiting"
    """Held back for a slot of its key: out of the queue, in the key's waiting list, until a slot frees."""
    SCHEDULED = "scheduled"
    """Held back for its rate: in the scheduled set until the start reserved for it is due."""
    FENCED = "fenced"
    """The id no longer held the blob (a sweeper took it back): nothing was done, and it is not to run."""


@dataclass(frozen=True)
class Limit:
    """The limits of one task: key, the tasks of the queue it shares them with (its limit_key, or its
    function's path); rate_limit, its text ("100/m"), with rate_count starts per period_ms (0 and 0
    without one); concurrency, its concurrency_limit (0 without one)."""

    key: str
    rate_limit: str = ""
    rate_count: int = 0
    period_ms: int = 0
    concurrency: int = 0


def limit_of(options: TaskOptions, func_path: str) -> Optional[Limit]:
    """The limits a task's options ask for, None for a task without any. The key defaults to func_path:
    a PyTask's "module:function", a GoTask's Go name."""
    if options is NO_OPTIONS or (options.rate_limit is None and options.concurrency_limit is None):
        return None
    rate_count, period = count_of(options.rate_limit) if options.rate_limit is not None else (0, 0)
    return Limit(options.limit_key or func_path, options.rate_limit or "", rate_count, period * 1000,
                 options.concurrency_limit or 0)


@dataclass(frozen=True)
class LimitsSeen:
    """The limits a key's tasks carried when one was last admitted (the queue's limits registry): its
    rate_limit and concurrency_limit (None where it had none), and when (unix seconds)."""

    rate_limit: Optional[str]
    concurrency_limit: Optional[int]
    seen: float

    @classmethod
    def parse(cls, text: bytes) -> "LimitsSeen":
        """A registry entry (JSON, as admit.lua writes it); never raises: what it cannot read is None."""
        try:
            value: Dict[str, Any] = json.loads(text)
        except ValueError:
            value = {}
        if not isinstance(value, dict):
            value = {}
        rate, concurrency, seen = value.get("rate_limit"), value.get("concurrency_limit"), value.get("seen")
        return cls(rate if isinstance(rate, str) else None,
                   concurrency if isinstance(concurrency, int) and not isinstance(concurrency, bool) else None,
                   float(seen) if isinstance(seen, (int, float)) and not isinstance(seen, bool) else 0.0)
