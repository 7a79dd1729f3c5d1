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
from ..wire.task import PyTask
from .base import QueueBase, queue_keys
from .connection import sent_once_async
from .handles import AsyncTaskHandle, TaskHandle
from .producer import (CANCEL, DEFAULT_MAX_TASK_SIZE, ENQUEUE, ENQUEUE_TRACKED, ENQUEUE_UNIQUE, Task, blobs_of,
                       check_unique, due_time, refused_when_full, stage_enqueue, task_info_of, tracked_call,
                       unique_call)
from .scripts import BoundScript, Script
from .sweeper_ops import DEFAULT_MAX_CRASHES, NOTIFY_AFTER, SweeperOps
from .worker_ops import WorkerOps

MOVE_DUE = Script("move_due")


class Queue(QueueBase):
    """A go-delayed queue on a redis-py connection (drop-in for keakon/delayed 1.x's Queue).

    name: on a Redis Cluster, it must carry a hash tag ("{orders}"), so that all the queue's keys
    live in one slot (ValueError otherwise).
    conn: a redis.Redis (any pool: Sentinel, TLS, your own) or a RedisCluster. The queue sends its commands on
    conn's connection pool, each exactly once: redis-py's retries would resend a command whose
    reply was lost and enqueue a task twice (see connection.sent_once); conn itself is left as
    it is. self.conn is the client the queue uses. A call that raises ConnectionError or
    TimeoutError may or may not have been applied.

    dequeue_timeout: seconds a worker blocks waiting for a notification.
    keep_alive_timeout: seconds a worker's keep-alive key lives without a refresh.
    dead_max, dead_max_age: the dead letters' retention, applied as this queue writes one: the
    oldest past dead_max letters, and those older than dead_max_age seconds, are trimmed (whole
    stream nodes at a time, so a few more may stay); 0 turns a bound off.
    worker_id: the id keakon's dequeue()/release() and the keep-alive methods use when given
    none; set it yourself for that API. A Worker never touches it: its ids are its own.
    wait_replicas: after each enqueue, wait (Redis's WAIT) until this many replicas have it, up to
    wait_timeout_ms, and raise NotReplicatedError if fewer did (the task is on the primary all the
    same). 0 (the default): return once the primary has it; a failover may lose the last writes the
    primary acknowledged but had not yet sent to its replica.
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
                result_ttl: None = None) -> None: ...

    @overload
    def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                result_ttl: float) -> TaskHandle: ...

    def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                result_ttl: Optional[float] = None) -> Optional[TaskHandle]:
        """Append a task: its blob and its notification in one atomic command. Returns None, or,
        tracked, its TaskHandle.

        delay (seconds) or at (a datetime): hold it in the scheduled set until then; workers
        and sweepers move it into the queue when it is due.
        unique_for (seconds): refuse, with DuplicateTaskError, an identical task (or one with the
        same unique_key) while this one is queued or running; the lock goes when it finishes
        or after unique_for seconds, whichever comes first.
        result_ttl (seconds): track the task (a PyTask): its status and result are kept until
        result_ttl seconds after it ended (see delayed.wire.tracking). Its blob carries an id option,
        which keakon/delayed 1.x cannot read; an untracked task's blob is unchanged.
        """
        if unique_for is not None:
            return self._enqueue_unique(task, delay, at, unique_for, unique_key, result_ttl)
        if result_ttl is not None:
            return self.enqueue_many((task,), delay, at, result_ttl=result_ttl)[0]
        blobs = blobs_of((task,), self.max_task_size)
        due = due_time(delay, at)
        with refused_when_full(self.name):
            if due is None:
                self._enqueue(blobs=blobs)
            else:
                with self.conn.pipeline(transaction=True) as pipe:
                    stage_enqueue(pipe, self.keys, blobs, due)
                    pipe.execute()
        self._replicated()
        return None

    def _enqueue_unique(self, task: Task, delay: Optional[float], at: Optional[datetime.datetime],
                        unique_for: float, unique_key: Optional[str],
                        result_ttl: Optional[float]) -> Optional[TaskHandle]:
        track = None if result_ttl is None else (tracking.new_id(), tracking.ttl_seconds(result_ttl))
        call = unique_call(self.keys, task, delay, at, unique_for, unique_key, self.max_task_size, track)
        with refused_when_full(self.name):
            reply = self._enqueue_unique_script(**call)
        check_unique(reply, call)
        self._replicated()
        return None if track is None else TaskHandle(self, track[0])

    @overload
    def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                     at: Optional[datetime.datetime] = None, *, result_ttl: None = None) -> int: ...

    @overload
    def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                     at: Optional[datetime.datetime] = None, *, result_ttl: float) -> List[TaskHandle]: ...

    def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                     at: Optional[datetime.datetime] = None, *,
                     result_ttl: Optional[float] = None) -> Union[int, List[TaskHandle]]:
        """Append many tasks in one atomic round trip (or schedule them, as enqueue); returns how
        many, or, tracked (result_ttl, as enqueue), their TaskHandles in order."""
        if result_ttl is not None:
            ttl = tracking.ttl_seconds(result_ttl)
            ids, call = tracked_call(self.keys, tasks, due_time(delay, at), ttl, self.max_task_size)
            if ids:
                with refused_when_full(self.name):
                    self._enqueue_tracked(**call)
                self._replicated()
            return [TaskHandle(self, task_id) for task_id in ids]
        blobs = blobs_of(tasks, self.max_task_size)
        due = due_time(delay, at)
        if blobs:
            with refused_when_full(self.name), self.conn.pipeline(transaction=True) as pipe:
                stage_enqueue(pipe, self.keys, blobs, due)
                pipe.execute()
            self._replicated()
        return len(blobs)

    # Tracked tasks

    def task(self, task_id: str) -> TaskHandle:
        """The handle of a tracked task of this queue, by id (nothing is read until it is asked)."""
        return TaskHandle(self, task_id)

    def task_info(self, task_id: str) -> TaskInfo:
        """A tracked task's record, read now; TaskNotFoundError if there is none."""
        with self.conn.pipeline(transaction=True) as pipe:
            pipe.hgetall(self.keys.task(task_id))
            pipe.ttl(self.keys.task(task_id))
            fields, ttl = pipe.execute()
        return task_info_of(self.keys, task_id, fields, ttl)

    def cancel(self, task_id: str) -> Cancel:
        """Remove a tracked task that waits (scheduled, pending or retrying) before it runs, with its
        notification, and end its record as cancelled. A running task is not interrupted: like one
        that ended, or one a worker is taking right now, it is not cancelled (false, and says why).
        TaskNotFoundError if there is no record of it."""
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
        """Tasks waiting in the queue (not counting those being processed)."""
        return self.conn.llen(self.keys.name)

    def pause(self) -> bool:
        """Pause the queue: our workers take no new task from it (a task already claimed still runs;
        go-delayed's workers do not know about pausing). False if it was paused already."""
        return bool(self.conn.set(self.keys.paused, int(time.time()), nx=True))

    def resume(self) -> bool:
        """Resume a paused queue; False if it was not paused."""
        return bool(self.conn.delete(self.keys.paused))

    def paused_since(self) -> Optional[float]:
        """The unix time the queue was paused, or None if it is not paused."""
        since = self.conn.get(self.keys.paused)
        return None if since is None else float(since)

    def move_due(self, limit: int = 1000) -> int:
        """Move up to limit scheduled tasks that are due into the queue; returns how many moved."""
        return self._move_due(now=time.time(), limit=limit)

    # keakon/delayed 1.x's worker and sweeper calls, on queue.worker_id

    def dequeue(self) -> Optional[PyTask]:
        """Wait for a task and hold it as queue.worker_id's, decoded as a PyTask (keakon/delayed's API);
        raises MalformedTaskError for bad blobs."""
        blob = self._ops.claim()
        return None if blob is None else PyTask.deserialize(blob)

    def release(self, worker_id: Optional[str] = None) -> None:
        """Forget the task the worker (default: queue.worker_id) holds: it is done (and counted)."""
        self._ops.release(worker_id)

    def keep_alive(self, worker_ids: Optional[Sequence[str]] = None) -> None:
        """Refresh the keep-alive keys of worker_ids (default: queue.worker_id)."""
        self._ops.keep_alive(worker_ids)

    def requeue_lost(self, max_crashes: int = DEFAULT_MAX_CRASHES, notify_after: float = NOTIFY_AFTER) -> int:
        """A sweep (SweeperOps.sweep), returning the notifications pushed, as go-delayed's requeue-lost does."""
        return SweeperOps(self).requeue_lost(max_crashes, notify_after)

    @cached_property
    def _ops(self) -> WorkerOps:
        return WorkerOps(self)


class AsyncQueue:
    """The producer side of Queue for asyncio code, on a redis.asyncio connection, whose
    commands it sends exactly once, as Queue does."""

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
                      result_ttl: None = None) -> None: ...

    @overload
    async def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                      unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                      result_ttl: float) -> AsyncTaskHandle: ...

    async def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                      unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                      result_ttl: Optional[float] = None) -> Optional[AsyncTaskHandle]:
        """Append a task (or schedule it, or refuse a duplicate, or track it), as Queue.enqueue."""
        if unique_for is not None:
            track = None if result_ttl is None else (tracking.new_id(), tracking.ttl_seconds(result_ttl))
            call = unique_call(self.keys, task, delay, at, unique_for, unique_key, self.max_task_size, track)
            with refused_when_full(self.name):
                reply = await self._enqueue_unique(**call)
            check_unique(reply, call)
            return None if track is None else AsyncTaskHandle(self, track[0])
        if result_ttl is not None:
            return (await self.enqueue_many((task,), delay, at, result_ttl=result_ttl))[0]
        blobs = blobs_of((task,), self.max_task_size)
        due = due_time(delay, at)
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
                           at: Optional[datetime.datetime] = None, *, result_ttl: None = None) -> int: ...

    @overload
    async def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                           at: Optional[datetime.datetime] = None, *,
                           result_ttl: float) -> List[AsyncTaskHandle]: ...

    async def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                           at: Optional[datetime.datetime] = None, *,
                           result_ttl: Optional[float] = None) -> Union[int, List[AsyncTaskHandle]]:
        """Append many tasks in one atomic round trip (or schedule or track them), as Queue.enqueue_many."""
        if result_ttl is not None:
            ttl = tracking.ttl_seconds(result_ttl)
            ids, call = tracked_call(self.keys, tasks, due_time(delay, at), ttl, self.max_task_size)
            if ids:
                with refused_when_full(self.name):
                    await self._enqueue_tracked(**call)
            return [AsyncTaskHandle(self, task_id) for task_id in ids]
        blobs = blobs_of(tasks, self.max_task_size)
        due = due_time(delay, at)
        if blobs:
            with refused_when_full(self.name):
                async with self.conn.pipeline(transaction=True) as pipe:
                    stage_enqueue(pipe, self.keys, blobs, due)
                    await pipe.execute()
        return len(blobs)

    def task(self, task_id: str) -> AsyncTaskHandle:
        """The handle of a tracked task of this queue, by id, as Queue.task."""
        return AsyncTaskHandle(self, task_id)

    async def task_info(self, task_id: str) -> TaskInfo:
        """A tracked task's record, as Queue.task_info."""
        async with self.conn.pipeline(transaction=True) as pipe:
            pipe.hgetall(self.keys.task(task_id))
            pipe.ttl(self.keys.task(task_id))
            fields, ttl = await pipe.execute()
        return task_info_of(self.keys, task_id, fields, ttl)

    async def cancel(self, task_id: str) -> Cancel:
        """Cancel a tracked task that waits, as Queue.cancel."""
        outcome, status = await self._cancel(record=self.keys.task(task_id))
        if outcome == b"missing":
            task_info_of(self.keys, task_id, {}, -2)
        return tracking.cancel_outcome(task_id, self.name, outcome.decode(), status.decode())

    async def len(self) -> int:
        return await self.conn.llen(self.keys.name)
