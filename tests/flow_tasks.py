"""Task functions of the workflow tests: each returns a value a later step can take, and the ones that
take values record what they received, in the Redis of DELAYED_TEST_REDIS_URL (see tests/tasks.py)."""
import time

import msgpack

from delayed import StepFailed

from .tasks import WAIT, conn


def plain(value):
    """Returns value: a step's own result."""
    return value


def noop(value):
    """Returns value and writes nothing: the members of the big group, as cheap as a task can be."""
    return value


def _as_data(value):
    """value with each StepFailed (not msgpack) as ["StepFailed", id, func, status, error]."""
    if isinstance(value, StepFailed):
        return ["StepFailed", value.id, value.func, value.status, value.error]
    if isinstance(value, (list, tuple)):
        return [_as_data(item) for item in value]
    return value


def got(tag, *args):
    """Records the arguments it got (after tag) in the list "got:TAG", each call as one msgpack array
    (see received), and returns them: what a step took from the steps before it."""
    args = _as_data(list(args))
    conn().rpush("got:" + tag, msgpack.packb(args))
    return args


def received(client, tag):
    """What got(tag, ...) received, call by call."""
    return [msgpack.unpackb(call) for call in client.lrange("got:" + tag, 0, -1)]


def boom(tag, *args):
    """Raises every time (its calls counted under "boom:TAG")."""
    conn().incr("boom:" + tag)
    raise ValueError(f"{tag} fails")


def flaky(tag, value):
    """Raises the first time it runs, returns value after: a step whose dead letter is requeued."""
    if conn().incr("flaky:" + tag) == 1:
        raise ValueError(f"{tag} fails once")
    return value


def gate(tag, value):
    """Marks "started:TAG", waits until the key "open:TAG" exists, then returns value: a step the test
    holds running."""
    conn().set("started:" + tag, 1)
    end = time.monotonic() + WAIT
    while not conn().exists("open:" + tag):
        if time.monotonic() > end:
            raise RuntimeError(f"{tag}: not opened within {WAIT} s")
        time.sleep(0.01)
    return value
