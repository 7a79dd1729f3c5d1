"""The `delayed(queue)` decorator of keakon/delayed 1.x: `f.delay(*args, **kwargs)` enqueues a call of f.

On an AsyncQueue, `f.delay` is a coroutine function: `await f.delay(1, 2)`. With result_ttl
(`@d(result_ttl=3600)`), `f.delay` tracks each call and returns its handle (delayed.wire.tracking).
"""
from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Optional, TypeVar, Union, cast, overload

from .protocol.handles import AsyncTaskHandle, TaskHandle
from .protocol.queue import AsyncQueue, Queue
from .wire.options import make
from .wire.task import PyTask

if TYPE_CHECKING:
    from typing_extensions import ParamSpec, Protocol

    P = ParamSpec("P")
    R = TypeVar("R")
    R_co = TypeVar("R_co", covariant=True)

    class DelayedFunction(Protocol[P, R_co]):
        """The decorated function: called, it runs here and now; `.delay()` enqueues the call."""

        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

        def delay(self, *args: P.args, **kwargs: P.kwargs) -> None: ...

    class TrackedFunction(Protocol[P, R_co]):
        """The decorated function with result_ttl: `.delay()` enqueues the call and returns its handle."""

        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

        def delay(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle: ...

    class AsyncTrackedFunction(Protocol[P, R_co]):
        """The same on an AsyncQueue: `await f.delay(...)` returns the handle."""

        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

        def delay(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, AsyncTaskHandle]: ...

    class AsyncDelayedFunction(Protocol[P, R_co]):
        """The same on an AsyncQueue: `await f.delay(...)` enqueues the call."""

        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

        def delay(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, None]: ...

    class Decorator(Protocol):
        @overload
        def __call__(self, func: Callable[P, R], *, retry: int = 0, **options: Any) -> DelayedFunction[P, R]: ...

        @overload
        def __call__(self, func: None = None, *, retry: int = 0, result_ttl: float,
                     **options: Any) -> Callable[[Callable[P, R]], TrackedFunction[P, R]]: ...

        @overload
        def __call__(self, func: None = None, *, retry: int = 0,
                     **options: Any) -> Callable[[Callable[P, R]], DelayedFunction[P, R]]: ...

    class AsyncDecorator(Protocol):
        @overload
        def __call__(self, func: Callable[P, R], *, retry: int = 0, **options: Any) -> AsyncDelayedFunction[P, R]: ...

        @overload
        def __call__(
            self, func: None = None, *, retry: int = 0, result_ttl: float, **options: Any
        ) -> Callable[[Callable[P, R]], AsyncTrackedFunction[P, R]]: ...

        @overload
        def __call__(
            self, func: None = None, *, retry: int = 0, **options: Any
        ) -> Callable[[Callable[P, R]], AsyncDelayedFunction[P, R]]: ...


@overload
def delayed(queue: AsyncQueue) -> AsyncDecorator: ...


@overload
def delayed(queue: Queue) -> Decorator: ...


def delayed(queue: Union[Queue, AsyncQueue]) -> Union[Decorator, AsyncDecorator]:
    """Make a decorator that gives a function a `.delay()` that enqueues a call of it (keakon/delayed 1.x's API).

    The decorator is used bare (`@d`) or with options (`@d(retry=3)`, `@d(result_ttl=3600)`). It
    returns the function itself, with a `delay` attribute added: calling the function still runs it
    here and now. On a Queue, `f.delay(*args, **kwargs)` enqueues the call as a PyTask; on an
    AsyncQueue (any queue whose `enqueue` is a coroutine function), `f.delay` is a coroutine function:
    `await f.delay(*args, **kwargs)`.

    `.delay` is typed with the function's own parameters. It is stored on the function, so decorating
    one function for two queues keeps the last. The function must be defined at the top level of an
    importable module, where a worker can find it: `.delay()` raises `ValueError` otherwise.

    Args:
        queue: The queue the calls go to: a `Queue` or an `AsyncQueue`.

    Returns:
        The decorator. It takes every option `TaskOptions` takes, by name (`@d(retry=3)`,
            `@d(max_retries=5, time_limit=30)`, `@d(unique_for=60)`), checked as it decorates: each call
            is enqueued with them. With `result_ttl`, which tracks each call, `f.delay(...)` returns its
            `TaskHandle` (an `AsyncTaskHandle` on an AsyncQueue), typed as such; without it, None.

    Raises:
        ValueError: An option's value it cannot take, naming the option (as the decorator is applied).
        TypeError: An unknown option.

    Example:
        ```python title="tasks.py"
        from delayed import Queue, connect, delayed

        task = delayed(Queue("default", connect()))

        @task(retry=3)
        def add(a, b):
            return a + b
        ```

        ```python
        from tasks import add

        add.delay(1, 2)  # enqueues add(1, 2) for a worker
        ```
    """
    asynchronous = inspect.iscoroutinefunction(queue.enqueue)

    def decorate(func: Optional[Callable[..., Any]] = None, **given: Any) -> Any:
        options = make(**given)
        if func is None:
            return functools.partial(decorate, **given)
        task_func = func

        if asynchronous:
            async_queue = cast(AsyncQueue, queue)

            async def delay_async(*args: Any, **kwargs: Any) -> Optional[AsyncTaskHandle]:
                return await async_queue.enqueue(PyTask(task_func, args, kwargs, options=options))

            delay: Callable[..., Any] = delay_async
        else:
            def delay_sync(*args: Any, **kwargs: Any) -> Optional[TaskHandle]:
                return cast(Queue, queue).enqueue(PyTask(task_func, args, kwargs, options=options))

            delay = delay_sync

        func.delay = functools.wraps(func)(delay)  # type: ignore[attr-defined]
        return func

    return decorate
