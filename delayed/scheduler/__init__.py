"""Periodic tasks: every replica of the scheduler computes the same ticks, and one Lua script per
tick lets exactly one replica enqueue it, so running several for availability adds no duplicates.

    python -m delayed.scheduler [--redis-url URL] MODULE_OR_FILE

MODULE_OR_FILE defines SCHEDULE, a list of Periodic entries.
"""
import datetime
import logging
import math
import numbers
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Set, Union, cast

import croniter
import redis

from ..protocol.connection import is_cluster
from ..protocol.periodic import Claim, Ticks
from ..runtime.role import Role
from ..wire.keys import QueueKeys, check_queue_name
from ..wire.strenum import StrEnum
from ..wire.task import GoTask, PyTask
from .clock import ClockSkew

logger = logging.getLogger(__name__)


class Missed(StrEnum):
    """What a Periodic entry does with a tick missed while every replica was down."""

    SKIP = "skip"
    ONCE = "once"


@dataclass
class Periodic:
    """A task to enqueue on a schedule: at each tick of a cron expression, or every so many seconds.

    A scheduler enqueues the task into `queue` at each tick, by Redis's clock. A tick due more than
    `grace` seconds ago is found only when every scheduler replica was down; `missed` says what to do
    with it. An entry is checked as it is made, so a bad one stops a schedule from loading rather
    than a scheduler from running.

    Args:
        task: A PyTask, a GoTask, or the path `"module:func"` of a function (a PyTask without
            arguments).
        queue: The queue's name.
        cron: A cron expression, in UTC: `"*/5 * * * *"` is every 5 minutes.
        every: Seconds between ticks, at least 1: ticks fall at whole multiples of `every` since the
            epoch, the same on every replica. Give `cron` or `every`, not both.
        missed: `"skip"` a tick due more than `grace` seconds ago (the default), or run it `"once"`,
            however many ticks were missed; a `Missed`, or its value.
        grace: Seconds a tick may be late and still run (0 or more).
        name: The entry's identity in Redis (default: queue, task and timing, e.g.
            `"default:tasks:cleanup:*/5 * * * *"`): rename it and it starts afresh.

    Raises:
        ValueError: `cron` and `every` both given, or neither; not a cron expression, or one that never
            fires (`"0 0 31 2 *"`); `every` not a number (a bool is none), NaN, infinite or under 1;
            `grace` not a number, NaN or negative; `missed` neither `"skip"` nor `"once"`. The message
            names the entry (by its `name`, or its queue and task) and what is wrong.

    Example:
        ```python
        # schedule.py: python -m delayed.scheduler schedule.py
        from delayed import GoTask, Periodic

        SCHEDULE = [
            Periodic("tasks:cleanup", cron="*/5 * * * *"),  # every 5 minutes (UTC), queue "default"
            Periodic(GoTask("main.Report", ["daily"]), cron="0 3 * * *", queue="go", missed="once"),
            Periodic("tasks:heartbeat", every=30, queue="fast"),  # at whole multiples of 30 s
        ]
        ```
    """

    task: Union[PyTask, GoTask, str]
    queue: str = "default"
    cron: Optional[str] = None
    every: Optional[float] = None
    missed: Union[Missed, str] = Missed.SKIP
    grace: float = 60.0
    name: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.task, str):
            self.task = PyTask(self.task)
        problem = self._timing_problem() or _seconds_problem("grace", self.grace, least=0)
        if problem is None and self.missed not in tuple(Missed):
            problem = f"missed must be 'skip' or 'once', got {self.missed!r}"
        if problem is not None:
            named = self.name or f"{self.queue}:{self.task.func_path}"  # the default name needs a valid timing
            raise ValueError(f"Periodic {named!r}: {problem}")
        self.missed = Missed(self.missed)
        self.name = self.name or f"{self.queue}:{self.task.func_path}:{self.cron or self.every}"

    def _timing_problem(self) -> Optional[str]:
        """What is wrong with cron and every, or None: one of them, a cron that fires, every at least 1 s."""
        if (self.cron is None) == (self.every is None):
            return "give cron or every, not both or neither"
        if self.cron is not None:
            if not isinstance(self.cron, str) or not croniter.croniter.is_valid(self.cron):
                return f"not a cron expression: {self.cron!r}"
            try:
                croniter.croniter(self.cron, datetime.datetime.now(datetime.timezone.utc)).get_next(float)
            except croniter.CroniterError:
                return f"cron {self.cron!r} never fires"
            return None
        return _seconds_problem("every", self.every, least=1, finite=True)

    def blob(self) -> bytes:
        """The task's blob (a function path given as the task is a PyTask by now)."""
        return cast(Union[PyTask, GoTask], self.task).serialize()

    def last_tick(self, now: float) -> float:
        """The latest tick at or before `now`.

        Args:
            now: A unix time.

        Returns:
            The tick, in unix seconds.
        """
        if self.every is not None:
            return math.floor(now / self.every) * self.every
        after = datetime.datetime.fromtimestamp(math.floor(now) + 1, datetime.timezone.utc)
        return croniter.croniter(self.cron, after).get_prev(float)  # strictly before `after`


def _seconds_problem(what: str, value: Any, least: float, finite: bool = False) -> Optional[str]:
    """What is wrong with value as a number of seconds, at least `least` (and finite if asked), or None
    (a bool is no number, and NaN is never at least anything)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"{what} must be a number of seconds, got {value!r}"
    if not float(value) >= least:
        return f"{what} must be at least {least:g} s, got {value!r}"
    if finite and math.isinf(value):
        return f"{what} must be finite, got {value!r}"
    return None


class Scheduler(Role):
    """Enqueues the ticks of periodic entries until stopped; run as many replicas as you like.

    Every replica computes the same ticks, and one Lua script per tick both claims it and enqueues its
    task, so each tick is enqueued once across all replicas: run several, on several hosts, for
    availability. Ticks follow Redis's clock, not the host's: each round reads Redis's `TIME` (on a
    Redis Cluster, from the node of each entry's queue), so a replica whose clock is off neither skips
    nor shifts a tick, and it logs a WARNING once when its clock is more than a second off. The script
    also refuses a tick still to come by Redis's clock. An entry that fails as it runs (its cron, its
    task's blob) is logged, once until it works again, and skipped while the others go on; a Redis
    error stops the round, to be retried as Redis comes back.

    Each queue's last ticks live in its own hash (`N_periodic`), so on a Redis Cluster
    they share the queue's slot, and every entry's queue name needs a hash tag.
    `python -m delayed.scheduler MODULE_OR_FILE` runs one on the entries a module or file lists in
    `SCHEDULE`.

    Args:
        conn: The Redis the entries' queues are on: a `redis.Redis` or a `RedisCluster`.
        entries: The entries.
        poll: The most seconds between two looks for due ticks; an entry with `every` shortens it to
            at most `every / 4`.

    Raises:
        ValueError: An entry's queue name that `Queue` would refuse (on a Redis Cluster, one without
            a hash tag).

    Attributes:
        lifecycle (Lifecycle): Where the scheduler is: `lifecycle.state` is `"starting"`, `"online"`,
            `"draining"` or `"offline"`.
    """

    def __init__(self, conn: redis.Redis, entries: Sequence[Periodic], poll: float = 0.5) -> None:
        super().__init__("scheduler", logger, "tick")
        self.conn = conn
        self.entries = list(entries)
        for entry in self.entries:
            check_queue_name(entry.queue, is_cluster(conn))
        self.poll = min([poll] + [entry.every / 4 for entry in self.entries if entry.every])
        self._ticks = Ticks(conn)
        self._queues = [QueueKeys.of(queue) for queue in dict.fromkeys(entry.queue for entry in self.entries)]
        self._skew = ClockSkew(logger)
        self._seen: Dict[str, float] = {}
        self._failing: Set[str] = set()

    def tick(self, now: Optional[float] = None) -> int:
        """Claim every entry's latest tick not yet seen here, and enqueue the task of each tick this replica won.

        A tick due more than the entry's `grace` seconds ago is claimed and skipped, unless the entry's
        `missed` is `"once"`. A tick still to come by Redis's clock is refused, and claimed once due. An
        entry that raises is logged and skipped; a Redis error is raised.

        Args:
            now: The unix time to look at; default: Redis's clock (on a Redis Cluster, the clock of the
                node of each entry's queue).

        Returns:
            How many tasks this replica enqueued.
        """
        clocks = self._redis_clocks() if now is None else {keys.name: now for keys in self._queues}
        enqueued = 0
        for entry in self.entries:
            try:
                enqueued += self._tick(entry, clocks[entry.queue])
            except redis.RedisError:
                raise
            except Exception as exc:  # one entry's failure (its cron, its task's blob) stops no other entry
                if entry.name not in self._failing:
                    self._failing.add(entry.name)
                    logger.error("%s: %s: %s; skipped until it works again, the other entries go on",
                                 entry.name, type(exc).__name__, exc, exc_info=True)
            else:
                if entry.name in self._failing:
                    self._failing.discard(entry.name)
                    logger.info("%s: works again", entry.name)
        return enqueued

    def _tick(self, entry: Periodic, now: float) -> int:
        """Claim entry's latest tick at now unless seen here; the number of tasks enqueued (0 or 1)."""
        tick = entry.last_tick(now)
        if tick <= self._seen.get(entry.name, -math.inf):
            return 0
        run = entry.missed == Missed.ONCE or now - tick <= entry.grace
        claim = self._ticks.claim(QueueKeys.of(entry.queue), entry.name, tick, entry.blob(), run)
        if claim == Claim.EARLY:  # not seen: claimed again at a later look, once Redis's clock has passed it
            logger.warning("%s: tick %r is still to come by Redis's clock: not claimed yet", entry.name, tick)
            return 0
        if claim == Claim.WON:
            logger.info("%s: tick %s %s", entry.name, repr(tick), "enqueued" if run else "missed, skipped")
        self._seen[entry.name] = tick
        return int(run and claim == Claim.WON)

    def _redis_clocks(self) -> Dict[str, float]:
        """Redis's time by queue name, for this round; notes how far this host's clock is from it."""
        before = time.time()
        clocks = self._ticks.clocks(self._queues)
        local = (before + time.time()) / 2  # the middle of the round trip: off by half of it at most
        self._skew.saw(max((clock - local for clock in clocks.values()), key=abs, default=0.0))
        return clocks

    def starting(self) -> None:
        """Log, in one line, how many entries the scheduler runs; `run()` calls it as it starts."""
        logger.info("scheduling %d entries", len(self.entries))

    def round(self) -> float:
        """Enqueue the ticks due: one round of the loop `run()` repeats.

        Returns:
            The seconds until the next look.
        """
        self.tick()
        return self.poll
