"""Middleware: the public hooks around a task's enqueue (producer side) and around its call (worker side),
and `current()`, the task the calling code runs for.

One `Middleware` object may act on both sides (a tracing integration starts a span as a task goes in and
another as it runs). Give a list of them to `Queue(..., middleware=[...])` / `AsyncQueue` and to
`Worker(..., middleware=[...])`. With middleware `[A, B]`, each side runs them as an onion:

    A.before   B.before   (A.around (B.around (the enqueue or the call)))   B.after   A.after

- `before_*` hooks run in list order, `after_*` and `on_*_error` hooks in reverse order;
- `around_*` returns a context manager; the first one's is the outermost; on the worker side they are
  entered where the function runs (its thread, or its coroutine's task), so a context variable or a
  thread-local set there (a tracing span, an error tracker's scope) is the call's own;
- `on_*_error` runs (before `after_*`) when the enqueue or the call raised; `after_*` runs in any case.

A producer hook that raises makes the enqueue raise (a `before_enqueue` that raises writes nothing). A
worker hook that raises before or around the call fails the run as the function raising would (retried
or dead-lettered as the task's options say: never lost); one that raises after it is logged. A hook a
middleware does not override costs nothing per task.

These are plain classes of no dependency: the worker and the producer fill them in, ops and integrations
(OpenTelemetry, Sentry: delayed.integrations) subclass `Middleware`.
"""
import contextlib
import contextvars
from typing import Any, ContextManager, Dict, List, Mapping, Optional, Sequence, Tuple

from .task import Task

_NO_HEADERS: Mapping[str, str] = {}


class Enqueuing:
    """A task on its way into a queue, as producer middleware sees it.

    Attributes:
        task: The task to write; a `before_enqueue` may replace it (`task.with_options(headers=...)`).
        queue: The queue's name.
        handle: After the enqueue, a tracked task's handle (None: untracked, or before the enqueue).
        error: After an enqueue that raised, what it raised.
        state: A middleware's own notes between its hooks, by any key it picks (its class, say).
    """

    __slots__ = ("task", "queue", "handle", "error", "state")

    def __init__(self, task: Task, queue: str) -> None:
        self.task = task
        self.queue = queue
        self.handle: Any = None
        self.error: Optional[BaseException] = None
        self.state: Dict[Any, Any] = {}


class Call:
    """A task a worker runs, as worker middleware and the task itself (`delayed.current()`) see it.

    Attributes:
        task: The decoded task (a PyTask in Python's worker).
        queue: The queue's name.
        worker_id: The id the worker holds the task under.
        result: After a call that returned, what it returned.
        error: After a call that raised, what it raised.
        seconds: After the call, how long the function ran (0.0 if it was not called).
        outcome: After the call, how the worker settled it: "done", "retried", "failed", "dead",
            "cancelled" or "held" (its limits held it back before its call: it runs later) (None before).
        state: A middleware's own notes between its hooks.
    """

    __slots__ = ("task", "queue", "worker_id", "result", "error", "seconds", "outcome", "state", "_cancelled")

    def __init__(self, task: Task, queue: str, worker_id: str) -> None:
        self.task = task
        self.queue = queue
        self.worker_id = worker_id
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.seconds = 0.0
        self.outcome: Optional[str] = None
        self.state: Dict[Any, Any] = {}
        self._cancelled = False

    @property
    def id(self) -> Optional[str]:
        """The task's id if it is tracked, else None."""
        return self.task.options.id

    @property
    def func_path(self) -> str:
        """The function the task names ("module:func", or a Go function's name)."""
        return self.task.func_path

    @property
    def attempt(self) -> int:
        """Runs of this task that failed before this one (with max_retries), 0 on its first run."""
        return self.task.options.attempt

    @property
    def headers(self) -> Mapping[str, str]:
        """The strings its producer sent with it (the `headers` option): tracing's traceparent."""
        return self.task.options.headers or _NO_HEADERS

    @property
    def cancelled(self) -> bool:
        """True once someone asked to cancel this running task (`handle.cancel()`, `delayed cancel ID`):
        a function running in a thread reads it and returns early; whatever it returns, the task ends
        `cancelled` and its result is not kept."""
        return self._cancelled

    def cancel(self) -> None:
        """Mark the call cancelled (the worker does this when a cancel reaches it)."""
        self._cancelled = True


class Middleware:
    """Hooks around a task's enqueue and its call; override those you need, in any subclass.

    See the module's docstring for their order. Each hook gets the one `Enqueuing` or `Call` of that
    task, whose `state` carries a middleware's notes from one hook to the next.
    """

    def before_enqueue(self, enqueuing: Enqueuing) -> None:
        """Before the task is written: may replace `enqueuing.task`."""

    def around_enqueue(self, enqueuing: Enqueuing) -> ContextManager[None]:
        """A context manager the enqueue runs in."""
        return contextlib.nullcontext()

    def on_enqueue_error(self, enqueuing: Enqueuing, error: BaseException) -> None:
        """The enqueue raised error (it is raised on to the caller after the hooks)."""

    def after_enqueue(self, enqueuing: Enqueuing) -> None:
        """After the enqueue, written or not (`enqueuing.error`)."""

    def before_call(self, call: Call) -> None:
        """In the worker, before the function is called (the task decoded, allowed, its arguments fit)."""

    def around_call(self, call: Call) -> ContextManager[None]:
        """A context manager the call runs in, entered where the function runs."""
        return contextlib.nullcontext()

    def on_call_error(self, call: Call, error: BaseException) -> None:
        """The function raised error (the worker retries or dead-letters the task as its options say)."""

    def after_call(self, call: Call) -> None:
        """After the call and its settlement (`call.outcome`), whatever happened."""


def checked(middleware: Sequence[Middleware]) -> Tuple[Middleware, ...]:
    """The middleware a Queue or a Worker was given, as a tuple; TypeError for an item that is no
    Middleware instance (a class given instead of one, say)."""
    for item in middleware:
        if not isinstance(item, Middleware):
            raise TypeError(f"middleware must be delayed.Middleware instances, not {type(item).__name__}: "
                            "subclass delayed.Middleware and give an instance")
    return tuple(middleware)


def own(item: Middleware, name: str) -> Any:
    """item's hook called name, bound, if its class overrides it; else None (the hook would do nothing,
    so a producer or a worker skips it: a hook not overridden costs nothing per task)."""
    return getattr(item, name) if getattr(type(item), name) is not getattr(Middleware, name) else None


def overridden(middleware: Sequence[Middleware], name: str) -> List[Any]:
    """The hooks called name that these middleware override (bound), in their order."""
    return [hook for hook in (own(item, name) for item in middleware) if hook is not None]


_CURRENT: "contextvars.ContextVar[Call]" = contextvars.ContextVar("delayed_current_call")


def current() -> Call:
    """The task the calling code runs for, in a worker's call (its thread, or its coroutine's task).

    Raises:
        LookupError: Called outside a task's call.

    Example:
        ```python
        import delayed

        def export(rows):
            for row in rows:
                if delayed.current().cancelled:
                    return  # someone cancelled the task: stop early
                ...
        ```
    """
    try:
        return _CURRENT.get()
    except LookupError:
        raise LookupError("delayed.current() is only known inside a task's call, in a worker") from None


def running(call: Call) -> "contextvars.Token[Call]":
    """Make call the current one, where the function runs (the worker calls this; reset with the token)."""
    return _CURRENT.set(call)


def stopped(token: "contextvars.Token[Call]") -> None:
    """Undo `running`."""
    _CURRENT.reset(token)
