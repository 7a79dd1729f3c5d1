"""The task functions every system's worker runs (imported by name, from bench/ on PYTHONPATH)."""
import os
import time

import redis

_conn = None


def noop():
    pass


def record(enqueued_at):
    """Start latency: RPUSH now - enqueued_at (seconds) to bench:latency (common.LATENCY_KEY)."""
    started = time.time()
    global _conn
    if _conn is None:
        _conn = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    _conn.rpush("bench:latency", started - enqueued_at)
