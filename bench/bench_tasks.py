"""The task functions every system's worker runs (imported by name, from bench/ on PYTHONPATH)."""
import asyncio
import os
import time

import redis

_conn = None

IO_SECONDS = 0.01  # the 10 ms tasks of the io rows: a wait on the network, stood in for by a sleep
# what flow_end writes, read by the workflow measurements in common.py
FLOW_ENDED, FLOW_ENDED_AT, FLOW_INPUTS = "bench:flow_ended", "bench:flow_ended_at", "bench:flow_inputs"


def _redis() -> redis.Redis:
    global _conn
    if _conn is None:
        _conn = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    return _conn


def noop():
    pass


def record(enqueued_at):
    """Start latency: RPUSH now - enqueued_at (seconds) to bench:latency (common.LATENCY_KEY)."""
    started = time.time()
    _redis().rpush("bench:latency", started - enqueued_at)


STARTED = "bench:started"  # started() RPUSHes when it ran: the rate-limit section's starts


def started():
    """RPUSH when it started (time.time()) to bench:started: what the rate-limit section counts."""
    _redis().rpush(STARTED, repr(time.time()))


def step(*previous):
    """A workflow's no-op step: takes the previous step's result if it is given one (delayed appends
    it as the last argument, Celery's chain passes it as the first), returns None."""


def flow_end(*previous):
    """A chain's last step or a group's callback: counts itself in bench:flow_ended and writes when it
    ran (time.time()) and how many results it was given (a callback's list; 0 otherwise), in one
    round trip."""
    ran = time.time()
    results = previous[-1] if previous and isinstance(previous[-1], list) else []
    with _redis().pipeline(transaction=True) as pipe:
        pipe.incr(FLOW_ENDED).set(FLOW_ENDED_AT, repr(ran)).set(FLOW_INPUTS, len(results)).execute()


def sleep10():
    """A plain function that waits 10 ms (the GIL released), as a blocking network call does."""
    time.sleep(IO_SECONDS)


async def asleep10():
    """A coroutine function that waits 10 ms, as an awaited network call does."""
    await asyncio.sleep(IO_SECONDS)
