"""Task functions for `make demo`: each appends a line to the list `demo:log`."""
from delayed import connect

_conn = connect()  # the Redis $DELAYED_REDIS_URL names, as the worker's


def log(line):
    _conn.rpush("demo:log", line)


def add(a, b):
    log(f"add({a}, {b}) = {a + b}")


def greet(name, greeting="Hello"):
    log(f"{greeting}, {name}!")


def flaky(key):
    """Fails on its first two calls, then succeeds: shows retry."""
    calls = _conn.incr(key)
    if calls < 3:
        raise RuntimeError(f"flaky call {calls} fails")
    log(f"flaky succeeded on call {calls}")
