"""The public middleware (`delayed.Middleware`, delayed/wire/hooks.py) in the worker: where each of its
call hooks runs, among the worker's own steps (delayed.worker.middleware).

    before_call    BeforeCall, innermost of the worker's steps (after CallCheck and TimeLimit: the
                   task is allowed and its arguments fit), in the worker's main thread, in list order
    around_call    HookedInvoker: entered where the function runs (its slot thread, or its coroutine's
                   own task), the first middleware's outermost, with the Call already current()
    on_call_error  inside its own middleware's around_call, as the error leaves it (so last
                   middleware first); after a before_call that raised, in the main thread
    after_call     AfterCall, where the observe hook's step sat (outside Tracking and Retries, so
                   call.outcome is how the run was settled), in the main thread, last middleware first,
                   for every task the worker settles (one refused before its call too)

A before_call or an around_call that raises fails the run as the function raising would: it is
retried or dead-lettered as the task's options say (an around_call's error replaces the function's
outcome; one that suppresses the function's error makes the run succeed, returning None). An
on_call_error or after_call that raises is logged, and every other hook still runs.

Only the hooks a middleware overrides are kept, once: a worker whose middleware overrides none of
one kind pays nothing for it per task (no BeforeCall, AfterCall or HookedInvoker at all).
"""
import contextlib
import logging
from types import TracebackType
from typing import Any, Callable, ContextManager, Optional, Sequence, Tuple, Type

from ..wire.hooks import Call, checked, overridden, own, running, stopped
from ..wire.hooks import Middleware as Public
from ..wire.task import PyTask
from .cancels import Cancels
from .invoke import Invoker
from .middleware import Middleware
from .run import Run
from .time_limit import TimeLimitExceeded

logger = logging.getLogger("delayed.worker")

CallHook = Callable[[Call], None]
ErrorHook = Callable[[Call, BaseException], None]
Around = Callable[[Call], ContextManager[None]]
FAILURES = (Exception, TimeLimitExceeded)
"""What a call may fail with: a task's SystemExit or KeyboardInterrupt ends the worker instead."""


class CallHooks:
    """The call hooks a worker's middleware override, picked once.

    Args:
        middleware: `delayed.Middleware` instances, outermost first.

    Raises:
        TypeError: An item that is not a `delayed.Middleware`.
    """

    def __init__(self, middleware: Sequence[Public]) -> None:
        middleware = checked(middleware)
        self.before: Tuple[CallHook, ...] = tuple(overridden(middleware, "before_call"))
        self.errors: Tuple[ErrorHook, ...] = tuple(overridden(middleware, "on_call_error")[::-1])
        self.after: Tuple[CallHook, ...] = tuple(overridden(middleware, "after_call")[::-1])
        wrappers = ((own(item, "around_call"), own(item, "on_call_error")) for item in middleware)
        self.wrappers: Tuple[Tuple[Optional[Around], Optional[ErrorHook]], ...] = tuple(
            (around, on_error) for around, on_error in wrappers if around is not None or on_error is not None)

    def enter(self, stack: contextlib.ExitStack, call: Call) -> None:
        """Enter each middleware's around_call into stack, outermost first, each with its on_call_error
        inside it (told of what leaves the calls it wraps). An around_call that raises as it is entered
        fails the call: the on_call_error of its middleware and of those inside it, not entered, are
        told at once (last first), those outside it as the error leaves them."""
        for index, (around, on_error) in enumerate(self.wrappers):
            if around is not None:
                try:
                    stack.enter_context(around(call))
                except FAILURES as exc:
                    call.error = exc
                    for _, inner in reversed(self.wrappers[index:]):
                        if inner is not None:
                            _logged(inner, call, exc)
                    raise
            if on_error is not None:
                stack.push(_Telling(on_error, call))

    def failed(self, call: Call, error: BaseException) -> None:
        """Tell every on_call_error (last middleware first) that the run failed with error."""
        call.error = error
        for on_error in self.errors:
            _logged(on_error, call, error)


class _Telling:
    """An ExitStack callback: tells on_error of a failure that leaves the calls inside it."""

    __slots__ = ("on_error", "call")

    def __init__(self, on_error: ErrorHook, call: Call) -> None:
        self.on_error = on_error
        self.call = call

    def __call__(self, kind: Optional[Type[BaseException]], error: Optional[BaseException],
                 trace: Optional[TracebackType]) -> bool:
        if isinstance(error, FAILURES):
            self.call.error = error
            _logged(self.on_error, self.call, error)
        return False


def _logged(hook: Callable[..., None], *args: Any) -> None:
    """Call a hook that runs after the call; what it raises is logged, not raised."""
    try:
        hook(*args)
    except Exception:
        _log_raised(hook)


def _log_raised(hook: Callable[..., None]) -> None:
    """Log the exception a hook raised (being handled), with its traceback."""
    logger.exception("middleware hook %s raised; ignored", getattr(hook, "__qualname__", hook))


class BeforeCall(Middleware):
    """Runs the before_call hooks, in order; one that raises fails the run with its error (the function
    is not called, and every on_call_error is told)."""

    def __init__(self, hooks: CallHooks) -> None:
        self.hooks = hooks

    def before(self, run: Run) -> None:
        call = run.call
        assert call is not None
        for before in self.hooks.before:
            try:
                before(call)
            except Exception as exc:
                run.error = exc
                self.hooks.failed(call, exc)
                return


class AfterCall(Middleware):
    """Runs the after_call hooks, last middleware first, once the run is settled: call.outcome, result,
    error and seconds (so every run is timed) are the run's. A task refused before its call gets a Call
    too: one that did not decode as a PyTask (malformed, too large, a GoTask) carries only the func path
    it named ("" if none)."""

    times_runs = True

    def __init__(self, hooks: CallHooks) -> None:
        self.hooks = hooks

    def after(self, run: Run) -> None:
        settlement = run.settlement
        assert settlement is not None
        call = run.call
        if call is None:
            refusal = run.refusal
            assert refusal is not None
            call = run.call = Call(PyTask(refusal.func or "", options=refusal.options), run.queue.name, run.worker_id)
        call.result, call.error, call.seconds, call.outcome = run.result, run.error, run.seconds, settlement.outcome
        for after in self.hooks.after:
            try:  # (_logged's work, inline: this runs for every task)
                after(call)
            except Exception:
                _log_raised(after)


class HookedInvoker(Invoker):
    """An Invoker whose calls run inside the middleware's around_call hooks (and their on_call_error),
    entered where the function runs, with the Call current() there."""

    def __init__(self, threaded: bool, cancels: Cancels, hooks: CallHooks) -> None:
        super().__init__(threaded, cancels)
        self.hooks = hooks

    def invoke(self, run: Run) -> None:
        callee, call = run.callee, run.call
        assert callee is not None and call is not None
        if callee.coroutine:
            super().invoke(run)  # runs self.invoke_async on the loop: wrapped there, in its own task
            return
        current = running(call)
        passing = _Passing(run)
        try:
            with contextlib.ExitStack() as stack:
                self.hooks.enter(stack, call)
                super().invoke(run)
                passing.raise_again()
        except FAILURES as exc:
            passing.caught(exc)
        else:
            run.error = None  # none, or an around_call suppressed it
        finally:
            stopped(current)

    async def invoke_async(self, run: Run) -> None:
        call = run.call
        assert call is not None
        running(call)  # in this coroutine's task's own context: no reset needed
        passing = _Passing(run)
        try:
            with contextlib.ExitStack() as stack:
                self.hooks.enter(stack, call)
                await super().invoke_async(run)
                passing.raise_again()
        except FAILURES as exc:
            passing.caught(exc)
        else:
            run.error = None


class _Passing:
    """The error a call ended with (the Invoker keeps it in run.error), raised again through the
    around_call hooks so that they see it leave, as they would leave a call they wrap directly; its
    traceback is put back as the call left it, without the frames it passed through again."""

    __slots__ = ("run", "error", "trace")

    def __init__(self, run: Run) -> None:
        self.run = run
        self.error: Optional[BaseException] = None
        self.trace: Optional[TracebackType] = None

    def raise_again(self) -> None:
        error = self.run.error
        if error is not None:
            self.error, self.trace = error, error.__traceback__
            raise error

    def caught(self, error: BaseException) -> None:
        """What left the hooks: the call's own error, or an around_call's, which the run fails with."""
        if error is self.error:
            error.__traceback__ = self.trace
        else:
            self.run.error = error
