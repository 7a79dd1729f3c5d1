"""How a worker calls a task's function (Invoker.invoke), and the one event loop its coroutines run on.

invoke() runs every kind of task function: a plain function, a coroutine function, a plain function
that returns an awaitable; in the worker's main thread (one slot) or in a slot thread (threads > 1);
with a time limit or without. One event-loop policy: every coroutine a task makes runs on the worker's
one EventLoop, within the task's time limit (asyncio cancels it there and waits until it has stopped).
With one slot, the thread that waits for the coroutine runs the loop meanwhile; with threads, a thread
of its own runs it: coroutine functions run side by side on it (Slots starts each with invoke_async(),
the half of invoke() that runs on the loop), and a slot thread whose plain function returned an
awaitable waits for it there.

A plain call's time limit is SIGALRM in the main thread (delayed.worker.time_limit.call); in a slot
thread, Slots injects TimeLimitExceeded into the thread. One that lands once the call has returned,
in invoke's own frame rather than inside the call, does not count: a finished task is never timed out.

The call runs with its Run's Call as `delayed.current()`: set in the thread that calls a plain function
(and reset after), and in the task of a coroutine function (whose context is its own).

A tracked task's call can be cancelled while it runs (delayed.worker.cancels): it is not made if its
cancel came first; a coroutine gets CancelledError, which ends its call as a cancellation (run.error
stays None: the call's `cancelled` says it); a plain function sees `delayed.current().cancelled`. A
CancelledError a coroutine raises without a cancel is no cancellation: a failure, as any exception.
"""
import asyncio
import inspect
import logging
import threading
import time
from typing import Any, Coroutine, Optional

from ..wire.hooks import running, stopped
from .cancels import Cancels
from .run import Run
from .time_limit import TimeLimitExceeded, can_enforce, exceeded, within
from .time_limit import call as call_limited

logger = logging.getLogger("delayed.worker")


class EventLoop:
    """The worker's one event loop, made on first use. threaded: a thread of its own runs it (a worker
    with threads > 1); else run() runs it in the calling thread until the coroutine is done."""

    def __init__(self, threaded: bool) -> None:
        self.threaded = threaded
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._making = threading.Lock()  # slot threads and the main thread may all want it first

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            with self._making:
                if self._loop is None:
                    self._loop = asyncio.new_event_loop()
                    if self.threaded:
                        self._thread = threading.Thread(target=self._loop.run_forever, name="delayed event loop",
                                                        daemon=True)
                        self._thread.start()
                loop = self._loop
        return loop

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """The coroutine's result, run on the loop (from any thread but the loop's own)."""
        if self.threaded:
            return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()
        return self.loop.run_until_complete(coroutine)

    def close(self) -> None:
        """Stop the loop (its thread too) and close it; the next use makes a new one."""
        with self._making:
            loop, self._loop = self._loop, None
        if loop is None:
            return
        if self._thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(5)
            self._thread = None
        loop.close()


class Invoker:
    """Calls tasks' functions (see the module's docstring). threaded: plain calls run in slot threads,
    whose time limits Slots enforces; else SIGALRM does, in the main thread only (elsewhere the limit
    is not enforced, and the log says so once). cancels: the tracked calls a cancel can reach."""

    def __init__(self, threaded: bool, cancels: Cancels) -> None:
        self.threaded = threaded
        self.loop = EventLoop(threaded)
        self.cancels = cancels
        self._warned = False

    def invoke(self, run: Run) -> None:
        """Call run's function with its task's arguments, within run.limit: sets run.result, or run.error to
        what it raised; if run.timed, run.started and run.seconds. Raises only what a task may end
        the worker with (a BaseException other than TimeLimitExceeded: SystemExit, KeyboardInterrupt)."""
        callee, task = run.callee, run.task
        assert callee is not None and task is not None
        if callee.coroutine:
            self.loop.run(self.invoke_async(run))
            return
        limit = run.limit
        call = run.call
        assert call is not None
        task_id = task.options.id
        if task_id is not None and not self.cancels.starting(task_id, run):
            return  # cancelled before it started
        current = running(call)
        if run.timed:
            run.started = time.monotonic()
        try:
            if limit and self._alarms():
                result = call_limited(limit, callee.func, task.args, task.kwargs)
            else:
                result = callee.func(*task.args, **task.kwargs)
            if result is not None and inspect.isawaitable(result):  # a plain function that returned one
                result = self.loop.run(within(result, limit))
            run.result = result
        except TimeLimitExceeded as exc:
            if exc.__traceback__ is not None and exc.__traceback__.tb_next is not None:  # not in this frame
                run.error = exc if exc.args or not limit else exceeded(limit).with_traceback(exc.__traceback__)
        except Exception as exc:
            run.error = exc
        finally:
            stopped(current)
            if task_id is not None:
                self.cancels.stopped(task_id)
        if run.timed:
            run.seconds = time.monotonic() - run.started

    async def invoke_async(self, run: Run) -> None:
        """invoke() of a coroutine function, on the loop."""
        callee, task, call = run.callee, run.task, run.call
        assert callee is not None and task is not None and call is not None
        task_id = task.options.id
        this = asyncio.current_task()
        if task_id is not None and not self.cancels.starting(task_id, run, this):
            return  # cancelled before it started
        running(call)  # in this coroutine's task's own context: no reset needed
        if run.timed:
            run.started = time.monotonic()
        try:
            run.result = await within(callee.func(*task.args, **task.kwargs), run.limit)
        except (Exception, TimeLimitExceeded) as exc:
            run.error = exc
        except asyncio.CancelledError as exc:
            if not call.cancelled:  # the function's own: a failure as any exception is (no cancel was made)
                run.error = exc
            elif this is not None and hasattr(this, "uncancel"):  # Python 3.11+: the task goes on, not cancelling
                this.uncancel()
        finally:
            if task_id is not None:
                self.cancels.stopped(task_id)
        if run.timed:
            run.seconds = time.monotonic() - run.started

    def _alarms(self) -> bool:
        """Whether SIGALRM limits this plain call: in the main thread; in a slot thread Slots does."""
        if can_enforce():
            return True
        if not self.threaded and not self._warned:
            logger.warning("time limits of plain functions are not enforced: the worker does not run in the main thread")
            self._warned = True
        return False
