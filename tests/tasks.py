"""Task functions the tests allow; each records what it received in the Redis of DELAYED_TEST_REDIS_URL."""
import asyncio
import os
import threading
import time
from os import system  # noqa: F401  imported, not defined here: must not be callable as a task

import redis

import delayed

RESULTS = "results"

_conn = None


def conn() -> redis.Redis:
    global _conn
    if _conn is None:
        _conn = redis.Redis.from_url(os.environ["DELAYED_TEST_REDIS_URL"])
    return _conn


def record(tag, *args, **kwargs):
    """Appends repr((tag, args, kwargs)) to the results list."""
    conn().rpush(RESULTS, repr((tag, args, kwargs)))


def fail_until(counter, failures):
    """Raises for the first `failures` calls counted under key `counter`, then records."""
    calls = conn().incr(counter)
    if calls <= failures:
        raise RuntimeError(f"call {calls} fails")
    record(counter)


def always_fail(tag):
    conn().incr(tag)
    raise ValueError(f"{tag} always fails")


def slow(tag, seconds):
    """Marks itself started, sleeps, then records: the window in which tests signal or kill the worker."""
    conn().set("started:" + tag, os.getpid())
    time.sleep(seconds)
    record(tag)


def slow_once(tag, seconds):
    """slow() the first time it runs (the window in which tests kill its worker), quick when it runs again:
    records each run."""
    if conn().set("started:" + tag, os.getpid(), nx=True):
        time.sleep(seconds)
    record(tag)


async def async_record(tag):
    await asyncio.sleep(0)
    record(tag)


def bad_call_inside(tag):
    """A TypeError raised inside the function body is a failure, not an argument error."""
    conn().incr(tag)
    return len(1)


def _private(tag):
    record("private ran")


class Thing:
    def __init__(self, tag):
        record("Thing ran")


def leave_thread(tag):
    """Starts a thread that is no daemon and sleeps for an hour, named "left by TAG", then records:
    Python waits for such a thread as a process exits, unless the command abandons it."""
    threading.Thread(target=time.sleep, args=(3600,), name=f"left by {tag}").start()
    record(tag)


def slow_then_fail(tag, seconds):
    conn().set("started:" + tag, os.getpid())
    time.sleep(seconds)
    raise RuntimeError(f"{tag} failed after {seconds} s")


def kill_my_worker():
    """A poison task: takes its worker process down with it, every time."""
    os.kill(os.getpid(), 9)


def stubborn(tag, seconds):
    """Tries to swallow every Exception: a time limit must still stop it."""
    conn().set("started:" + tag, os.getpid())
    try:
        time.sleep(seconds)
    except Exception:
        record("swallowed")
    record(tag)


def count(task_id):
    """Counts one execution of task_id; rides out Redis restarts, so only the worker can lose it."""
    for _ in range(600):
        try:
            conn().hincrby("executions", task_id, 1)
            return
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("Redis did not come back within 30 s")


def give_up(tag):
    from delayed import SkipRetry

    conn().incr(tag)
    raise SkipRetry(f"{tag}: not worth retrying")


def tenth_of_attempt(attempt):
    """A custom backoff: attempt / 10 seconds."""
    return attempt / 10


async def async_slow(tag, seconds):
    """A coroutine that records only if it is still running after `seconds`."""
    conn().set("started:" + tag, os.getpid())
    await asyncio.sleep(seconds)
    record(tag)


def alarm_in_caller(tag):
    """Delivers the time limit's alarm as if it landed just after this function returned: while its
    caller's frame runs (the window between a task's return and the timer's reset)."""
    import signal
    import sys

    handler = signal.getsignal(signal.SIGALRM)
    if callable(handler):
        handler(signal.SIGALRM, sys._getframe(1))
    record(tag)


def unstoppable(tag, seconds, release=None):
    """Swallows every interruption, TimeLimitExceeded included, until `seconds` have passed (or the
    key `release` exists)."""
    conn().set("started:" + tag, os.getpid())
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if release and conn().exists(release):
                break
            time.sleep(0.01)
        except BaseException:  # (the interruption may land in the look at `release` too)
            conn().incr("interrupted:" + tag)
    record(tag)


def busy(tag, seconds):
    """Works in short steps for `seconds`, swallowing every Exception: a time limit must still stop it."""
    conn().set("started:" + tag, os.getpid())
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            time.sleep(0.01)
        except Exception:
            record("swallowed")
    record(tag)


def stamp(tag, seconds=0):
    """Records when it started (unix time, in the hash "stamps"), then sleeps `seconds`."""
    conn().hset("stamps", tag, time.time())
    time.sleep(seconds)


WAIT = 60
"""Seconds a task below waits for the other tasks it expects before it gives up and raises."""


def _until(condition, what):
    """Polls condition() every 10 ms until it is true; RuntimeError saying what, after WAIT seconds."""
    end = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > end:
            raise RuntimeError(f"{what} did not happen within {WAIT} s")
        time.sleep(0.01)


def meet(tag, n):
    """Counts itself in ("met"), waits until n tasks have, then records: only tasks running at once
    all meet (run one at a time, the first gives up and raises)."""
    conn().incr("met")
    _until(lambda: int(conn().get("met")) >= n, f"{tag}: meeting {n} tasks")
    record(tag)


async def async_meet(tag, n):
    """meet(tag, n) as a coroutine, waiting on the event loop."""
    conn().incr("met")
    end = time.monotonic() + WAIT
    while int(conn().get("met")) < n:
        if time.monotonic() > end:
            raise RuntimeError(f"{tag}: meeting {n} tasks did not happen within {WAIT} s")
        await asyncio.sleep(0.01)
    record(tag)


def stamp_until(tag, count):
    """Stamps itself as stamp does, then waits until the hash "stamps" holds count stamps, then
    records: the tasks that must start while this one runs."""
    stamp(tag)
    _until(lambda: conn().hlen("stamps") >= count, f"{tag}: {count} tasks starting")
    record(tag)


def fail_stamped(tag):
    """Appends when it ran (unix time) to the list "runs:TAG", then raises: how far apart retries ran."""
    conn().rpush("runs:" + tag, time.time())
    raise RuntimeError(f"{tag} fails")


def hold_gil(tag, n):
    """One long C call that never lets another thread of its process run: sum(range(n))."""
    conn().set("started:" + tag, os.getpid())
    sum(range(n))
    record(tag)


def returns_awaitable(tag):
    """A plain function whose work is the coroutine it returns."""
    return async_record(tag)


def add(a, b):
    """Returns a value: what a tracked task's record keeps."""
    return a + b


async def async_add(a, b):
    await asyncio.sleep(0)
    return a + b


def returns_unserialisable(tag):
    """Returns what msgpack cannot take: its record keeps the repr."""
    return {tag: object()}


def count_slowly(task_id, seconds):
    """count(task_id), then sleep: a drain slow enough to span a failover."""
    count(task_id)
    time.sleep(seconds)


def current_id():
    """The id and queue delayed.current() gives this task's call."""
    call = delayed.current()
    return [call.id, call.queue]


async def current_id_async():
    """current_id, from a coroutine."""
    call = delayed.current()
    return [call.id, call.queue]


def limited(tag, group, seconds=0.0):
    """Runs under a concurrency_limit of `group`: counts itself in "running" (and the count it saw in the
    list "peaks"), then waits until the `group` tasks of its turn (the n-th task to start is of turn n //
    group) have all started, sleeps `seconds`, counts itself out and records: every turn runs `group` at
    once, and never more (the peaks say how many ran at once)."""
    client = conn()
    client.rpush("peaks", client.incr("running"))
    turn = (client.incr("started") - 1) // group
    _until(lambda: int(client.get("started")) >= (turn + 1) * group, f"{tag}: its turn of {group} tasks")
    time.sleep(seconds)
    client.decr("running")
    record(tag)


def started_at(tag):
    """Records Redis's clock as it starts (unix seconds, in the hash "started_at"), and its tag."""
    client = conn()
    seconds, micros = client.time()
    client.hset("started_at", tag, seconds + micros / 1e6)
    record(tag)


def wait_for_key(tag, key):
    """Records that it started ("started:TAG"), then waits until the key exists, then records."""
    client = conn()
    client.set("started:" + tag, 1)
    _until(lambda: client.exists(key), f"{tag}: key {key}")
    record(tag)


async def async_until_cancelled(tag):
    """Marks itself started and awaits for WAIT seconds: a cancel's CancelledError is pushed to the list
    "cancelled"; it records in a finally, however it ends."""
    conn().set("started:" + tag, os.getpid())
    try:
        await asyncio.sleep(WAIT)
    except asyncio.CancelledError:
        conn().rpush("cancelled", tag)
        raise
    finally:
        record(tag)


def until_cancelled(tag):
    """Marks itself started, then loops until delayed.current().cancelled (RuntimeError after WAIT s),
    records, and returns tag: a result the cancelled task's record must not keep."""
    conn().set("started:" + tag, os.getpid())
    _until(lambda: delayed.current().cancelled, f"{tag}: a cancel")
    record(tag)
    return tag


def fail_once_cancelled(tag):
    """until_cancelled(tag), then raises: a failure a cancelled task's retries must not retry."""
    until_cancelled(tag)
    raise RuntimeError(f"{tag} fails once cancelled")


def watch_for_cancel(tag, seconds):
    """Marks itself started, then runs `seconds` or until delayed.current().cancelled, and records whether
    it saw the cancel."""
    conn().set("started:" + tag, os.getpid())
    end = time.monotonic() + seconds
    while time.monotonic() < end and not delayed.current().cancelled:
        time.sleep(0.01)
    record(tag, delayed.current().cancelled)


async def async_cancels_itself(tag):
    """Raises CancelledError of its own, without any cancel."""
    await asyncio.sleep(0)
    raise asyncio.CancelledError(tag)
