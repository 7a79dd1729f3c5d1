"""Queue-side metrics (SERIES), read from Redis at each scrape in one pipelined round trip.

The oldest pending age is the latency admin.stats tells: a tracked task's record says when it was
enqueued (or came due), and with one at the head of the queue its age is measured. Other blobs carry
no enqueue time (the format is go-delayed's), so then it is a lower bound: how long the task now at
the head of the queue has been seen there, by a sweep (its head_since marker, when it names this
head) or by the collector, whichever saw it first. The collector remembers when it first saw the
current head (by its sha1) and starts again when the head changes or the queue shrank between two
scrapes (its head was taken); identical blobs that follow each other while the queue does not shrink
look like one task.
"""
import hashlib
import logging
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import redis

from ...protocol.redis_errors import error_text
from ...runtime.command import METRICS_HOST
from ...runtime.lifecycle import Lifecycle
from ...runtime.series import Series
from ...wire.keys import COUNTED_EVENTS, WORKFLOW_EVENTS
from .. import admin, limits

logger = logging.getLogger(__name__)

DISCOVERY_INTERVAL = 60.0
"""Seconds between looks (SCAN) for the queues that exist, when no queue is named."""
SERIES = (
    Series("delayed_up", "gauge", (), "1 if Redis answered this scrape, else 0 (then no queue metrics)"),
    Series("delayed_queue_tasks", "gauge", ("queue", "state"),
           "Tasks per queue: pending (in the queue), processing (held by workers), scheduled (delayed or retrying "
           "later), dead (dead-lettered)"),
    Series("delayed_workers", "gauge", ("queue",), "Live workers per queue, those delayed workers lists: ours, and "
           "go-delayed's while they hold a task of the queue and their keep-alive key lives"),
    Series("delayed_queue_paused", "gauge", ("queue",), "1 while the queue is paused (delayed pause): our workers "
           "take no new task from it; go-delayed's workers do not know about pausing"),
    Series("delayed_queue_oldest_pending_seconds", "gauge", ("queue",),
           "The age of the oldest pending task (its latency so far), as delayed stats tells it: measured when it is "
           "tracked (its record says when it was enqueued), else a lower bound: how long a sweep or the exporter has "
           "seen it at the head of the queue, whichever saw it first (untracked blobs carry no enqueue time); 0 when "
           "none is pending"),
    Series("delayed_queue_events_total", "counter", ("queue", "event"),
           "Tasks per queue and event, counted by our producers' and workers' scripts (go-delayed's do not count): "
           "enqueued (into the queue or the scheduled set, dead letters requeued included), done (released by a "
           "worker), retried (requeued or rescheduled after a failure), dead (dead-lettered)"),
    Series("delayed_queue_workflows_total", "counter", ("queue", "event"),
           "Workflows per queue (the one each was enqueued on) and event, counted by the scripts that enqueue and "
           "settle their steps: started (enqueued), done (ended done: no failure stopped it or went to an on_failure step), failed (a step's failure "
           "stopped it, again each time it stops after a requeue resumed it; or it ended after an on_failure step "
           "took a failure)"),
    Series("delayed_queue_limit_keys", "gauge", ("queue",),
           "Limit keys per queue (rate_limit, concurrency_limit: a task's limit_key, or its function's path) that its "
           "tasks ran under; 0 for a queue without limits. No metric has a limit key as a label: there may be one per "
           "customer"),
    Series("delayed_queue_limit_tasks", "gauge", ("queue", "state"),
           "Tasks per queue under its limits per key, summed over its keys: running (holding a concurrency slot), "
           "waiting (held back for a slot, out of the queue: in no state of delayed_queue_tasks), scheduled (held "
           "back for their rate, in the scheduled set: counted in delayed_queue_tasks' scheduled too). At most "
           f"{limits.READ:,} keys a queue are read a scrape"),
)
"""What the exporter's /metrics holds, in the order collect() yields it."""
STATES = ("pending", "processing", "scheduled", "dead")
LIMIT_STATES = ("running", "waiting", "scheduled")
"""The states of delayed_queue_limit_tasks: sums of the counts of delayed.ops.limits.key_row."""

Scraped = Tuple[str, List[int], int, bool, float, List[int], List[int], int, List[int]]
"""A queue's name, its counts by state, its live workers, whether it is paused, its oldest pending age,
its counters by event, its workflow counters by WORKFLOW_EVENTS, its limit keys, its tasks under their
limits by LIMIT_STATES."""


class QueueCollector:
    """A prometheus_client collector of the queues in `names` (None: every queue found with
    delayed.ops.admin.queue_names, looked for again every DISCOVERY_INTERVAL seconds).

    A Redis error makes the scrape report delayed_up 0 and nothing else; it is logged once,
    and once more when Redis answers again.
    """

    def __init__(self, conn: redis.Redis, names: Optional[Sequence[str]] = None) -> None:
        self._conn = conn
        self._names = list(names) if names else None
        self._found: List[str] = []
        self._found_at = float("-inf")
        self._heads: Dict[str, Tuple[bytes, int, float]] = {}  # queue -> head's sha1, length, first seen
        self._failing = False
        self._lock = threading.Lock()  # scrapes may overlap (the HTTP server answers each in a thread)

    def describe(self) -> List[Any]:
        """The families collect() yields, without reading Redis (prometheus_client calls it on register)."""
        return list(self._families())

    def collect(self) -> Iterator[Any]:
        up, tasks, workers, paused, oldest, events, workflows, limit_keys, limited = self._families()
        rows = self._scrape()
        up.add_metric([], 0 if rows is None else 1)
        if rows is None:
            yield up
            return
        for name, counts, live, is_paused, age, counters, flows, keys, under_limits in rows:
            for state, count in zip(STATES, counts):
                tasks.add_metric([name, state], count)
            workers.add_metric([name], live)
            paused.add_metric([name], int(is_paused))
            oldest.add_metric([name], age)
            for event, total in zip(COUNTED_EVENTS, counters):
                events.add_metric([name, event], total)
            for event, total in zip(WORKFLOW_EVENTS, flows):
                workflows.add_metric([name, event], total)
            limit_keys.add_metric([name], keys)
            for state, count in zip(LIMIT_STATES, under_limits):
                limited.add_metric([name, state], count)
        yield from (up, tasks, workers, paused, oldest, events, workflows, limit_keys, limited)

    def _scrape(self) -> Optional[List[Scraped]]:
        """The rows of _read(), or None after a Redis error (said once, and once when it answers again)."""
        with self._lock:
            try:
                rows = self._read()
            except redis.RedisError as exc:
                if not self._failing:
                    logger.error("cannot read the queues from Redis (%s); delayed_up is 0 until it answers",
                                 error_text(exc))
                self._failing = True
                return None
            if self._failing:
                logger.info("Redis answers again")
            self._failing = False
            return rows

    @staticmethod
    def _families() -> Tuple[Any, ...]:
        """An empty family per entry of SERIES, in its order."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        kinds = {"gauge": GaugeMetricFamily, "counter": CounterMetricFamily}
        return tuple(kinds[series.kind](series.name, series.help, labels=series.labels) for series in SERIES)

    def _read(self) -> List[Scraped]:
        """Per queue: its counts by state, its live workers, whether it is paused, its oldest pending age, its
        counters, its workflow counters, and its limits (read only for a queue that has some)."""
        rows = admin.stats(self._conn, self._queue_names(), heads=True)
        limited = limits.read(self._conn, rows)
        now = time.monotonic()
        return [(row["queue"], [row[state] for state in STATES], row["workers"], row["paused"],
                 self._oldest(row, now), [row[field] for field in admin.COUNTER_FIELDS],
                 [row[field] for field in admin.WORKFLOW_FIELDS], row["limit_keys"],
                 [limited[row["queue"]].sum(state) if row["queue"] in limited else 0 for state in LIMIT_STATES])
                for row in rows]

    def _queue_names(self) -> List[str]:
        if self._names is not None:
            return self._names
        now = time.monotonic()
        if now >= self._found_at + DISCOVERY_INTERVAL:
            self._found = admin.queue_names(self._conn)
            self._found_at = now
            self._heads = {name: seen for name, seen in self._heads.items() if name in self._found}
        return self._found

    def _oldest(self, row: admin.Row, now: float) -> float:
        """The latency admin.stats measured (0: empty; the age of a tracked head), else the longer of
        two lower bounds: how long a sweep has seen the head there (stats' estimate from head_since),
        and how long this collector has (0: just seen)."""
        name, head, length = row["queue"], row["head"], row["pending"]
        if head is None:
            self._heads.pop(name, None)
            return 0.0
        digest = hashlib.sha1(head).digest()
        seen = self._heads.get(name)
        if seen is None or seen[0] != digest or length < seen[1]:
            seen = (digest, length, now)
        self._heads[name] = (digest, length, seen[2])
        if row["latency_measured"]:
            return row["latency"]
        return max(now - seen[2], row["latency"] or 0.0)


class Exporter:
    """Serves a QueueCollector on /metrics at host:port (default: loopback only) until stop() or a stop signal."""

    def __init__(self, conn: redis.Redis, names: Optional[Sequence[str]], port: int, host: str = METRICS_HOST) -> None:
        self.collector = QueueCollector(conn, names)
        self.port = port
        self.host = host
        self.lifecycle = Lifecycle("metrics exporter", finishing="")

    def run(self, handle_signals: bool = True) -> int:
        """Serve until stopped; the exit status (see delayed.runtime.lifecycle)."""
        return self.lifecycle.run(self._serve, handle_signals)

    def stop(self) -> None:
        self.lifecycle.stop()

    def _serve(self) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry()
        registry.register(self.collector)
        server, _ = start_http_server(self.port, self.host, registry=registry)
        self.lifecycle.online()
        logger.info("exporting queue metrics on http://%s:%d/metrics", self.host, self.port)
        try:
            while not self.lifecycle.wait(3600):
                pass
        finally:
            server.shutdown()
            server.server_close()
