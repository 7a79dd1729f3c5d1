"""The dashboard's throughput: admin.stats sampled every few seconds into each queue's sample history
in Redis (admin.record_samples: capped, expiring), so the charts survive a restart (no Flask here).

What is charted is every `*_per_s` field of the rates admin.sampled makes of successive samples
(in_per_s, out_per_s, net_per_s, dead_per_s: see admin.with_rates). A queue sampled for the first
time is sampled again after FIRST_STEP seconds, so its first point comes within a sample period; a
sample that fails (Redis unreachable) leaves a gap, and the lines break there.
"""
import logging
import threading
import time
from typing import Dict, List, Optional, Sequence, Set

import redis

from ...protocol.redis_errors import error_text
from .. import admin
from .charts import Point

Series = Dict[str, Dict[str, List[Point]]]
"""queue -> rate field -> its (unix time, value) points, oldest first (None: no value then)."""

log = logging.getLogger("delayed.dashboard")

DISCOVER_EVERY = 60.0
"""Seconds between looks for queues (one SCAN of the database) when no queues were named."""
FIRST_STEP = 1.0
"""Seconds to the next sample when a queue was sampled for the first time (at most the period)."""
GAP = 2.5
"""Sample periods without a sample after which the charts' lines break."""

_FIRST = ("in_per_s", "out_per_s", "net_per_s", "dead_per_s")


def rate_fields(row: admin.Row) -> List[str]:
    """The rate fields of a row: those named *_per_s, the known ones first."""
    fields = [field for field in row if field.endswith("_per_s")]
    return sorted(fields, key=lambda field: (_FIRST.index(field) if field in _FIRST else len(_FIRST), field))


class Sampler:
    """Samples admin.stats of queues (default: every queue found, looked for at most once a minute) every
    `every` seconds into their histories, which keep window seconds."""

    def __init__(self, conn: redis.Redis, queues: Optional[Sequence[str]] = None, every: float = 5.0,
                 window: float = 600.0) -> None:
        self.conn = conn
        self.queues = list(queues or [])
        self.every = every
        self.window = window
        self.keep = int(window / every) + 1
        self._found: List[str] = []
        self._seen: Set[str] = set()
        self._next_discovery = 0.0
        self._lock = threading.Lock()
        self._stopping = False
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delayed-dashboard-sampler", daemon=True)

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stopping:
            fresh = self.sample()
            self._wake.wait(min(FIRST_STEP, self.every) if fresh else self.every)
            self._wake.clear()

    def include(self, names: Sequence[str]) -> None:
        """Sample these queues too from now on, at once if one is new (the page found them before the
        next look for queues)."""
        with self._lock:
            new = set(names).difference(self._found)
            self._found = sorted(new.union(self._found))
        if new and not self.queues:
            self._wake.set()

    def sample(self) -> bool:
        """Take one sample (none if Redis does not answer); whether a queue was sampled for the first time."""
        try:
            if not self.queues and time.monotonic() >= self._next_discovery:  # a SCAN: at most once a minute
                found = admin.queue_names(self.conn)
                with self._lock:
                    self._found = sorted(set(found).union(self._found))
                self._next_discovery = time.monotonic() + DISCOVER_EVERY
            rows = admin.stats(self.conn, self._names())
            admin.record_samples(self.conn, rows, self.keep, ttl=int(2 * self.window) + 1)
        except redis.RedisError as exc:
            log.debug("sample failed: %s", error_text(exc))
            return False
        names = {row["queue"] for row in rows}
        fresh = bool(names - self._seen)
        self._seen |= names
        return fresh

    def _names(self) -> List[str]:
        with self._lock:
            return self.queues or list(self._found)

    def history(self, names: Sequence[str]) -> Dict[str, List[admin.Row]]:
        """The queues' samples over the window, with their rates (admin.sampled)."""
        return admin.sampled(self.conn, names, self.keep, GAP * self.every)

    def latest(self, history: Dict[str, List[admin.Row]]) -> List[admin.Row]:
        """The newest sample of each queue, if it is recent (taken less than GAP periods ago): an old
        rate says nothing of now."""
        since = time.time() - GAP * self.every
        return [rows[-1] for rows in history.values() if rows and rows[-1]["at"] >= since]


def series(history: Dict[str, List[admin.Row]]) -> Series:
    """Every queue's rate fields as points (a queue with no rate yet has none)."""
    found: Series = {}
    for name, rows in history.items():
        for row in rows:
            for field in rate_fields(row):
                value = row[field]
                found.setdefault(name, {}).setdefault(field, []).append(
                    (row["at"], float(value) if isinstance(value, (int, float)) else None))
    return {name: fields for name, fields in found.items()
            if any(value is not None for points in fields.values() for _, value in points)}
