"""The dashboard's throughput: admin.stats sampled every few seconds into a ring buffer (no Flask here).

What is charted is every `*_per_s` field of a sample's rows. If admin.stats itself gives rate fields
(per-queue counters of tasks in and out, such as in_per_s and out_per_s), those are charted as they
are; otherwise the rates come from successive counts (admin.with_rates): net_per_s, the change per
second of pending + processing + scheduled, and dead_per_s, that of the dead count. A sample that
fails (Redis unreachable) leaves a gap, and the next one starts the rates afresh.
"""
import collections
import logging
import threading
import time
from typing import Deque, Dict, List, Optional, Sequence, Tuple, cast

import redis

from .. import admin
from ...protocol.connection import error_text

Series = Dict[str, Dict[str, List[Optional[float]]]]
"""queue -> rate field -> its values, oldest first (None: no value for that sample)."""

log = logging.getLogger("delayed.dashboard")

DISCOVER_EVERY = 60.0
"""Seconds between looks for queues (one SCAN of the database) when no queues were named."""


_FIRST = ("in_per_s", "out_per_s", "net_per_s", "dead_per_s")


def rate_fields(row: admin.Row) -> List[str]:
    """The rate fields of a stats row: those named *_per_s, the known ones first."""
    fields = [field for field in row if field.endswith("_per_s")]
    return sorted(fields, key=lambda field: (_FIRST.index(field) if field in _FIRST else len(_FIRST), field))


class Sampler:
    """Samples admin.stats of queues (default: every queue found, looked for at most once a minute) every
    `every` seconds, keeping window seconds."""

    def __init__(self, conn: redis.Redis, queues: Optional[Sequence[str]] = None, every: float = 5.0,
                 window: float = 600.0) -> None:
        self.conn = conn
        self.queues = list(queues or [])
        self.every = every
        self.window = window
        self._samples: Deque[Optional[List[admin.Row]]] = collections.deque(maxlen=max(2, int(window / every)))
        self._previous: Optional[Tuple[float, List[admin.Row]]] = None
        self._found: List[str] = []
        self._next_discovery = 0.0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delayed-dashboard-sampler", daemon=True)

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.sample()
            self._stopping.wait(self.every)

    def include(self, names: Sequence[str]) -> None:
        """Sample these queues too from now on (the page found them before the next look for queues)."""
        with self._lock:
            self._found = sorted(set(self._found).union(names))

    def sample(self) -> None:
        """Take one sample (a gap if Redis does not answer)."""
        try:
            if not self.queues and time.monotonic() >= self._next_discovery:  # a SCAN: at most once a minute
                found = admin.queue_names(self.conn)
                with self._lock:
                    self._found = found
                self._next_discovery = time.monotonic() + DISCOVER_EVERY
            rows = admin.stats(self.conn, self.queues or self._found)
        except redis.RedisError as exc:
            log.debug("sample failed: %s", error_text(exc))
            with self._lock:
                self._previous = None
                self._samples.append(None)
            return
        now = time.monotonic()
        rated: Optional[List[admin.Row]]
        if rows and rate_fields(rows[0]):
            rated = rows  # admin.stats gives its own rates (counters of tasks in and out): chart those
        elif self._previous is not None:
            rated = admin.with_rates(rows, self._previous[1], now - self._previous[0])
        else:
            rated = None  # the first sample: no rate yet
        with self._lock:
            self._previous = (now, rows)
            self._samples.append(rated)

    def latest(self) -> List[admin.Row]:
        """The newest sample's rows ([] before the first rates, or after a gap)."""
        with self._lock:
            return list(self._samples[-1] or []) if self._samples else []

    def series(self) -> Series:
        """Every queue's rate fields over the window, one value per sample slot, the newest last (None for a
        gap, or a slot not yet sampled: the window is always whole, so charts keep their time scale)."""
        with self._lock:
            samples: List[Optional[List[admin.Row]]] = list(self._samples)
        gaps: List[Optional[List[admin.Row]]] = [None] * (cast(int, self._samples.maxlen) - len(samples))
        samples = gaps + samples
        found: Series = {}
        for i, rows in enumerate(samples):
            for row in rows or []:
                per_queue = found.setdefault(row["queue"], {})
                for field in rate_fields(row):
                    values = per_queue.setdefault(field, [None] * len(samples))
                    value = row[field]
                    values[i] = float(value) if isinstance(value, (int, float)) else None
        return found


def sparkline(values: Sequence[Optional[float]], width: int = 120, height: int = 28) -> Dict[str, object]:
    """An SVG sparkline's polylines (one per run of values without a gap), scaled so the largest
    magnitude reaches the edge, 0 in the middle; plus the latest value and that magnitude."""
    known = [value for value in values if value is not None]
    scale = max((abs(value) for value in known), default=0.0) or 1.0
    step = width / max(len(values) - 1, 1)
    middle = height / 2
    lines: List[str] = []
    run: List[str] = []
    for i, value in enumerate(values):
        if value is None:
            if run:
                lines.append(" ".join(run))
            run = []
            continue
        run.append(f"{i * step:.1f},{middle - value / scale * (middle - 1):.1f}")
    if run:
        lines.append(" ".join(run))
    return {"lines": lines, "latest": known[-1] if known else None, "peak": max(map(abs, known), default=0.0),
            "width": width, "height": height, "middle": middle}
