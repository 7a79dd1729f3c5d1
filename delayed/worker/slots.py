"""How a worker runs several tasks at once: plain functions each in a slot thread, coroutine
functions as tasks on one event loop (a thread running it).

Jobs wait in a ready queue (a delayed.worker.batch.Batch, whose watcher gives back the ones that wait
too long). The worker's main thread starts them in free slots (fill); a coroutine that finishes
takes the next ready job itself, on the event loop, so a coroutine slot is refilled without a
hop through the main thread (a plain job it takes is handed to the main thread to start).

A thread cannot be killed: a plain task past its time limit gets TimeLimitExceeded injected
into its thread (PyThreadState_SetAsyncExc), as SIGALRM raises it in the main thread. If it
still runs, it stays held (its keep-alive goes on, so it never runs twice at once) and keeps
its slot, and the worker says so once per time-limit period it overruns, injecting again.

Only the worker's main thread injects, and it injects only into a job it saw running, then
takes the injection back if the job finished meanwhile; an injection that lands anyway after
the call returned is told apart by where it was raised (in the frame that made the call, not
inside the task) and does not count, so a finished task is never reported as timed out.
"""
import asyncio
import ctypes
import inspect
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Set

from .batch import Batch
from .time_limit import TimeLimitExceeded, exceeded, within

_inject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))
_clear = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))


LIMIT_CHECK = 0.01
"""Seconds between looks for plain jobs past their time limit."""


class Job:
    """One task to run in a slot: func(*args, **kwargs), with its time limit (None: none).

    outcome: None once the call returned (result: what it returned), else the exception it raised;
    done once that is known.
    """

    __slots__ = ("key", "func", "args", "kwargs", "limit", "coroutine", "thread", "started_at", "done",
                 "outcome", "result", "interrupted", "next_warning")

    def __init__(self, key: Any, func: Callable[..., Any], args: Sequence[Any], kwargs: Dict[str, Any],
                 limit: Optional[float], coroutine: bool) -> None:
        self.key = key
        self.func, self.args, self.kwargs, self.limit, self.coroutine = func, args, kwargs, limit, coroutine
        self.thread: Optional[int] = None
        self.started_at: Optional[float] = None
        self.done = False
        self.outcome: Optional[BaseException] = None
        self.result: Any = None
        self.interrupted = 0
        self.next_warning = 0.0


def _call(func: Callable[..., Any], args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
    return func(*args, **kwargs)


CALLERS = {_call.__code__}
"""Code of the frames that call a task: an exception whose traceback ends there came from the call itself."""


def _run(job: Job) -> None:
    """Run a plain job in this thread. Past `job.done = True` no injection can be aimed at it."""
    job.thread = threading.get_ident()
    job.started_at = time.monotonic()
    try:
        result = _call(job.func, job.args, job.kwargs)
        if result is not None and inspect.isawaitable(result):  # a plain function that returned one
            result = asyncio.run(_awaited(result, job.limit))
        job.outcome, job.result = None, result
    except TimeLimitExceeded as exc:
        job.outcome = None if _raised_here(exc) else _saying_the_limit(exc, job.limit)
    except BaseException as exc:
        job.outcome = exc
    job.done = True


def _saying_the_limit(exc: TimeLimitExceeded, limit: Optional[float]) -> TimeLimitExceeded:
    """An injected TimeLimitExceeded (a bare class: no message) as one that says the limit, raised where it was."""
    return exc if exc.args or not limit else exceeded(limit).with_traceback(exc.__traceback__)


async def _awaited(awaitable: Any, limit: Optional[float]) -> Any:
    return await within(awaitable, limit)


def _raised_here(exc: BaseException) -> bool:
    """A TimeLimitExceeded raised in _run itself: the injection landed after the call returned."""
    tb = exc.__traceback__
    return tb is not None and tb.tb_next is None


class Slots:
    """Up to `size` jobs at once, taken from `ready`; finished jobs are reported through `finished`,
    with `wake` released (as it is when a job is handed to the main thread)."""

    def __init__(self, size: int, ready: Batch[Job]) -> None:
        self.size = size
        self.ready = ready
        self.running: Dict[Any, Job] = {}  # started (or taken to start) and not yet collected
        self.finished: Deque[Job] = deque()
        self.wake = threading.Lock()
        self.wake.acquire()
        self._handed: Deque[Job] = deque()  # plain jobs a finished coroutine took: the main thread starts them
        self._idle: List["_SlotThread"] = []
        self._threads: List["_SlotThread"] = []
        self._slot_of: Dict[Any, "_SlotThread"] = {}
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._limited = 0  # plain jobs running with a time limit
        self._next_check = 0.0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._loop_thread: Optional[threading.Thread] = None

    @property
    def free(self) -> int:
        # (a coroutine that took the next job before its own was collected counts twice for a moment)
        return max(0, self.size - len(self.running))

    def fill(self) -> None:
        """Start ready jobs in the free slots (main thread only): plain ones each in a thread,
        coroutines all in one wake-up of the event loop."""
        while self._handed:
            self._start_plain(self._handed.popleft())
        coroutines = []
        while self.free:
            job = self.ready.next()
            if job is None:
                break
            self.running[job.key] = job
            if job.coroutine:
                coroutines.append(job)
            else:
                self._start_plain(job)
        if coroutines:
            self._event_loop().call_soon_threadsafe(self._create_tasks, coroutines)

    def _start_plain(self, job: Job) -> None:
        if job.limit:
            self._limited += 1
        slot = self._idle.pop() if self._idle else self._new_thread()
        self._slot_of[job.key] = slot
        slot.give(job)

    def _create_tasks(self, jobs: List[Job]) -> None:
        assert self._loop is not None
        for job in jobs:
            task = self._loop.create_task(self._run_coroutine(job))
            self._tasks.add(task)  # the loop keeps only a weak reference
            task.add_done_callback(self._tasks.discard)

    def wait(self, timeout: float) -> None:
        """Until a job finishes (or is handed over) or timeout seconds pass."""
        if not self.finished and not self._handed:
            self.wake.acquire(timeout=timeout)

    def collect(self) -> List[Job]:
        """The jobs that finished since the last call; their threads are free again."""
        jobs = []
        while self.finished:
            job = self.finished.popleft()
            if self.running.pop(job.key, None) is not None:  # a slot may report a job twice: see _SlotThread
                jobs.append(job)
                slot = self._slot_of.pop(job.key, None)
                if slot is not None:
                    self._idle.append(slot)
                    if job.limit:
                        self._limited -= 1
        return jobs

    def enforce_limits(self, warn: Callable[[Job, float], None]) -> None:
        """Interrupt plain jobs past their time limit; warn (and interrupt again) once per limit
        period a job overruns it. Looks at most every LIMIT_CHECK seconds, and only with such jobs."""
        if not self._limited:
            return
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + LIMIT_CHECK
        for job in list(self.running.values()):
            if job.coroutine or not job.limit or job.done or job.started_at is None or job.thread is None:
                continue
            overrun = now - job.started_at - job.limit
            if overrun < 0 or now < job.next_warning:
                continue
            if job.interrupted:
                warn(job, overrun)
            _inject(job.thread, TimeLimitExceeded)
            if job.done:  # it finished meanwhile: take the injection back
                _clear(job.thread, None)
            job.interrupted += 1
            job.next_warning = now + job.limit

    def close(self) -> None:
        """Let the threads end once idle (running jobs are not stopped: call when none run)."""
        for slot in self._threads:
            slot.give(None)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            assert self._loop_thread is not None
            self._loop_thread.join(5)
            self._loop.close()

    def _report(self, job: Job) -> None:
        self.finished.append(job)
        self._wake()

    def _wake(self) -> None:
        try:
            if self.wake.locked():
                self.wake.release()
        except RuntimeError:  # another thread released it first
            pass

    async def _run_coroutine(self, job: Job) -> None:
        job.started_at = time.monotonic()
        try:
            job.result = await within(job.func(*job.args, **job.kwargs), job.limit)
        except BaseException as exc:
            job.outcome = exc
        job.done = True
        self._report(job)
        following = self.ready.next()
        if following is not None:
            self.running[following.key] = following
            if following.coroutine:
                self._create_tasks([following])  # its own task: no context or cancellation shared
            else:
                self._handed.append(following)
                self._wake()

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = self._loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(target=loop.run_forever, name="delayed event loop", daemon=True)
            self._loop_thread.start()
        return self._loop

    def _new_thread(self) -> "_SlotThread":
        slot = _SlotThread(self, len(self._threads))
        self._threads.append(slot)
        slot.start()
        return slot


class _SlotThread(threading.Thread):
    """Runs the jobs given to it, one at a time.

    A stale injection (one the main thread took back too late) can land anywhere in this
    loop between two jobs: every step here can be interrupted and retried, and reporting a
    job twice is harmless (Slots.collect takes each once).
    """

    def __init__(self, slots: Slots, number: int) -> None:
        super().__init__(name=f"delayed slot {number}", daemon=True)
        self.slots = slots
        self.inbox: Deque[Optional[Job]] = deque()
        self.job: Optional[Job] = None
        self._ready = threading.Lock()
        self._ready.acquire()

    def give(self, job: Optional[Job]) -> None:
        self.inbox.append(job)
        if self._ready.locked():
            self._ready.release()

    def run(self) -> None:
        while True:
            try:
                if self.job is None:
                    if not self.inbox:
                        self._ready.acquire()
                        continue
                    job = self.inbox.popleft()
                    if job is None:
                        return
                    self.job = job
                job = self.job
                if job.started_at is None:
                    _run(job)
                elif not job.done:  # interrupted between its call and done: it ran; a time-out keeps it safe
                    job.outcome, job.done = _saying_the_limit(TimeLimitExceeded(), job.limit), True
                self.slots._report(job)
                self.job = None
            except TimeLimitExceeded:
                continue
