"""The task functions every system's worker runs (imported by name, from bench/ on PYTHONPATH)."""
import asyncio
import os
import time

import redis

_conn = None

IO_SECONDS = 0.01  # the 10 ms tasks of the io rows: a wait on the network, stood in for by a sleep


def noop():
    pass


def record(enqueued_at):
    """Start latency: RPUSH now - enqueued_at (seconds) to bench:latency (common.LATENCY_KEY)."""
    started = time.time()
    global _conn
    if _conn is None:
        _conn = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    _conn.rpush("bench:latency", started - enqueued_at)


def sleep10():
    """A plain function that waits 10 ms (the GIL released), as a blocking network call does."""
    time.sleep(IO_SECONDS)


async def asleep10():
    """A coroutine function that waits 10 ms, as an awaited network call does."""
    await asyncio.sleep(IO_SECONDS)
