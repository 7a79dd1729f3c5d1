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
the call returned is told apart by where it was raised (in invoke's frame, not inside the task)
and does not count, so a finished task is never reported as timed out.

The calls themselves are delayed.worker.invoke's: a slot thread runs Invoker.invoke, and a
coroutine runs Invoker.invoke_async on the invoker's event loop.
"""
import asyncio
import ctypes
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Set

from .batch import Batch
from .invoke import Invoker
from .run import Run
from .time_limit import TimeLimitExceeded, exceeded

_inject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))
_clear = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))


LIMIT_CHECK = 0.01
"""Seconds between looks for plain jobs past their time limit."""


class Job:
    """One run to make in a slot (timed: a slot needs its start): done once its outcome is in the run;
    thread: the thread running a plain job; interrupted, next_warning: its time limit's interruptions so
    far and when the next warning is due."""

    __slots__ = ("key", "run", "coroutine", "limit", "thread", "done", "interrupted", "next_warning")

    def __init__(self, key: Any, run: Run) -> None:
        assert run.callee is not None
        self.key = key
        self.run = run
        run.timed = True
        self.coroutine = run.callee.coroutine
        self.limit = run.limit
        self.thread: Optional[int] = None
        self.done = False
        self.interrupted = 0
        self.next_warning = 0.0


def _run(job: Job, invoker: Invoker) -> None:
    """Run a plain job in this thread. Past `job.done = True` no injection can be aimed at it."""
    job.thread = threading.get_ident()
    try:
        invoker.invoke(job.run)
    except TimeLimitExceeded:
        raise  # an injection that landed past invoke's handling: see _SlotThread
    except BaseException as exc:  # a task's SystemExit or KeyboardInterrupt ends only the task, here
        job.run.error = exc
    job.done = True


def _timed_out(limit: Optional[float]) -> TimeLimitExceeded:
    return exceeded(limit) if limit else TimeLimitExceeded()


class Slots:
    """Up to `size` jobs at once, taken from `ready`; finished jobs are reported through `finished`,
    with `wake` released (as it is when a job is handed to the main thread)."""

    def __init__(self, size: int, ready: Batch[Job], invoker: Invoker) -> None:
        self.size = size
        self.ready = ready
        self.invoker = invoker
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
            self.invoker.loop.loop.call_soon_threadsafe(self._create_tasks, coroutines)

    def _start_plain(self, job: Job) -> None:
        if job.limit:
            self._limited += 1
        slot = self._idle.pop() if self._idle else self._new_thread()
        self._slot_of[job.key] = slot
        slot.give(job)

    def _create_tasks(self, jobs: List[Job]) -> None:
        loop = self.invoker.loop.loop
        for job in jobs:
            task = loop.create_task(self._run_coroutine(job))
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
            if job.coroutine or not job.limit or job.done or not job.run.started or job.thread is None:
                continue
            overrun = now - job.run.started - job.limit
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
        """Let the threads end once idle (running jobs are not stopped: call when none run); the
        event loop is the invoker's, closed with it."""
        for slot in self._threads:
            slot.give(None)

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
        try:
            await self.invoker.invoke_async(job.run)
        except BaseException as exc:  # a task's SystemExit or KeyboardInterrupt ends only the task, here
            job.run.error = exc
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
                if not job.run.started:
                    _run(job, self.slots.invoker)
                elif not job.done:  # interrupted between its call and done: it ran; a time-out keeps it safe
                    job.run.error, job.done = _timed_out(job.limit), True
                self.slots._report(job)
                self.job = None
            except TimeLimitExceeded:
                continue
