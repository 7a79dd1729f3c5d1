"""Runs N worker processes and restarts any that dies (`--concurrency N`)."""
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from typing import Any, Callable, Dict

from .signals import STOP_SIGNALS, stop_gracefully_once
from .worker import Worker

logger = logging.getLogger(__name__)

MAX_RESTART_DELAY = 30.0


def _child(make_worker: Callable[[], Worker], parent: int) -> None:
    """A worker process: stops gracefully on SIGTERM/SIGHUP, or when its supervisor is gone."""
    worker = make_worker()
    stop_gracefully_once(worker.stop, "worker")

    def stop_when_orphaned() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        logger.warning("supervisor %d is gone; stopping", parent)
        worker.stop()

    threading.Thread(target=stop_when_orphaned, daemon=True).start()
    worker.run(handle_signals=False)


class Supervisor:
    """Keeps `concurrency` worker processes running; each builds its own Worker (own id and connection).

    The first stop signal is passed on as SIGTERM (each child finishes its task);
    a second one kills the children with SIGKILL, leaving their tasks to the sweeper.
    """

    def __init__(self, make_worker: Callable[[], Worker], concurrency: int) -> None:
        self._make_worker = make_worker
        self._concurrency = concurrency
        self._context = multiprocessing.get_context("fork")
        self._children: Dict[int, Any] = {}
        self._started_at: Dict[int, float] = {}
        self._delays: Dict[int, float] = {}
        self._restarts: Dict[int, float] = {}
        self._signals = 0

    def run(self) -> int:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_signal)
        for slot in range(self._concurrency):
            self._start(slot)
        while self._children or (self._restarts and not self._signals):
            self._wait()
            for slot, child in list(self._children.items()):
                if not child.is_alive():
                    child.join()
                    del self._children[slot]
                    if not self._signals:
                        self._schedule_restart(slot, child.exitcode)
            now = time.monotonic()
            for slot, due in list(self._restarts.items()):
                if now >= due and not self._signals:
                    del self._restarts[slot]
                    self._start(slot)
        logger.info("all workers stopped")
        return 0

    def _wait(self) -> None:
        """Until a child exits, a restart is due or a second passes."""
        timeout = 1.0
        if self._restarts:
            timeout = max(0.0, min(timeout, min(self._restarts.values()) - time.monotonic()))
        sentinels = [child.sentinel for child in self._children.values()]
        if sentinels:
            multiprocessing.connection.wait(sentinels, timeout)
        else:
            time.sleep(timeout)

    def _start(self, slot: int) -> None:
        child = self._context.Process(
            target=_child, args=(self._make_worker, os.getpid()), name=f"delayed-worker-{slot}"
        )
        child.start()
        self._children[slot] = child
        self._started_at[slot] = time.monotonic()

    def _schedule_restart(self, slot: int, exitcode: int) -> None:
        """A child that died young waits twice as long as last time (up to 30 s) before its restart."""
        lived = time.monotonic() - self._started_at[slot]
        delay = min(self._delays.get(slot, 0.25) * 2, MAX_RESTART_DELAY) if lived < 5 else 0.5
        self._delays[slot] = delay
        logger.error("worker process %d exited with %s; restarting in %.1f s", slot, exitcode, delay)
        self._restarts[slot] = time.monotonic() + delay

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._signals += 1
        forward = signal.SIGTERM if self._signals == 1 else signal.SIGKILL
        logger.info("%s received: sending %s to %d workers", signal.Signals(signum).name,
                    forward.name, len(self._children))
        for child in self._children.values():
            if child.pid:
                try:
                    os.kill(child.pid, forward)
                except ProcessLookupError:
                    pass
