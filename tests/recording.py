"""Middleware the tests give workers and producers, in this process or by `--middleware` on a command
line: each records the hooks it is called in, in order."""
import contextlib
import threading
from typing import Any, Iterator, List, Optional

import delayed
from delayed import Call, Enqueuing, Middleware

from .tasks import conn

HOOKS = "hooks"
"""The Redis list a command line's recorder (recorded_in_redis) appends to."""


class Recorder(Middleware):
    """Records "NAME.hook" for each hook, with what it saw: into `into`, or the Redis list HOOKS.

    raises: the hook names ("before_call", "around_call", "around_call.exit", ...) that raise
    RuntimeError(f"{name}.{hook}") instead of doing their work."""

    def __init__(self, name: str, into: Optional[List[Any]] = None, raises: Any = ()) -> None:
        self.name = name
        self.into = into
        self.raises = set(raises)

    def record(self, hook: str, *seen: Any) -> None:
        entry = f"{self.name}.{hook}" + "".join(f" {item}" for item in seen)
        if self.into is None:
            conn().rpush(HOOKS, entry)
        else:
            self.into.append(entry)
        if hook in self.raises:
            raise RuntimeError(f"{self.name}.{hook}")

    def before_enqueue(self, enqueuing: Enqueuing) -> None:
        self.record("before_enqueue", enqueuing.task.func_path)

    @contextlib.contextmanager
    def around_enqueue(self, enqueuing: Enqueuing) -> Iterator[None]:
        self.record("around_enqueue", enqueuing.task.func_path)
        try:
            yield
        except Exception as exc:
            self.record("around_enqueue.exit", type(exc).__name__)
            raise
        self.record("around_enqueue.exit")

    def on_enqueue_error(self, enqueuing: Enqueuing, error: BaseException) -> None:
        self.record("on_enqueue_error", type(error).__name__, enqueuing.error is error)

    def after_enqueue(self, enqueuing: Enqueuing) -> None:
        handle = enqueuing.handle
        self.record("after_enqueue", enqueuing.task.func_path, None if handle is None else handle.id,
                    None if enqueuing.error is None else type(enqueuing.error).__name__)

    def before_call(self, call: Call) -> None:
        self.record("before_call", call.func_path)

    @contextlib.contextmanager
    def around_call(self, call: Call) -> Iterator[None]:
        where = "current" if delayed.current() is call else "not-current"
        self.record("around_call", call.func_path, where)
        try:
            yield
        except BaseException as exc:
            self.record("around_call.exit", type(exc).__name__)
            raise
        self.record("around_call.exit")

    def on_call_error(self, call: Call, error: BaseException) -> None:
        self.record("on_call_error", type(error).__name__, call.error is error)

    def after_call(self, call: Call) -> None:
        self.record("after_call", call.func_path, call.outcome,
                    None if call.error is None else type(call.error).__name__)


class Headers(Middleware):
    """Adds the header "x-from" (its value: "producer") to each task enqueued, keeping the task's own."""

    def before_enqueue(self, enqueuing: Enqueuing) -> None:
        headers = dict(enqueuing.task.options.headers or {})
        headers["x-from"] = "producer"
        enqueuing.task = enqueuing.task.with_options(headers=headers)


class SeenHeaders(Middleware):
    """Records each call's headers into the Redis list HOOKS, as "headers KEY=VALUE,...", sorted."""

    def before_call(self, call: Call) -> None:
        conn().rpush(HOOKS, "headers " + ",".join(f"{key}={value}" for key, value in sorted(call.headers.items())))


class Threads(Middleware):
    """Records the name of the thread each hook of a call runs in."""

    def __init__(self, into: List[Any]) -> None:
        self.into = into

    def before_call(self, call: Call) -> None:
        self.into.append(("before_call", threading.current_thread().name))

    def around_call(self, call: Call) -> Any:
        self.into.append(("around_call", threading.current_thread().name))
        return contextlib.nullcontext()

    def after_call(self, call: Call) -> None:
        self.into.append(("after_call", threading.current_thread().name))


seen_headers = SeenHeaders()
"""An instance for a command line (`--middleware tests.recording:seen_headers`)."""


def recorded_in_redis() -> Recorder:
    """A command line's recorder (a factory: `--middleware tests.recording:recorded_in_redis`)."""
    return Recorder("cli")


def recorded() -> List[str]:
    """What command lines' recorders appended to HOOKS."""
    return [item.decode() for item in conn().lrange(HOOKS, 0, -1)]


not_middleware = object()
"""What `--middleware tests.recording:not_middleware` names: no Middleware, and no factory of one."""
