"""The `delayed(queue)` decorator of keakon/delayed 1.x: `f.delay(*args, **kwargs)` enqueues a call of f."""
import functools
from typing import Any, Callable, Optional

from .queue import Queue
from .task import PyTask


def delayed(queue: Queue) -> Callable[..., Any]:
    """Returns a decorator, usable bare (`@d`) or with options (`@d(retry=3)`).

    The decorated function is returned unchanged, with a `delay` method added;
    calling the function still runs it here and now.
    """

    def decorate(func: Optional[Callable[..., Any]] = None, *, retry: int = 0) -> Any:
        if func is None:
            return functools.partial(decorate, retry=retry)

        def delay(*args: Any, **kwargs: Any) -> None:
            queue.enqueue(PyTask(func, args, kwargs, retry))

        func.delay = functools.wraps(func)(delay)  # type: ignore[attr-defined]
        return func

    return decorate
