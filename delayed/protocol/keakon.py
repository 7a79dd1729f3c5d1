"""keakon/delayed 1.x's Queue: the producer's Queue plus keakon's worker and sweeper calls on its own
worker id, and the worker timing settings keakon's Queue took. `delayed.queue.Queue` is this class."""
from functools import cached_property
from typing import Optional, Sequence

import redis

from ..wire.hooks import Middleware
from ..wire.task import PyTask
from .dead_letters import DEFAULT_DEAD_MAX, DEFAULT_DEAD_MAX_AGE
from .producer import DEFAULT_MAX_TASK_SIZE
from .queue import Queue
from .sweeper_ops import DEFAULT_MAX_CRASHES, NOTIFY_AFTER, SweeperOps
from .worker_ops import DEFAULT_DEQUEUE_TIMEOUT, DEFAULT_KEEP_ALIVE_TIMEOUT, WorkerOps


class KeakonQueue(Queue):
    """keakon/delayed 1.x's Queue, a drop-in: a `Queue` with keakon's worker and sweeper calls.

    `from delayed.queue import Queue` gives this class, so keakon-style code keeps working: `dequeue`,
    `release`, `keep_alive` and `requeue_lost` work on `worker_id`, with the timing keakon's Queue
    took. A `Worker` runs it as any Queue, with timing of its own (`Worker(dequeue_timeout=...,
    keep_alive_timeout=...)`): a Worker never reads these two settings, nor touches `worker_id`.

    Args:
        name: As for `Queue`.
        conn: As for `Queue`.
        dequeue_timeout: Seconds `dequeue()` blocks waiting for a notification (default 1).
        keep_alive_timeout: Seconds the key `keep_alive()` refreshes lives (default 60); once it lapses,
            a sweeper requeues the task `worker_id` holds.
        max_task_size: As for `Queue`; so are the rest.
        dead_max: As for `Queue`.
        dead_max_age: As for `Queue`.
        wait_replicas: As for `Queue`.
        wait_timeout_ms: As for `Queue`.
        middleware: As for `Queue`.

    Attributes:
        worker_id (str | None): The id `dequeue()`, `release()` and `keep_alive()` use when given none
            (keakon's API): None until you set it.
        dequeue_timeout (float): As given; so is `keep_alive_timeout`.
    """

    def __init__(
        self,
        name: str,
        conn: redis.Redis,
        dequeue_timeout: float = DEFAULT_DEQUEUE_TIMEOUT,
        keep_alive_timeout: float = DEFAULT_KEEP_ALIVE_TIMEOUT,
        max_task_size: int = DEFAULT_MAX_TASK_SIZE,
        dead_max: int = DEFAULT_DEAD_MAX,
        dead_max_age: float = DEFAULT_DEAD_MAX_AGE,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
        middleware: Sequence[Middleware] = (),
    ) -> None:
        super().__init__(name, conn, max_task_size, dead_max, dead_max_age, wait_replicas, wait_timeout_ms,
                         middleware)
        self.dequeue_timeout = dequeue_timeout
        self.keep_alive_timeout = keep_alive_timeout
        self.worker_id: Optional[str] = None

    def dequeue(self) -> Optional[PyTask]:
        """Wait for a task and hold it as `worker_id`'s (keakon/delayed 1.x's worker API).

        Waits up to `dequeue_timeout` seconds. If `worker_id` already holds a task (the reply to the last
        call was lost), that task comes back.

        Returns:
            The task, or None if none came.

        Raises:
            MalformedTaskError: The blob is not a PyTask (`reason` says why).
            ValueError: `worker_id` is not set.
        """
        blob = self._ops.claim(self._own_id(None), self.dequeue_timeout)  # no notification is lost to a ValueError
        return None if blob is None else PyTask.deserialize(blob)

    def release(self, worker_id: Optional[str] = None) -> None:
        """Forget the task the worker holds: it is done, and counted (keakon/delayed 1.x's worker API).

        A tracked task's record gets no result this way.

        Args:
            worker_id: The worker's id; default: `worker_id`.
        """
        self._ops.release(self._own_id(worker_id))

    def keep_alive(self, worker_ids: Optional[Sequence[str]] = None) -> None:
        """Refresh workers' keep-alive keys, for `keep_alive_timeout` seconds (keakon/delayed 1.x's worker API).

        Args:
            worker_ids: The ids; default: `worker_id`.
        """
        self._ops.keep_alive(worker_ids or (self._own_id(None),))

    def requeue_lost(self, max_crashes: int = DEFAULT_MAX_CRASHES, notify_after: float = NOTIFY_AFTER) -> int:
        """One sweep: requeue the tasks of dead workers and top up missing notifications (go-delayed's requeue-lost).

        See `SweeperOps.sweep`, which this calls.

        Args:
            max_crashes: Dead-letter a task once our workers died holding it more often than this (default
                3; 0: never).
            notify_after: Seconds the queue's head must stand still, short of notifications, before the
                sweep tops them up (default 1).

        Returns:
            The notifications pushed (one per task requeued, and the missing ones).
        """
        return SweeperOps(self).requeue_lost(max_crashes, notify_after)

    def _own_id(self, worker_id: Optional[str]) -> str:
        """worker_id, else the queue's; a worker call with neither is a bug, said plainly."""
        chosen = worker_id or self.worker_id
        if chosen is None:
            raise ValueError("no worker id: pass one, or set queue.worker_id")
        return chosen

    @cached_property
    def _ops(self) -> WorkerOps:
        return WorkerOps(self, self.keep_alive_timeout)
