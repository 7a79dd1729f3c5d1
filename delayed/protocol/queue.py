"""Queue, the producer's face (and keakon/delayed 1.x's Queue), and AsyncQueue, its asyncio twin:
enqueue, track, cancel, pause. The operations of workers, sweepers and operators are objects of
their own: WorkerOps, SweeperOps and DeadLetters (queue.dead)."""
import datetime
import time
from functools import cached_property
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union, overload

import redis
import redis.asyncio

from ..errors import NotReplicatedError
from ..wire import tracking
from ..wire.tracking import Cancel, TaskInfo
from ..wire.options import TaskOptions
from ..wire.task import PyTask
from .base import QueueBase, queue_keys
from .send_once import sent_once_async
from .handles import AsyncTaskHandle, TaskHandle
from .producer import (CANCEL, DEFAULT_MAX_TASK_SIZE, ENQUEUE, ENQUEUE_TRACKED, ENQUEUE_UNIQUE, Task, batch_of,
                       blobs_of, check_unique, due_time, refused_when_full, stage_enqueue, task_info_of,
                       tracked_call, unique_call, with_given)
from .scripts import BoundScript, Script
from .sweeper_ops import DEFAULT_MAX_CRASHES, NOTIFY_AFTER, SweeperOps
from .worker_ops import WorkerOps

MOVE_DUE = Script("move_due")


class Queue(QueueBase):
    """A go-delayed queue on a redis-py connection; a drop-in for keakon/delayed 1.x's Queue.

    A Queue enqueues tasks (at once, later, unique or tracked), reads and cancels tracked tasks, and
    pauses and resumes the queue for our workers. Python and go-delayed producers, workers and
    sweepers share its keys. keakon/delayed 1.x's worker and sweeper calls are still here (`dequeue`,
    `release`, `keep_alive`, `requeue_lost`), on `worker_id`.

    Each command is sent exactly once: the queue sends its commands on `conn`'s own connection pools
    with redis-py's retries off, since a retry would resend a command whose reply was lost and could
    enqueue a task twice; `conn` itself is left as it is, and keeps its retries for your own commands.
    A `RedisCluster` still follows `MOVED`, `ASK` and `TRYAGAIN` (the node applied nothing), inside
    transactions too. A call that raises `ConnectionError` or `TimeoutError` may or may not have been
    applied.

    Args:
        name: The queue's name. On a Redis Cluster it must carry a hash tag (`"{orders}"`), so that
            all the queue's keys live in one slot.
        conn: A `redis.Redis` on any pool (Sentinel, TLS, `connection_pool=...`), or a
            `redis.cluster.RedisCluster`; `connect()` gives one for `$DELAYED_REDIS_URL`.
        dequeue_timeout: Seconds a worker blocks waiting for a notification.
        keep_alive_timeout: Seconds a worker's keep-alive key lives without a refresh; once it lapses,
            a sweeper requeues the worker's tasks.
        max_task_size: The largest task blob, in bytes (default 1 MiB): a larger one is refused at
            enqueue (`TaskTooLargeError`) and dead-lettered when a worker finds one in the queue.
        dead_max: Dead letters kept (default 10,000): as the queue writes one, the oldest past this
            many are trimmed. 0 turns the bound off.
        dead_max_age: Seconds a dead letter is kept (default 7 days): as the queue writes one, those
            older are trimmed. 0 turns the bound off. Both bounds trim whole stream nodes at a time,
            so a few more letters may stay (see `--dead-max`).
        wait_replicas: After each enqueue, wait (Redis's `WAIT`) until this many replicas have it, up
            to `wait_timeout_ms`, and raise `NotReplicatedError` if fewer did (the task is on the
            primary all the same). 0 (the default): return once the primary has it; a failover may
            then lose the last writes the primary acknowledged but had not yet sent to its replica.
        wait_timeout_ms: How long an enqueue waits for `wait_replicas` replicas, in milliseconds.

    Raises:
        ValueError: A name no queue can have: empty, one of another queue's keys (`a_noti`), or, on
            a Redis Cluster, without a hash tag.

    Attributes:
        name (str): The queue's name.
        conn: The client the queue sends its commands through, each once (on `conn`'s pools).
        keys (delayed.wire.keys.QueueKeys): The names of the queue's Redis keys (`keys.name`,
            `keys.dead_letters`, ...).
        dead (DeadLetters): The queue's dead letters: list, show, requeue, delete, purge.
        worker_id (str | None): The id `dequeue()`, `release()` and `keep_alive()` use when given none
            (keakon's API): None until you set it. A `Worker` never touches it: its ids are its own.
        slot (int): The Redis Cluster hash slot of the queue's keys.
        max_task_size (int): As given; so are `dequeue_timeout`, `keep_alive_timeout`, `wait_replicas`
            and `wait_timeout_ms`.

    Example:
        ```python
        from delayed import PyTask, Queue, connect

        queue = Queue("default", connect())
        queue.enqueue(PyTask("tasks:add", [1, 2]))
        ```
    """

    # the scripts a producer runs, each bound on first use (QueueBase takes the arguments)

    @cached_property
    def _enqueue(self) -> BoundScript:
        return ENQUEUE.bind(self.conn, self.keys)

    @cached_property
    def _enqueue_unique_script(self) -> BoundScript:
        return ENQUEUE_UNIQUE.bind(self.conn, self.keys)

    @cached_property
    def _enqueue_tracked(self) -> BoundScript:
        return ENQUEUE_TRACKED.bind(self.conn, self.keys)

    @cached_property
    def _cancel(self) -> BoundScript:
        return CANCEL.bind(self.conn, self.keys)

    @cached_property
    def _move_due(self) -> BoundScript:
        return MOVE_DUE.bind(self.conn, self.keys)

    # Producers

    @overload
    def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                result_ttl: None = None, **options: Any) -> Optional[TaskHandle]: ...

    @overload
    def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                result_ttl: float, **options: Any) -> TaskHandle: ...

    def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                result_ttl: Optional[float] = None, **options: Any) -> Optional[TaskHandle]:
        """Enqueue a task: its blob and its notification go into the queue in one atomic command.

        With `delay` or `at`, the task waits in the queue's scheduled set until it is due; workers and
        sweepers move due tasks into the queue twice a second. Due times come from this host's clock. A
        delay of 0, or a time already past, enqueues at once.

        Args:
            task: A `PyTask` or a `GoTask`.
            delay: Seconds to wait before the task is due.
            at: When the task is due (a naive datetime is local time). Give `delay` or `at`, not both.
            unique_for: Refuse, with `DuplicateTaskError`, an identical task (same function, arguments and
                options) while this one is queued, waiting for a retry, or running. The lock goes when a
                worker finishes the task or dead-letters it (not between retries), and in any case after
                `unique_for` seconds, so a lost worker cannot hold it forever. PyTasks only.
            unique_key: With `unique_for`: every task with this key (`"report:2026-11"`) is a duplicate,
                whatever its function and arguments.
            result_ttl: Track the task (a PyTask): its status and result are kept until `result_ttl`
                seconds (rounded up) after it ended, and the call returns its handle. Its blob carries an
                id option, which keakon/delayed 1.x cannot read; an untracked task's blob is unchanged.
                With `unique_for` too, the lock is the untracked task's digest.
            **options: Any other option `TaskOptions` takes, by name (`max_retries=5`, `time_limit=30`).
                Every option given here wins over the task's own (`PyTask(..., delay=10)`), which apply
                too.

        Returns:
            None; with `result_ttl` (given here or the task's), the task's `TaskHandle`.

        Raises:
            TaskTooLargeError: The blob is over `max_task_size`; nothing was written.
            TaskArgumentError: An argument msgpack cannot write (an object, a datetime, an int past 64
                bits); nothing was written.
            DuplicateTaskError: With `unique_for`: the lock is held by an identical task (or one with the
                same `unique_key`).
            QueueFullError: Redis refused the write for want of memory; nothing was written.
            NotReplicatedError: With `wait_replicas`: fewer replicas acknowledged the task in time (it is
                on the primary).
            ValueError: An option's value it cannot take (both `delay` and `at`; NaN, infinite, negative or
                over ten years), naming the option. Nothing was written.
            TypeError: An unknown option; `unique_for` or `result_ttl` with a GoTask: a go-delayed worker
                would never release the lock or write the record.
        """
        task, chosen = with_given(task, delay=delay, at=at, unique_for=unique_for, unique_key=unique_key,
                                  result_ttl=result_ttl, **options)
        if chosen.unique_for is not None:
            return self._enqueue_unique(task, chosen)
        if chosen.result_ttl is not None:
            return self._enqueue_tracked_batch([task], chosen)[0]
        blobs = blobs_of((task,), self.max_task_size)
        due = due_time(chosen)
        with refused_when_full(self.name):
            if due is None:
                self._enqueue(blobs=blobs)
            else:
                with self.conn.pipeline(transaction=True) as pipe:
                    stage_enqueue(pipe, self.keys, blobs, due)
                    pipe.execute()
        self._replicated()
        return None

    def _enqueue_unique(self, task: Task, options: TaskOptions) -> Optional[TaskHandle]:
        track = None if options.result_ttl is None else (tracking.new_id(), tracking.ttl_seconds(options.result_ttl))
        call = unique_call(self.keys, task, options, self.max_task_size, track)
        with refused_when_full(self.name):
            reply = self._enqueue_unique_script(**call)
        check_unique(reply, call)
        self._replicated()
        return None if track is None else TaskHandle(self, track[0])

    @overload
    def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                     at: Optional[datetime.datetime] = None, *, result_ttl: None = None, **options: Any) -> int: ...

    @overload
    def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                     at: Optional[datetime.datetime] = None, *, result_ttl: float,
                     **options: Any) -> List[TaskHandle]: ...

    def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                     at: Optional[datetime.datetime] = None, *,
                     result_ttl: Optional[float] = None, **options: Any) -> Union[int, List[TaskHandle]]:
        """Enqueue many tasks in one atomic round trip: all of them, or none.

        Args:
            tasks: PyTasks and GoTasks.
            delay: Seconds to wait before they are due, as for `enqueue`.
            at: When they are due, as for `enqueue`.
            result_ttl: Track each task (PyTasks only), as for `enqueue`.
            **options: Other options by name, as for `enqueue`. The tasks' own options apply too, but
                a batch goes in with one `delay`, `at` and `result_ttl`, and no `unique_for`.

        Returns:
            How many tasks were enqueued; with `result_ttl`, their `TaskHandle`s, in order.

        Raises:
            TaskTooLargeError: A blob is over `max_task_size`; nothing was written.
            TaskArgumentError: An argument msgpack cannot write; nothing was written.
            QueueFullError: Redis refused the write for want of memory; nothing was written.
            NotReplicatedError: With `wait_replicas`: fewer replicas acknowledged the tasks in time.
            ValueError: As for `enqueue`; tasks whose own `delay`, `at` or `result_ttl` differ.
            TypeError: `result_ttl` with a GoTask among the tasks; a task with `unique_for`.
        """
        return self._enqueue_batch(*batch_of(tasks, delay=delay, at=at, result_ttl=result_ttl, **options))

    def _enqueue_batch(self, written: List[Task], chosen: TaskOptions) -> Union[int, List[TaskHandle]]:
        """Enqueue tasks as written, with the options that say how (see producer.batch_of)."""
        if chosen.result_ttl is not None:
            return self._enqueue_tracked_batch(written, chosen)
        blobs = blobs_of(written, self.max_task_size)
        if blobs:
            with refused_when_full(self.name), self.conn.pipeline(transaction=True) as pipe:
                stage_enqueue(pipe, self.keys, blobs, due_time(chosen))
                pipe.execute()
            self._replicated()
        return len(blobs)

    def _enqueue_tracked_batch(self, written: List[Task], chosen: TaskOptions) -> List[TaskHandle]:
        ttl = tracking.ttl_seconds(chosen.result_ttl or 0)
        ids, call = tracked_call(self.keys, written, due_time(chosen), ttl, self.max_task_size)
        if ids:
            with refused_when_full(self.name):
                self._enqueue_tracked(**call)
            self._replicated()
        return [TaskHandle(self, task_id) for task_id in ids]

    # Tracked tasks

    def task(self, task_id: str) -> TaskHandle:
        """The handle of a tracked task of this queue, by its id; nothing is read until you ask.

        Args:
            task_id: The id a `TaskHandle` had (`handle.id`): 32 hex digits.

        Returns:
            Its handle.
        """
        return TaskHandle(self, task_id)

    def task_info(self, task_id: str) -> TaskInfo:
        """A tracked task's record, read now.

        Args:
            task_id: The task's id.

        Returns:
            Its status and what goes with it.

        Raises:
            TaskNotFoundError: No record of it: never tracked (enqueued without `result_ttl`), or expired.
        """
        with self.conn.pipeline(transaction=True) as pipe:
            pipe.hgetall(self.keys.task(task_id))
            pipe.ttl(self.keys.task(task_id))
            fields, ttl = pipe.execute()
        return task_info_of(self.keys, task_id, fields, ttl)

    def cancel(self, task_id: str) -> Cancel:
        """Cancel a tracked task that waits: remove it before it runs, and end its record as cancelled.

        A task that is `scheduled`, `pending` or `retrying` is removed (from the queue with one
        notification, or from the scheduled set), in one script. A running task is not interrupted: like
        one that already ended, or one a worker is taking right now ("being taken by a worker: too late to
        cancel"), it is not cancelled. Cancelling searches the queue for the task (`LPOS`, then `LREM`):
        Redis's time grows with the queue's length, and it serves nothing else meanwhile: tens of
        milliseconds for the last task of a queue of a million (measured on a 2-core machine, 2026-11-25).

        Args:
            task_id: The task's id.

        Returns:
            What it did: true if cancelled, with the status the task had and why, in a line.

        Raises:
            TaskNotFoundError: No record of the task.
        """
        outcome, status = self._cancel(record=self.keys.task(task_id))
        if outcome == b"missing":
            task_info_of(self.keys, task_id, {}, -2)
        return tracking.cancel_outcome(task_id, self.name, outcome.decode(), status.decode())

    def _replicated(self) -> None:
        """With wait_replicas, wait until that many replicas have every write made so far; else raise.

        WAIT covers the writes sent on its own connection, and the enqueue may have used another
        pooled one: so one round trip writes first (adding 0 to the "enqueued" count, which Redis
        replicates like any write) and then WAITs. The replication stream is one ordered log, so a
        replica that has this write has the enqueue before it. In a cluster both go to the queue's node.
        """
        if not self.wait_replicas:
            return
        on_node: Dict[str, Any] = {}
        if hasattr(self.conn, "get_node_from_key"):  # a RedisCluster: WAIT names no key to route by
            on_node["target_nodes"] = self.conn.get_node_from_key(self.keys.counts)
        with self.conn.pipeline(transaction=False) as pipe:
            pipe.hincrby(self.keys.counts, "enqueued", 0)
            pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout_ms, **on_node)
            acknowledged = int(pipe.execute()[-1])
        if acknowledged < self.wait_replicas:
            raise NotReplicatedError(
                f"{self.name}: {acknowledged} of {self.wait_replicas} replicas acknowledged the enqueue within "
                f"{self.wait_timeout_ms} ms; it is on the primary, and a failover now could lose it", acknowledged)

    def len(self) -> int:
        """The number of tasks waiting in the queue, not counting those being processed or scheduled."""
        return self.conn.llen(self.keys.name)

    def pause(self) -> bool:
        """Pause the queue: our workers take no new task from it.

        A task a worker already claimed still runs. go-delayed's workers do not know about pausing.

        Returns:
            True; False if the queue was paused already.
        """
        return bool(self.conn.set(self.keys.paused, int(time.time()), nx=True))

    def resume(self) -> bool:
        """Resume a paused queue.

        Returns:
            True; False if the queue was not paused.
        """
        return bool(self.conn.delete(self.keys.paused))

    def paused_since(self) -> Optional[float]:
        """When the queue was paused.

        Returns:
            The unix time it was paused, or None if it is not paused.
        """
        since = self.conn.get(self.keys.paused)
        return None if since is None else float(since)

    def move_due(self, limit: int = 1000) -> int:
        """Move scheduled tasks that are due into the queue, with their notifications, in one script.

        Workers and sweepers call this twice a second; you need it only without either.

        Args:
            limit: The most tasks to move.

        Returns:
            How many moved.
        """
        return self._move_due(now=time.time(), limit=limit)

    # keakon/delayed 1.x's worker and sweeper calls, on queue.worker_id

    def dequeue(self) -> Optional[PyTask]:
        """Wait for a task and hold it as `queue.worker_id`'s (keakon/delayed 1.x's worker API).

        Waits up to `dequeue_timeout` seconds. If `worker_id` already holds a task (the reply to the last
        call was lost), that task comes back.

        Returns:
            The task, or None if none came.

        Raises:
            MalformedTaskError: The blob is not a PyTask (`reason` says why).
            ValueError: `queue.worker_id` is not set.
        """
        blob = self._ops.claim()
        return None if blob is None else PyTask.deserialize(blob)

    def release(self, worker_id: Optional[str] = None) -> None:
        """Forget the task the worker holds: it is done, and counted (keakon/delayed 1.x's worker API).

        A tracked task's record gets no result this way.

        Args:
            worker_id: The worker's id; default: `queue.worker_id`.
        """
        self._ops.release(worker_id)

    def keep_alive(self, worker_ids: Optional[Sequence[str]] = None) -> None:
        """Refresh workers' keep-alive keys (keakon/delayed 1.x's worker API).

        Args:
            worker_ids: The ids; default: `queue.worker_id`.
        """
        self._ops.keep_alive(worker_ids)

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

    @cached_property
    def _ops(self) -> WorkerOps:
        return WorkerOps(self)


class AsyncQueue:
    """The producer's side of `Queue` for asyncio code, on a `redis.asyncio` connection.

    It enqueues (at once, later, unique or tracked), reads and cancels tracked tasks, as `Queue` does,
    with coroutines. Each command is sent exactly once, as for `Queue`: the queue uses `conn`'s pools
    with redis-py's retries off. A `redis.asyncio` `RedisCluster` retries outside its pools, so it must
    be created without retries: `retry=Retry(NoBackoff(), 0)`.

    Args:
        name: The queue's name (on a Redis Cluster, with a hash tag: `"{orders}"`).
        conn: A `redis.asyncio.Redis`, or a `redis.asyncio.cluster.RedisCluster` created with
            `retry=Retry(NoBackoff(), 0)`; `connect_async()` gives one for `$DELAYED_REDIS_URL`.
        max_task_size: The largest task blob, in bytes (default 1 MiB); a larger one is refused.

    Raises:
        ValueError: A name no queue can have (as for `Queue`).
        TypeError: A `RedisCluster` that would resend a command whose reply was lost.

    Attributes:
        name (str): The queue's name.
        conn: The client the queue sends its commands through.
        keys (delayed.wire.keys.QueueKeys): The names of the queue's Redis keys.
        max_task_size (int): As given.

    Example:
        ```python
        from delayed import AsyncQueue, PyTask, connect_async

        queue = AsyncQueue("default", connect_async())
        handle = await queue.enqueue(PyTask("tasks:add", [1, 2]), result_ttl=3600)
        ```
    """

    def __init__(
        self, name: str, conn: redis.asyncio.Redis, max_task_size: int = DEFAULT_MAX_TASK_SIZE
    ) -> None:
        self.keys = queue_keys(name, conn)
        self.conn = sent_once_async(conn)
        self.max_task_size = max_task_size
        self._enqueue = ENQUEUE.bind(self.conn, self.keys)
        self._enqueue_unique = ENQUEUE_UNIQUE.bind(self.conn, self.keys)
        self._enqueue_tracked = ENQUEUE_TRACKED.bind(self.conn, self.keys)
        self._cancel = CANCEL.bind(self.conn, self.keys)

    @property
    def name(self) -> str:
        return self.keys.name

    @overload
    async def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                      unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                      result_ttl: None = None, **options: Any) -> Optional[AsyncTaskHandle]: ...

    @overload
    async def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                      unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                      result_ttl: float, **options: Any) -> AsyncTaskHandle: ...

    async def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                      unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                      result_ttl: Optional[float] = None, **options: Any) -> Optional[AsyncTaskHandle]:
        """Enqueue a task: at once, later, unique or tracked, as `Queue.enqueue`.

        Args:
            task: A `PyTask` or a `GoTask`.
            delay: Seconds to wait before the task is due.
            at: When the task is due (a naive datetime is local time).
            unique_for: Refuse an identical task while this one is queued, waiting for a retry, or
                running, for at most this many seconds (PyTasks only).
            unique_key: With `unique_for`: every task with this key is a duplicate.
            result_ttl: Track the task (a PyTask): its record is kept this many seconds after it ended.
            **options: Other options by name, as for `Queue.enqueue`.

        Returns:
            None; with `result_ttl`, the task's `AsyncTaskHandle`.

        Raises:
            TaskTooLargeError: The blob is over `max_task_size`; nothing was written.
            TaskArgumentError: An argument msgpack cannot write; nothing was written.
            DuplicateTaskError: With `unique_for`: the lock is held.
            QueueFullError: Redis refused the write for want of memory; nothing was written.
            ValueError: As for `Queue.enqueue`.
            TypeError: `unique_for` or `result_ttl` with a GoTask.
        """
        task, chosen = with_given(task, delay=delay, at=at, unique_for=unique_for, unique_key=unique_key,
                                  result_ttl=result_ttl, **options)
        if chosen.unique_for is not None:
            track = None if chosen.result_ttl is None else (tracking.new_id(), tracking.ttl_seconds(chosen.result_ttl))
            call = unique_call(self.keys, task, chosen, self.max_task_size, track)
            with refused_when_full(self.name):
                reply = await self._enqueue_unique(**call)
            check_unique(reply, call)
            return None if track is None else AsyncTaskHandle(self, track[0])
        if chosen.result_ttl is not None:
            return (await self._enqueue_tracked_batch([task], chosen))[0]
        blobs = blobs_of((task,), self.max_task_size)
        due = due_time(chosen)
        with refused_when_full(self.name):
            if due is None:
                await self._enqueue(blobs=blobs)
            else:
                async with self.conn.pipeline(transaction=True) as pipe:
                    stage_enqueue(pipe, self.keys, blobs, due)
                    await pipe.execute()
        return None

    @overload
    async def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                           at: Optional[datetime.datetime] = None, *, result_ttl: None = None, **options: Any) -> int: ...

    @overload
    async def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                           at: Optional[datetime.datetime] = None, *,
                           result_ttl: float, **options: Any) -> List[AsyncTaskHandle]: ...

    async def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                           at: Optional[datetime.datetime] = None, *,
                           result_ttl: Optional[float] = None,
                           **options: Any) -> Union[int, List[AsyncTaskHandle]]:
        """Enqueue many tasks in one atomic round trip, as `Queue.enqueue_many`.

        Args:
            tasks: PyTasks and GoTasks.
            delay: Seconds to wait before they are due.
            at: When they are due.
            result_ttl: Track each task (PyTasks only).
            **options: Other options by name, as for `Queue.enqueue_many`.

        Returns:
            How many tasks were enqueued; with `result_ttl`, their `AsyncTaskHandle`s, in order.

        Raises:
            TaskTooLargeError: A blob is over `max_task_size`; nothing was written.
            TaskArgumentError: An argument msgpack cannot write; nothing was written.
            QueueFullError: Redis refused the write for want of memory; nothing was written.
            ValueError: As for `Queue.enqueue`.
            TypeError: `result_ttl` with a GoTask among the tasks.
        """
        return await self._enqueue_batch(*batch_of(tasks, delay=delay, at=at, result_ttl=result_ttl, **options))

    async def _enqueue_batch(self, written: List[Task], chosen: TaskOptions) -> Union[int, List[AsyncTaskHandle]]:
        """Enqueue tasks as written, with the options that say how (see producer.batch_of)."""
        if chosen.result_ttl is not None:
            return await self._enqueue_tracked_batch(written, chosen)
        blobs = blobs_of(written, self.max_task_size)
        if blobs:
            with refused_when_full(self.name):
                async with self.conn.pipeline(transaction=True) as pipe:
                    stage_enqueue(pipe, self.keys, blobs, due_time(chosen))
                    await pipe.execute()
        return len(blobs)

    async def _enqueue_tracked_batch(self, written: List[Task], chosen: TaskOptions) -> List[AsyncTaskHandle]:
        ttl = tracking.ttl_seconds(chosen.result_ttl or 0)
        ids, call = tracked_call(self.keys, written, due_time(chosen), ttl, self.max_task_size)
        if ids:
            with refused_when_full(self.name):
                await self._enqueue_tracked(**call)
        return [AsyncTaskHandle(self, task_id) for task_id in ids]

    def task(self, task_id: str) -> AsyncTaskHandle:
        """The handle of a tracked task of this queue, by its id, as `Queue.task`.

        Args:
            task_id: The task's id.

        Returns:
            Its handle.
        """
        return AsyncTaskHandle(self, task_id)

    async def task_info(self, task_id: str) -> TaskInfo:
        """A tracked task's record, read now, as `Queue.task_info`.

        Args:
            task_id: The task's id.

        Returns:
            Its status and what goes with it.

        Raises:
            TaskNotFoundError: No record of it: never tracked, or expired.
        """
        async with self.conn.pipeline(transaction=True) as pipe:
            pipe.hgetall(self.keys.task(task_id))
            pipe.ttl(self.keys.task(task_id))
            fields, ttl = await pipe.execute()
        return task_info_of(self.keys, task_id, fields, ttl)

    async def cancel(self, task_id: str) -> Cancel:
        """Cancel a tracked task that waits, as `Queue.cancel`; a running task is not interrupted.

        Args:
            task_id: The task's id.

        Returns:
            What it did: true if cancelled, with the status the task had and why.

        Raises:
            TaskNotFoundError: No record of the task.
        """
        outcome, status = await self._cancel(record=self.keys.task(task_id))
        if outcome == b"missing":
            task_info_of(self.keys, task_id, {}, -2)
        return tracking.cancel_outcome(task_id, self.name, outcome.decode(), status.decode())

    async def len(self) -> int:
        """The number of tasks waiting in the queue, not counting those being processed or scheduled."""
        return await self.conn.llen(self.keys.name)
