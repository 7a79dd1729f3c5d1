"""Middleware: the worker's features, each one object with hook points around a task's call, and the
Pipeline that runs a claimed task through them.

A Pipeline decodes the claimed blob into its task (a blob that is not a PyTask it can run is refused:
too large, malformed, a GoTask), then calls each middleware's before() in order, then the call
(delayed.worker.invoke), then each after() in reverse order. A before() may refuse the task, hold it
back (run.hold), or fail it (run.error): then the later ones and the call are skipped, and every
after() still runs. The worker
installs, outermost first (Worker._middleware):

    TaskLog    after: one line per task (only with log_tasks)
    AfterCall  after: the user's middleware's after_call hooks, the observe hook's among them (only
               with middleware that override it: delayed.worker.hooks)
    Tracking   after: add what a tracked task's record gets (its run timed) to its settlement
    Retries    after: settle the run with decide() (delayed.worker.decide); log a failure
    Expiry     before: refuse a task whose expires_at passed (expired): never called, whatever it names
    CallCheck  before: find the function in the allowlist (else not_allowed), and refuse arguments its
               signature does not take (bad_arguments: it is not called)
    TimeLimit  before: the time limit of the call (the task's own, or the worker's)
    Limits     before: admit a task with limits (rate_limit, concurrency_limit) in Redis, or hold it
               back (run.hold: it is not called, and runs later); before the user's hooks, which see
               only the tasks that are called
    BeforeCall before: the user's middleware's before_call hooks (only with middleware that override it)

so the outer ones see how every run was settled. Nothing is built per task: the Pipeline keeps the
hooks each middleware overrides, once, and a task without options skips those of the middleware that
act only on options (Tracking, Expiry, Limits; TimeLimit when the worker has no time limit of its own).
"""
from typing import Callable, Sequence, Tuple

from ..errors import MalformedTaskError
from ..wire.dead_letter import Reason
from ..wire.hooks import Call
from ..wire.options import NO_OPTIONS
from ..wire.task import PyTask, decode_task
from .holding import Settlement
from .run import Run

Hook = Callable[[Run], None]


class Middleware:
    """One feature of the worker around a task's call; override the hooks it needs (those left as they
    are cost nothing per task). Hooks run in the worker's main thread; the call may run in another.

    options_only: it acts only on the options a task carries (PyTask.options), so a task without any
    skips its hooks (a blob that did not decode does not). times_runs: it reads run.seconds of the runs
    it acts on (every run, or with options_only those of tasks with options), so their calls are timed.
    """

    options_only = False
    times_runs = False

    def before(self, run: Run) -> None:
        """Before the call, with run.task decoded: may set what the call gets (run.limit, run.timed), refuse
        the task (run.refuse) or hold it back (run.hold): then no later before() runs, nor the call."""

    def after(self, run: Run) -> None:
        """Once the run is over, called or refused (run.refusal), innermost middleware first: from
        Retries out, run.settlement says how it is settled, and a middleware may replace it."""


class Pipeline:
    """A claimed task through the middleware (outermost first): start(), the call, then finish()."""

    def __init__(self, middleware: Sequence[Middleware]) -> None:
        self.middleware = tuple(middleware)
        self._before = self._hooks("before", self.middleware)
        self._after = self._hooks("after", self.middleware[::-1])
        plain = [item for item in self.middleware if not item.options_only]
        self._plain_before = self._hooks("before", plain)
        self._plain_after = self._hooks("after", plain[::-1])
        self._timed = any(item.times_runs for item in self.middleware)
        self._plain_timed = any(item.times_runs for item in plain)

    @staticmethod
    def _hooks(name: str, middleware: Sequence[Middleware]) -> Tuple[Hook, ...]:
        """The hooks called name that these middleware override, in their order."""
        return tuple(getattr(item, name) for item in middleware
                     if getattr(type(item), name) is not getattr(Middleware, name))

    def start(self, run: Run) -> bool:
        """Decode the task and run the before() hooks: True if it is to be called, False if refused (or
        failed already: run.error)."""
        if len(run.blob) > run.queue.max_task_size:
            run.refuse(Reason.TOO_LARGE, f"{len(run.blob)} bytes, over {run.queue.max_task_size}")
            return False
        try:
            task = run.task = PyTask.deserialize(run.blob)
            run.call = Call(task, run.queue.name, run.worker_id)
        except MalformedTaskError as exc:
            reason = Reason(exc.reason)
            other = decode_task(run.blob).options if reason is Reason.GO_TASK else NO_OPTIONS  # its unique lock
            run.refuse(reason, str(exc), exc.func_path, other)
            return False
        if task.options is NO_OPTIONS:
            hooks, run.timed = self._plain_before, self._plain_timed
        else:
            hooks, run.timed = self._before, self._timed
        for before in hooks:
            before(run)
            if run.refusal is not None or run.held is not None:
                return False
        return run.error is None  # a middleware's before_call failed it (delayed.worker.hooks.BeforeCall)

    def finish(self, run: Run) -> Settlement:
        """Run the after() hooks; how to settle the task."""
        task = run.task
        for after in self._plain_after if task is not None and task.options is NO_OPTIONS else self._after:
            after(run)
        assert run.settlement is not None, "no middleware settled the run (Retries settles every run)"
        return run.settlement
