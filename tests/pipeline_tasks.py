"""Task functions for the worker's pipeline tests (tests/test_invoke.py): a decorated function, whose
wrapper frame stands between the worker and the function, and functions that say which event loop ran them."""
import asyncio
import functools

from .tasks import conn, record


def _counted(func):
    """A decorator as users write them: its wrapper counts its calls, then calls func."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        conn().incr("wrapper calls")
        return func(*args, **kwargs)
    return wrapper


@_counted
def wrapped(tag, size):
    """Records tag; a size that is not a sized thing raises TypeError in here (len), not in its call."""
    record(tag, len(size))


async def loop_of(tag):
    """Records the event loop it runs on."""
    record(tag, id(asyncio.get_running_loop()))


def returns_loop_of(tag):
    """A plain function whose work is the coroutine it returns: loop_of."""
    return loop_of(tag)
