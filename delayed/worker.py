"""The worker loop: claim a task, run it if it is allowed, settle it (release, retry or dead-letter)."""
import asyncio
import inspect
import logging
import threading
import traceback
from typing import Any, Callable, Iterable, Optional, Tuple

import redis

from . import dead_letter
from .connection import Backoff
from .errors import FunctionNotAllowedError, MalformedTaskError
from .functions import Allowed, FunctionRegistry
from .keep_alive import KeepAlive
from .keys import new_worker_id
from .queue import Queue
from .signals import restore, stop_gracefully_then_at_once
from .task import PyTask

logger = logging.getLogger(__name__)

Settlement = Tuple[str, Optional[bytes]]
"""What to do with the held task: ("release", None), ("requeue", blob) or ("bury", record)."""


class Worker:
    """Runs PyTasks from one queue, calling only the functions in `allow`.

    allow: module names, modules or functions. A module allows the public
    functions defined in it; anything else a task names goes to the dead-letter list.
    keep_alive_interval: seconds between refreshes of the keep-alive key
    (keep it well under queue.keep_alive_timeout).
    """

    def __init__(
        self, queue: Queue, allow: Optional[Iterable[Allowed]] = None, keep_alive_interval: float = 15
    ) -> None:
        if allow is None:
            raise TypeError(
                "Worker needs allow=[...]: the modules or functions its tasks may call "
                "(keakon/delayed 1.x called whatever a task named)"
            )
        self.queue = queue
        self.functions = allow if isinstance(allow, FunctionRegistry) else FunctionRegistry(allow)
        self.keep_alive_interval = keep_alive_interval
        self._stopping = threading.Event()
        self._holding = False
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._backoff = Backoff(logger, "worker", wait=self._stopping.wait)

    @property
    def id(self) -> Optional[str]:
        return self.queue.worker_id

    def run(self, handle_signals: bool = True) -> None:
        """Work until stop() is called; then settle the current task, go offline and return.

        handle_signals: in the main thread, SIGTERM, SIGINT and SIGHUP call stop()
        and a second one exits at once; the previous handlers are restored on return.
        """
        handlers = stop_gracefully_then_at_once(self.stop, "worker") if handle_signals else {}
        try:
            self._run()
        finally:
            restore(handlers)

    def _run(self) -> None:
        self._go_online()
        keep_alive = KeepAlive(self.queue, self.keep_alive_interval)
        keep_alive.start()
        logger.info("worker %s online on queue %r, %d allowed functions",
                    self.id, self.queue.name, len(self.functions))
        try:
            while not self._stopping.is_set():
                self.work_once()
        finally:
            keep_alive.stop()
            if self._loop is not None:
                self._loop.close()
            self._go_offline()

    def stop(self) -> None:
        """Ask the loop to stop after the current task (safe from signal handlers and other threads)."""
        self._stopping.set()

    def work_once(self) -> bool:
        """Claim, run and settle at most one task; False when none came within dequeue_timeout."""
        try:
            blob = self.queue.claim()
        except redis.RedisError as exc:
            self._backoff.failed(exc)
            return False
        self._backoff.succeeded()
        if blob is None:
            return False
        self._holding = True
        self._settle(self.execute(blob))
        return True

    def execute(self, blob: bytes) -> Settlement:
        """Run the task in blob if it may run; say how to settle it. Never raises for a task's fault."""
        if len(blob) > self.queue.max_task_size:
            return self._bury(blob, "too_large", f"{len(blob)} bytes, over {self.queue.max_task_size}")
        try:
            task = PyTask.deserialize(blob)
        except MalformedTaskError as exc:
            return self._bury(blob, exc.reason, str(exc), exc.func_path)
        try:
            func = self.functions.resolve(task.func_path)
        except FunctionNotAllowedError as exc:
            return self._bury(blob, "not_allowed", str(exc), task.func_path)
        try:
            result = func(*task.args, **task.kwargs)
            if inspect.isawaitable(result):
                self._event_loop().run_until_complete(result)
        except Exception as exc:
            return self._failed(task, exc)
        logger.debug("ran %s", task.func_path)
        return ("release", None)

    def _failed(self, task: PyTask, exc: Exception) -> Settlement:
        error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, TypeError) and exc.__traceback__ is not None and exc.__traceback__.tb_next is None:
            # The call itself raised, before the function's first line: its arguments do not fit.
            return self._bury(task.serialize(), "bad_arguments", error, task.func_path)
        if task.retry:
            left = task.retry - 1 if task.retry > 0 else task.retry
            logger.exception("task %s failed; retrying (%s left)", task.func_path,
                             "forever" if left < 0 else left)
            return ("requeue", task.with_retry(left).serialize())
        logger.exception("task %s failed; dead-lettered in %s", task.func_path, self.queue.keys.dead)
        return self._bury(task.serialize(), "failed", error, task.func_path, traceback.format_exc())

    def _bury(self, blob: bytes, reason: str, error: str, func: Optional[str] = None,
              trace: Optional[str] = None) -> Settlement:
        if reason != "failed":
            logger.error("dead-lettered a task in %s (%s): %s", self.queue.keys.dead, reason, error)
        record = dead_letter.record(reason=reason, error=error, blob=blob, queue=self.queue.name,
                                    worker=self.id, func=func, traceback=trace)
        return ("bury", record)

    def _settle(self, settlement: Settlement) -> None:
        """Apply a settlement, retrying through Redis outages; on stop, leave it to the sweeper."""
        action, data = settlement
        apply: Callable[[], Any] = {
            "release": self.queue.release,
            "requeue": lambda: self.queue.requeue(data),
            "bury": lambda: self.queue.bury(data),
        }[action]
        while True:
            try:
                apply()
            except redis.RedisError as exc:
                if self._stopping.is_set():
                    logger.error("could not %s the task of worker %s before stopping; "
                                 "a sweeper will requeue it", action, self.id)
                    return
                self._backoff.failed(exc)
            else:
                self._backoff.succeeded()
                self._holding = False
                return

    def _go_online(self) -> None:
        while True:
            self.queue.worker_id = new_worker_id()
            if self.queue.try_online():
                return

    def _go_offline(self) -> None:
        """Delete the keep-alive key, unless a task is still held: then let it expire so a sweeper requeues it."""
        if self._holding:
            return
        try:
            self.queue.go_offline()
        except redis.RedisError as exc:
            logger.warning("worker %s could not go offline (%s); its key expires by itself", self.id, exc)
        logger.info("worker %s offline", self.id)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop


if __name__ == "__main__":
    from .cli import worker_main

    raise SystemExit(worker_main())
