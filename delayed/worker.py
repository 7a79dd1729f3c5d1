"""The worker loop: claim tasks, run the allowed ones, settle each (release, retry or dead-letter).

A busy worker claims a batch of tasks per round trip, each held under one of
its worker ids, and releases the finished ones in the same round trip as the
next claim; an idle one blocks on the notification list as go-delayed does.
"""
import asyncio
import inspect
import logging
import threading
import time
import traceback
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union

import redis

from . import dead_letter
from .background import Every
from .connection import Backoff
from .errors import FunctionNotAllowedError, MalformedTaskError, SkipRetry
from .forwarder import FORWARD_INTERVAL, forward
from .functions import Allowed, FunctionRegistry
from .keys import new_worker_ids
from .queue import Queue
from .retry import backoff_seconds
from .signals import restore, stop_gracefully_then_at_once
from .task import PyTask
from .time_limit import TimeLimitExceeded, can_enforce, time_limit

logger = logging.getLogger(__name__)

Settlement = Tuple[str, Tuple[Any, ...]]
"""What to do with a held task: ("release", ()), ("requeue", (blob,)), ("reschedule", (blob, due))
or ("bury", (record,)); the name of a Queue method and its arguments after the claimed blob."""

DEFAULT_BATCH = 32
BATCH_TIME = 0.01
"""Seconds a batch may take before the next one shrinks: bounds how long a claimed task waits."""


class Worker:
    """Runs PyTasks from one queue, calling only the functions in `allow`.

    allow: module names, modules or functions. A module allows the public
    functions defined in it; anything else a task names goes to the dead-letter list.
    keep_alive_interval: seconds between refreshes of the keep-alive keys
    (keep it well under queue.keep_alive_timeout).
    time_limit: seconds a task may run before it is failed (a task's own time_limit
    wins); enforced with SIGALRM, so only when the worker runs in the main thread.
    batch: the most tasks claimed per round trip, each under its own worker id.
    The batch grows while batches finish within BATCH_TIME and shrinks when
    they do not, so slow tasks are claimed one at a time; 1 turns batching off.
    """

    def __init__(
        self,
        queue: Queue,
        allow: Union[None, FunctionRegistry, Iterable[Allowed]] = None,
        keep_alive_interval: float = 15,
        batch: int = DEFAULT_BATCH,
        time_limit: Optional[float] = None,
    ) -> None:
        if allow is None:
            raise TypeError(
                "Worker needs allow=[...]: the modules or functions its tasks may call "
                "(keakon/delayed 1.x called whatever a task named)"
            )
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        self.queue = queue
        self.functions = allow if isinstance(allow, FunctionRegistry) else FunctionRegistry(allow)
        self.keep_alive_interval = keep_alive_interval
        self.time_limit = time_limit
        self._warned_time_limit = False
        self.ids: List[str] = []
        self._max_batch = batch
        self._batch = 1
        self._turn = 0  # which half of self.ids the next claim fills
        self._finished: List[str] = []  # ids whose task is done, released with the next claim
        self._unlocks: List[Tuple[str, str]] = []  # unique tasks that ended: (key, token) of their locks
        self._abandoned = False  # a settlement gave up at stop: tasks may still be held
        self._stopping = threading.Event()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._backoff = Backoff(logger, "worker", wait=self._stopping.wait)

    @property
    def id(self) -> Optional[str]:
        """The worker's main id (its other ids are this id with -1, -2, ... appended)."""
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
        keep_alive = Every(self.keep_alive_interval, lambda: self.queue.keep_alive(self.ids),
                           f"keep-alive of {self.id}")
        forwarder = Every(FORWARD_INTERVAL, lambda: forward([self.queue]), "forwarder")
        keep_alive.start()
        forwarder.start()
        logger.info("worker %s online on queue %r, %d allowed functions",
                    self.id, self.queue.name, len(self.functions))
        try:
            while not self._stopping.is_set():
                self.work_once()
            if self._finished and self._persist(self.queue.claim_batch, self._finished, ()) is not None:
                self._finished = []
            self._release_locks()
        finally:
            forwarder.stop()
            keep_alive.stop()
            if self._loop is not None:
                self._loop.close()
            self._go_offline()

    def stop(self) -> None:
        """Ask the loop to stop after the current task (safe from signal handlers and other threads)."""
        self._stopping.set()

    def work_once(self) -> int:
        """Claim a batch (or wait dequeue_timeout for one task) and run it; returns how many ran.

        The worker's ids come in two halves, and claims alternate between them: the call
        that releases one half's finished tasks claims into the other. So a call resent
        after its reply was lost releases nothing it has just claimed; what it claimed
        comes back, since a claim re-delivers what an id holds.
        """
        claim_ids = self.ids[self._turn * self._max_batch:][: self._batch]
        try:
            claimed = self.queue.claim_batch(self._finished, claim_ids)
            self._finished = []
            if not claimed:  # the queue is empty: block for a notification as go-delayed does
                blob = self.queue.claim(claim_ids[0])
                claimed = [] if blob is None else [(claim_ids[0], blob)]
        except redis.RedisError as exc:
            self._backoff.failed(exc)
            return 0
        self._backoff.succeeded()
        if claimed:
            self._turn ^= 1
        started = time.monotonic()
        for index, (worker_id, blob) in enumerate(claimed):
            if self._stopping.is_set():
                self._persist(self.queue.give_back, claimed[index:])
                return index
            action, data = self.execute(blob)
            if action == "release":
                self._finished.append(worker_id)
            elif self._persist(getattr(self.queue, action), blob, *data, worker_id) is False:
                logger.warning("did not %s the task of %s: it no longer holds it (a sweeper requeued it after "
                               "its keep-alive lapsed, or an earlier try whose reply was lost did it)",
                               action, worker_id)
        self._release_locks()
        self._adapt_batch(len(claimed), time.monotonic() - started)
        return len(claimed)

    def _release_locks(self) -> None:
        """Release the locks of the unique tasks that ended (done, or dead-lettered)."""
        if self._unlocks and self._persist(self.queue.unlock, self._unlocks) is not None:
            self._unlocks = []

    def _adapt_batch(self, claimed: int, elapsed: float) -> None:
        if elapsed > BATCH_TIME:
            self._batch = max(1, self._batch // 2)
        elif claimed == self._batch:
            self._batch = min(self._max_batch, self._batch * 2)

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
        limit = self._limit(task)
        try:
            with time_limit(limit):
                result = func(*task.args, **task.kwargs)
                if inspect.isawaitable(result):
                    self._event_loop().run_until_complete(result)
        except (Exception, TimeLimitExceeded) as exc:
            settlement = self._failed(task, exc)
        else:
            settlement = ("release", ())
        if "unique_key" in task.options and settlement[0] in ("release", "bury"):
            self._unlocks.append((task.options["unique_key"], task.options.get("unique_token", "")))
        return settlement

    def _limit(self, task: PyTask) -> Optional[float]:
        limit = task.time_limit or self.time_limit
        if limit and not can_enforce():
            if not self._warned_time_limit:
                logger.warning("time limits are not enforced: the worker does not run in the main thread")
                self._warned_time_limit = True
            return None
        return limit

    def _failed(self, task: PyTask, exc: BaseException) -> Settlement:
        error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, TypeError) and exc.__traceback__ is not None and exc.__traceback__.tb_next is None:
            # The call itself raised, before the function's first line: its arguments do not fit.
            return self._bury(task.serialize(), "bad_arguments", error, task.func_path)
        if isinstance(exc, SkipRetry):
            pass
        elif "max_retries" in task.options:
            attempt = task.options.get("attempt", 0) + 1
            if attempt <= task.options["max_retries"]:
                delay = backoff_seconds(task.options.get("backoff"), attempt, self.functions.resolve)
                logger.exception("task %s failed (attempt %d of %d); next attempt in %.1f s", task.func_path,
                                 attempt, task.options["max_retries"] + 1, delay)
                return ("reschedule", (task.with_options(attempt=attempt).serialize(), time.time() + delay))
        elif task.retry:
            left = task.retry - 1 if task.retry > 0 else task.retry
            logger.exception("task %s failed; retrying (%s left)", task.func_path,
                             "forever" if left < 0 else left)
            return ("requeue", (task.with_retry(left).serialize(),))
        logger.exception("task %s failed; dead-lettered in %s", task.func_path, self.queue.keys.dead)
        reason = "timed_out" if isinstance(exc, TimeLimitExceeded) else "failed"
        return self._bury(task.serialize(), reason, error, task.func_path, traceback.format_exc())

    def _bury(self, blob: bytes, reason: str, error: str, func: Optional[str] = None,
              trace: Optional[str] = None) -> Settlement:
        if reason not in ("failed", "timed_out"):
            logger.error("dead-lettered a task in %s (%s): %s", self.queue.keys.dead, reason, error)
        record = dead_letter.record(reason=reason, error=error, blob=blob, queue=self.queue.name,
                                    worker=self.id, func=func, traceback=trace)
        return ("bury", (record,))

    def _persist(self, apply: Callable[..., Any], *args: Any) -> Any:
        """Run a settling call and return its result, retrying through Redis outages; once
        stopping, give up and leave the held tasks to a sweeper (None)."""
        while True:
            try:
                result = apply(*args)
            except redis.RedisError as exc:
                if self._stopping.is_set():
                    logger.error("could not settle tasks of worker %s before stopping; "
                                 "a sweeper will requeue them", self.id)
                    self._abandoned = True
                    return None
                self._backoff.failed(exc)
            else:
                self._backoff.succeeded()
                return result

    def _go_online(self) -> None:
        """Claim fresh ids; after a Redis error, fresh ones again (a lost reply may have set the last)."""
        while True:
            self.ids = new_worker_ids(2 * self._max_batch)
            self.queue.worker_id = self.ids[0]
            try:
                if self.queue.try_online(self.ids):
                    self._backoff.succeeded()
                    return
            except redis.RedisError as exc:
                self._backoff.failed(exc)

    def _go_offline(self) -> None:
        """Delete the keep-alive keys, unless tasks may still be held: then let them expire for a sweeper."""
        if self._finished or self._abandoned:
            return
        try:
            self.queue.go_offline(self.ids)
        except redis.RedisError as exc:
            logger.warning("worker %s could not go offline (%s); its keys expire by themselves", self.id, exc)
        else:
            logger.info("worker %s offline", self.id)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop


if __name__ == "__main__":
    from .cli import worker_main

    raise SystemExit(worker_main())
