"""The public middleware (`delayed.Middleware`, delayed/wire/hooks.py) in the producer: its enqueue hooks
around what Queue and AsyncQueue write (`enqueue`, `enqueue_many`, a workflow's steps, `f.delay()`).

Each task gets its own `Enqueuing`, with the options given to enqueue already in its task, and with
middleware [A, B]:

    before_enqueue    each task in turn: A's, then B's (one may replace enqueuing.task); one that raises
                      makes the enqueue raise, and nothing is written (each on_enqueue_error and
                      after_enqueue is still told)
    around_enqueue    entered for every task (A's for each task, then B's for each) around the one write
                      of them all (a batch and a workflow are one atomic write), and its replication wait
    on_enqueue_error  inside its own middleware's around_enqueue, as the write's error leaves it (B's
                      first); told at once of an error raised before its around_enqueue was entered (a
                      before_enqueue's, an around_enqueue's); one that raises is logged: the enqueue
                      raises the error it was told of
    after_enqueue     once the write is over, B's then A's, each task with its handle (a tracked task's,
                      a workflow step's; None untracked) or its error; every one runs, and the enqueue
                      then raises the write's error, else the first error an after_enqueue raised (the
                      tasks are written)

A producer whose middleware override none of these hooks runs none of this (Producer._plan_enqueue).
"""
import contextlib
import logging
from types import TracebackType
from typing import Any, Callable, List, Optional, Sequence, Tuple, Type, TypeVar

from ..wire.hooks import Enqueuing, Middleware, checked, overridden, own
from ..wire.task import Task
from .calls import Plan

T = TypeVar("T")
ErrorHook = Callable[[Enqueuing, BaseException], None]
logger = logging.getLogger("delayed.producer")


class EnqueueHooks:
    """The enqueue hooks a producer's middleware override, picked once (of(): None for none)."""

    def __init__(self, middleware: Sequence[Middleware]) -> None:
        self.before = overridden(middleware, "before_enqueue")
        self.after = overridden(middleware, "after_enqueue")[::-1]
        wrappers = ((own(item, "around_enqueue"), own(item, "on_enqueue_error")) for item in middleware)
        self.wrappers = [(around, on_error) for around, on_error in wrappers
                         if around is not None or on_error is not None]

    @classmethod
    def of(cls, middleware: Sequence[Middleware]) -> "Optional[EnqueueHooks]":
        """The hooks of middleware (TypeError for an item that is no Middleware), None if none has any."""
        hooks = cls(checked(middleware))
        return hooks if hooks.before or hooks.after or hooks.wrappers else None

    def run(self, enqueuings: Sequence[Enqueuing], write: Callable[[List[Task]], Plan[T]],
            handles: Callable[[T], Sequence[Any]]) -> Plan[T]:
        """The enqueue of these tasks through the hooks: before_enqueue, then write (the plan that writes
        the tasks as the hooks left them) inside every task's around_enqueue, then each task's
        after_enqueue, told its handle (handles: of write's result, one per task) or the error."""
        error: Optional[Exception] = None
        layers = [(around, on_error, enqueuing) for around, on_error in self.wrappers for enqueuing in enqueuings]
        try:
            for enqueuing in enqueuings:
                for before in self.before:
                    before(enqueuing)
        except Exception as exc:  # nothing is written: each on_enqueue_error is told
            error = exc
            _tell(layers, exc)
        else:
            try:
                with contextlib.ExitStack() as stack:
                    for index, (around, on_error, enqueuing) in enumerate(layers):
                        if around is not None:
                            try:
                                stack.enter_context(around(enqueuing))
                            except Exception as exc:  # told now: this one's, and those inside it
                                _tell(layers[index:], exc)
                                raise
                        if on_error is not None:
                            stack.push(_Telling(on_error, enqueuing))
                    result = yield from write([enqueuing.task for enqueuing in enqueuings])
            except Exception as exc:
                error = exc
            else:
                for enqueuing, handle in zip(enqueuings, handles(result)):
                    enqueuing.handle = handle
        for enqueuing in enqueuings:
            enqueuing.error = error
        raised: List[Exception] = []
        for after in self.after:
            for enqueuing in enqueuings:
                try:
                    after(enqueuing)
                except Exception as exc:
                    raised.append(exc)
        if error is not None:
            raise error
        if raised:
            raise raised[0]
        return result


def _tell(layers: Sequence[Tuple[Any, Optional[ErrorHook], Enqueuing]], error: Exception) -> None:
    """Tell the on_enqueue_error of these layers (around, on_error, enqueuing), innermost first, of error
    (one raised before they were entered)."""
    for _, on_error, enqueuing in reversed(layers):
        if on_error is not None:
            _Telling(on_error, enqueuing)(type(error), error, error.__traceback__)


class _Telling:
    """An ExitStack callback: tells on_error of an error that leaves the enqueue inside it."""

    __slots__ = ("on_error", "enqueuing")

    def __init__(self, on_error: ErrorHook, enqueuing: Enqueuing) -> None:
        self.on_error = on_error
        self.enqueuing = enqueuing

    def __call__(self, kind: Optional[Type[BaseException]], error: Optional[BaseException],
                 trace: Optional[TracebackType]) -> bool:
        if isinstance(error, Exception):
            self.enqueuing.error = error
            try:
                self.on_error(self.enqueuing, error)
            except Exception:
                logger.exception("middleware hook %s raised; the enqueue raises its own error",
                                 getattr(self.on_error, "__qualname__", self.on_error))
        return False
