"""Runs N worker processes and restarts any that dies (`--concurrency N`); with burst, one that
finishes (exit status 0: its queues were empty) is not restarted, and the last one to go ends the run."""
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from contextlib import nullcontext
from typing import Any, Callable, ContextManager, Dict, List, Optional

from ..runtime.command import METRICS_HOST
from ..runtime.exiting import exit_abandoning_threads
from ..runtime.lifecycle import STOP_SIGNALS, ForkSafeThread, Lifecycle
from .loop import Worker
from .metrics import Multiprocess

logger = logging.getLogger(__name__)

MAX_RESTART_DELAY = 30.0


def _child(make_worker: Callable[[], Worker], parent: int, inherited: Lifecycle) -> None:
    """A worker process: stops gracefully on SIGTERM/SIGHUP, or when its supervisor is gone; exits
    once its worker is offline, though a task left a thread running.

    It starts with the stop signals blocked (the supervisor forks with them blocked), so none
    reaches the supervisor's handlers, inherited over fork, before its own are in place.
    """
    inherited.after_fork()
    lifecycle = Lifecycle("worker", supervised=True)
    with lifecycle.signals(watch=True):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        worker = make_worker()
        lifecycle.on_stop(worker.stop)

        def stop_when_orphaned() -> None:
            while os.getppid() == parent:
                time.sleep(1)
            logger.warning("supervisor %d is gone; stopping", parent)
            lifecycle.stop()

        ForkSafeThread(target=stop_when_orphaned, daemon=True).start()
        lifecycle.online()
        status = worker.run(handle_signals=False)
    lifecycle.offline()
    exit_abandoning_threads(status, logger)


class Supervisor:
    """Keeps `concurrency` worker processes running; each builds its own Worker (own id and connection).

    The first stop signal is passed on as SIGTERM (each child finishes its task) and run()
    returns 0 once they are gone; a second one kills the children with SIGKILL, leaving their
    tasks to the sweeper, and run() returns 128 + that signal. The handlers only set a flag:
    the main loop forwards the signals, between forks, so every child started gets them.
    metrics_port: while it runs, serve the children's task metrics there, on metrics_host, merged (see
    delayed.worker.metrics.Multiprocess); make_worker then gives each Worker a TaskMetrics hook.
    burst: the workers are burst workers (Worker(burst=True)): one that exits 0 has finished and is
    not restarted (without it, a child stopped by a signal of its own is restarted, whatever its status).
    """

    def __init__(self, make_worker: Callable[[], Worker], concurrency: int,
                 metrics_port: Optional[int] = None, burst: bool = False, metrics_host: str = METRICS_HOST) -> None:
        self._make_worker = make_worker
        self._concurrency = concurrency
        self._metrics_port = metrics_port
        self._metrics_host = metrics_host
        self._burst = burst
        self._context = multiprocessing.get_context("fork")
        self._children: Dict[int, Any] = {}
        self._started_at: Dict[int, float] = {}
        self._delays: Dict[int, float] = {}
        self._restarts: Dict[int, float] = {}
        self._sent: Optional[int] = None  # the last signal sent to every child: SIGTERM, then SIGKILL
        self.lifecycle = Lifecycle("supervisor")

    def run(self) -> int:
        """Supervise until stopped; returns the exit status: 0, or 128 + signal after a forced stop."""
        lifecycle = self.lifecycle
        with lifecycle.signals(watch=False, force_exit=False), self._metrics() as metrics:
            for slot in range(self._concurrency):
                lifecycle.poll()
                if not lifecycle.stopping:
                    self._start(slot)
            lifecycle.online()
            while True:
                lifecycle.poll()
                self._forward()
                for slot, child in list(self._children.items()):
                    if not child.is_alive():
                        child.join()
                        del self._children[slot]
                        if metrics is not None:
                            metrics.exited(child.pid)
                        if lifecycle.stopping:
                            pass
                        elif self._burst and child.exitcode == 0:  # it found its queues empty
                            logger.info("worker process %d finished", slot)
                        else:
                            self._schedule_restart(slot, child.exitcode)
                if lifecycle.stopping:
                    self._restarts.clear()
                now = time.monotonic()
                for slot, due in list(self._restarts.items()):
                    if now >= due:
                        del self._restarts[slot]
                        self._start(slot)
                if not self._children and not self._restarts:
                    break
                self._wait()
        lifecycle.offline()
        logger.info("all workers stopped")
        return lifecycle.exit_status

    def _metrics(self) -> ContextManager[Optional[Multiprocess]]:
        return nullcontext() if self._metrics_port is None else Multiprocess(self._metrics_port, self._metrics_host)

    def stop(self) -> None:
        """Stop the children gracefully and return from run() (from another thread)."""
        self.lifecycle.stop()

    def _forward(self) -> None:
        """SIGTERM every child once a stop is asked for; SIGKILL them once it is forced."""
        wanted = signal.SIGKILL if self.lifecycle.forced else signal.SIGTERM if self.lifecycle.stopping else None
        if wanted is None or wanted == self._sent:
            return
        self._sent = wanted
        pids: List[int] = [child.pid for child in self._children.values() if child.pid]
        logger.info("sending %s to %d workers", signal.Signals(wanted).name, len(pids))
        for pid in pids:
            try:
                os.kill(pid, wanted)
            except ProcessLookupError:
                pass

    def _wait(self) -> None:
        """Until a child exits, a restart is due, a signal or stop() arrives, or a second passes."""
        timeout = 1.0
        if self._restarts:
            timeout = max(0.0, min(timeout, min(self._restarts.values()) - time.monotonic()))
        waitables: List[Any] = [child.sentinel for child in self._children.values()]
        wakeup = self.lifecycle.fileno()
        if wakeup is not None:
            waitables.append(wakeup)
        if waitables:
            multiprocessing.connection.wait(waitables, timeout)
        else:
            self.lifecycle.wait(timeout)

    def _start(self, slot: int) -> None:
        """Fork a child with the stop signals blocked until it is in the table (and, in the
        child, until its own handlers are in place): a signal then cannot miss it."""
        child = self._context.Process(
            target=_child, args=(self._make_worker, os.getpid(), self.lifecycle), name=f"delayed-worker-{slot}"
        )
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            child.start()
            self._children[slot] = child
            self._started_at[slot] = time.monotonic()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def _schedule_restart(self, slot: int, exitcode: int) -> None:
        """A child that died young waits twice as long as last time (up to 30 s) before its restart."""
        lived = time.monotonic() - self._started_at[slot]
        delay = min(self._delays.get(slot, 0.25) * 2, MAX_RESTART_DELAY) if lived < 5 else 0.5
        self._delays[slot] = delay
        logger.error("worker process %d exited with %s; restarting in %.1f s", slot, exitcode, delay)
        self._restarts[slot] = time.monotonic() + delay
