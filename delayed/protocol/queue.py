"""Queue operations on Redis: every command a producer, worker or sweeper sends lives here
(the scheduler's tick is in delayed.scheduler, the operators' reads in admin.py)."""
import contextlib
import datetime
import hashlib
import math
import os
import time
from dataclasses import dataclass
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union, cast,
                    overload)

import redis
import redis.asyncio
from redis.crc import key_slot

from ..wire import dead_letter, record as tracking
from . import scripts
from .connection import is_cluster, sent_once, sent_once_async
from ..errors import (DeadLetterError, DuplicateTaskError, MalformedTaskError, NotReplicatedError, QueueFullError,
                      TaskNotFoundError, TaskTooLargeError, message_of)
from ..wire.keys import WORKER_ID_PREFIX, QueueKeys, check_cluster_name
from ..wire.task import CRASHES_OPTION, ID_OPTION, GoTask, PyTask
from ..wire.record import Cancel, TaskInfo, Tracked
from .handles import AsyncTaskHandle, TaskHandle

Task = Union[PyTask, GoTask]

DEFAULT_MAX_TASK_SIZE = 1024 * 1024
"""Bytes; larger blobs are refused at enqueue and dead-lettered when found in a queue."""

NOTIFICATION = b"1"

DEFAULT_MAX_CRASHES = 3
"""A task is dead-lettered when its workers die holding it more often than this."""
NOTIFY_AFTER = 1.0
"""Seconds the head of a queue short of notifications must stand still before a sweep tops them up."""
SWEEP_CHUNK = 100
"""Holders one sweep script looks at, and crashed tasks one requeues: each call stays well under a
millisecond of Redis's time, however many workers died."""
NOTIFY_CHUNK = 5000
"""Notifications one sweep script pushes at most (the sweep calls it again while some are missing)."""
DEFAULT_DEAD_MAX = 10_000
"""Dead letters kept: writing one trims the oldest past this many (0: no bound)."""
DEFAULT_DEAD_MAX_AGE = 7 * 24 * 3600
"""Seconds a dead letter is kept: writing one trims those older (0: no bound)."""
REQUEUE_CHUNK_LETTERS = 500
REQUEUE_CHUNK_BYTES = 512 * 1024
"""The most letters, and task bytes, one call of `requeue_all_dead` moves: a few ms of Redis's time."""
MIGRATE_CHUNK = 32
"""Entries of an old dead-letter list moved into the stream per round trip."""


@dataclass(frozen=True)
class Claimed:
    """What a claim_batch round trip gave: whether the queue is paused, and (worker id, blob) pairs."""

    paused: bool
    tasks: List[Tuple[str, bytes]]


@dataclass(frozen=True)
class CrashLoop:
    """A task one of our workers died holding that a sweep dead-lettered: one its workers died holding
    more than max_crashes times (reason "crash_loop"), or one that cannot count its crashes, not being
    a PyTask (the reason a worker would have given it: "malformed", "go_task"). buried is False if
    another sweeper took it first."""

    worker_id: str
    blob: bytes
    crashes: int
    buried: bool
    reason: str = "crash_loop"


@dataclass(frozen=True)
class Sweep:
    """What one sweep of a queue did: notifications pushed (go-delayed's count: the missing ones and one
    per task requeued), crash loops dead-lettered, and the held tasks it could not handle (worker id,
    why), left where they are for the next sweep."""

    notified: int
    crash_loops: List[CrashLoop]
    failures: List[Tuple[str, str]]


def _keys(name: str, conn: Any) -> QueueKeys:
    """The keys of queue `name`; on a Redis Cluster, a name without a hash tag is refused (ValueError)."""
    if is_cluster(conn):
        check_cluster_name(name)
    return QueueKeys.of(name)


def _blobs(tasks: Iterable[Task], max_task_size: int) -> List[bytes]:
    """Serialize tasks, refusing oversized ones before anything reaches Redis."""
    blobs = []
    for task in tasks:
        blob = task.serialize()
        if len(blob) > max_task_size:
            raise TaskTooLargeError(
                f"{task.func_path}: {len(blob)} bytes is over the queue's max_task_size of {max_task_size}"
            )
        blobs.append(blob)
    return blobs


def _due(delay: Optional[float], at: Optional[datetime.datetime]) -> Optional[float]:
    """The unix time a task becomes due, or None to enqueue it now (no delay, or one already past)."""
    if delay is not None and at is not None:
        raise ValueError("give delay or at, not both")
    if at is not None:
        due = at.timestamp()  # a naive datetime is taken as local time
    elif delay is not None:
        due = time.time() + delay
    else:
        return None
    if not math.isfinite(due):  # inf would park the task forever; nan would be due never and always
        raise ValueError(f"a task's due time must be finite, got delay={delay!r}, at={at!r}")
    return due if due > time.time() else None


def _scheduled(blobs: Sequence[bytes], due: float) -> Dict[bytes, float]:
    """Scheduled-set members for blobs: a random prefix keeps identical tasks apart."""
    return {os.urandom(8) + blob: due for blob in blobs}


def _unique_call(keys: QueueKeys, task: Task, delay: Optional[float], at: Optional[datetime.datetime],
                 unique_for: float, unique_key: Optional[str], max_task_size: int,
                 track: Optional[Tuple[str, int]] = None) -> Dict[str, Any]:
    """The enqueue_unique script's keys and args: the lock is keyed by unique_key, or by the
    task's own digest; the task carries the lock's key and token so its worker can release it.
    track: (task id, record ttl) of a tracked task (the digest is the untracked task's)."""
    if not isinstance(task, PyTask):
        raise TypeError("unique_for is for PyTasks: a go-delayed worker would never release the lock")
    key = unique_key or hashlib.sha1(task.serialize()).hexdigest()
    token = os.urandom(8).hex()
    tracked = {} if track is None else {ID_OPTION: track[0]}
    [blob] = _blobs((task.with_options(unique_key=key, unique_token=token, **tracked),), max_task_size)
    due = _due(delay, at)
    member = b"" if due is None else next(iter(_scheduled((blob,), due)))
    call_keys: Tuple[str, ...] = (keys.unique(key), keys.name, keys.noti, keys.scheduled, keys.counts)
    args: Tuple[Any, ...] = (max(1, int(unique_for * 1000)), token, blob, "" if due is None else due, member)
    if track is not None:
        call_keys += (keys.tracked, keys.task(track[0]))
        args += (task.func_path, track[1])
    return dict(keys=call_keys, args=args)


def _tracked_call(keys: QueueKeys, tasks: Iterable[Task], due: Optional[float], ttl: int,
                  max_task_size: int) -> Tuple[List[str], Dict[str, Any]]:
    """The ids of tracked tasks and the enqueue_tracked script's keys and args to enqueue them."""
    ids, func_paths, tracked = [], [], []
    for task in tasks:
        if not isinstance(task, PyTask):
            raise TypeError("result_ttl is for PyTasks: a go-delayed worker would not write the record")
        ids.append(tracking.new_id())
        func_paths.append(task.func_path)
        tracked.append(task.with_options(**{ID_OPTION: ids[-1]}))
    blobs = _blobs(tracked, max_task_size)
    members = [b""] * len(blobs) if due is None else list(_scheduled(blobs, due))
    args: List[Any] = [ttl, "" if due is None else due]
    for func_path, blob, member in zip(func_paths, blobs, members):
        args += (func_path, blob, member)
    return ids, dict(keys=(keys.name, keys.noti, keys.scheduled, keys.counts, keys.tracked,
                           *(keys.task(task_id) for task_id in ids)), args=args)


def _cancel_call(keys: QueueKeys, task_id: str) -> Dict[str, Any]:
    return dict(keys=(keys.name, keys.noti, keys.scheduled, keys.task(task_id)), args=())


def _task_info(keys: QueueKeys, task_id: str, fields: Dict[bytes, bytes], ttl: int) -> TaskInfo:
    if not fields:
        raise TaskNotFoundError(f"no record of task {task_id} in {keys.name}: never tracked (enqueued without "
                                "result_ttl), or it expired result_ttl seconds after the task ended")
    return tracking.parse(task_id, keys.name, fields, ttl)


def _check_unique(reply: int, call: Dict[str, Any]) -> None:
    if reply != 1:
        raise DuplicateTaskError(f"{call['keys'][0]} is held by a task queued or running; "
                                 f"it expires in {-reply / 1000:.1f} s")


@contextlib.contextmanager
def _refused_when_full(queue: str) -> Iterator[None]:
    """QueueFullError for an enqueue Redis refused for want of memory (at maxmemory, with a policy
    that evicts nothing): nothing of it was applied (a script's first write, or a MULTI's command,
    was refused). redis-py's own message would quote the command, the task's bytes included."""
    try:
        yield
    except redis.exceptions.OutOfMemoryError:
        raise QueueFullError(f"{queue}: Redis is full (its used memory is over maxmemory and it evicts nothing): "
                             "the task was not enqueued; drain the queues or give Redis more memory") from None


def _stage_enqueue(pipe: Any, keys: QueueKeys, blobs: Sequence[bytes], due: Optional[float]) -> None:
    """Queue a batch's commands on a MULTI pipeline: the blobs and one notification each (or, with
    a due time, the blobs into the scheduled set), then their count added to "enqueued".

    (A script would be one command, but Lua's unpack() tops out near 8,000 values.)"""
    if due is None:
        pipe.rpush(keys.name, *blobs)
        pipe.rpush(keys.noti, *([NOTIFICATION] * len(blobs)))
    else:
        pipe.zadd(keys.scheduled, _scheduled(blobs, due))
    pipe.hincrby(keys.counts, "enqueued", len(blobs))


class Queue:
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

    def __init__(
        self,
        name: str,
        conn: redis.Redis,
        dequeue_timeout: float = 1,
        keep_alive_timeout: float = 60,
        max_task_size: int = DEFAULT_MAX_TASK_SIZE,
        dead_max: int = DEFAULT_DEAD_MAX,
        dead_max_age: float = DEFAULT_DEAD_MAX_AGE,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
    ) -> None:
        self.keys = _keys(name, conn)
        self.conn = sent_once(conn)
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self.dequeue_timeout = dequeue_timeout
        self.keep_alive_timeout = keep_alive_timeout
        self.max_task_size = max_task_size
        self.dead_max = dead_max
        self.dead_max_age = dead_max_age
        self.worker_id: Optional[str] = None
        self._scripts = scripts.register(self.conn)

    @property
    def name(self) -> str:
        return self.keys.name

    @property
    def _slot(self) -> int:
        """The Redis Cluster hash slot of the queue's keys."""
        return key_slot(self.name.encode())

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
        result_ttl seconds after it ended (see delayed.tracking). Its blob carries an id option,
        which keakon/delayed 1.x cannot read; an untracked task's blob is unchanged.
        """
        if unique_for is not None:
            return self._enqueue_unique(task, delay, at, unique_for, unique_key, result_ttl)
        if result_ttl is not None:
            return self.enqueue_many((task,), delay, at, result_ttl=result_ttl)[0]
        blobs = _blobs((task,), self.max_task_size)
        due = _due(delay, at)
        with _refused_when_full(self.name):
            if due is None:
                self._scripts["enqueue"](keys=(self.keys.name, self.keys.noti, self.keys.counts), args=blobs)
            else:
                with self.conn.pipeline(transaction=True) as pipe:
                    _stage_enqueue(pipe, self.keys, blobs, due)
                    pipe.execute()
        self._replicated()
        return None

    def _enqueue_unique(self, task: Task, delay: Optional[float], at: Optional[datetime.datetime],
                        unique_for: float, unique_key: Optional[str],
                        result_ttl: Optional[float]) -> Optional[TaskHandle]:
        track = None if result_ttl is None else (tracking.new_id(), tracking.ttl_seconds(result_ttl))
        call = _unique_call(self.keys, task, delay, at, unique_for, unique_key, self.max_task_size, track)
        with _refused_when_full(self.name):
            reply = self._scripts["enqueue_unique"](**call)
        _check_unique(reply, call)
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
            ids, call = _tracked_call(self.keys, tasks, _due(delay, at), ttl, self.max_task_size)
            if ids:
                with _refused_when_full(self.name):
                    self._scripts["enqueue_tracked"](**call)
                self._replicated()
            return [TaskHandle(self, task_id) for task_id in ids]
        blobs = _blobs(tasks, self.max_task_size)
        due = _due(delay, at)
        if blobs:
            with _refused_when_full(self.name), self.conn.pipeline(transaction=True) as pipe:
                _stage_enqueue(pipe, self.keys, blobs, due)
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
        return _task_info(self.keys, task_id, fields, ttl)

    def cancel(self, task_id: str) -> Cancel:
        """Remove a tracked task that waits (scheduled, pending or retrying) before it runs, with its
        notification, and end its record as cancelled. A running task is not interrupted: like one
        that ended, or one a worker is taking right now, it is not cancelled (false, and says why).
        TaskNotFoundError if there is no record of it."""
        outcome, status = self._scripts["cancel"](**_cancel_call(self.keys, task_id))
        if outcome == b"missing":
            _task_info(self.keys, task_id, {}, -2)
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

    # Workers. A worker may hold several ids, each its own processing field and
    # keep-alive key; methods taking worker_id(s) default to self.worker_id.

    def claim(self, worker_id: Optional[str] = None, timeout: Optional[float] = None) -> Optional[bytes]:
        """Wait up to timeout (default dequeue_timeout) seconds for a task and hold it as worker_id's;
        the raw blob or None.

        If worker_id already holds a task (the reply to the last claim was lost), that task.
        """
        if wait_for_notification([self], timeout) is None:
            return None
        return self.take_head(worker_id)

    def take_head(self, worker_id: Optional[str] = None) -> Optional[bytes]:
        """Hold the task at the head of the queue as worker_id's, once its notification was taken
        (go-delayed's dequeue script); the raw blob, or None if the queue was empty. If worker_id
        already holds a task, that task."""
        return self._scripts["dequeue"](
            keys=(self.keys.name, self.keys.processing, self.keys.noti, self.keys.paused, self.keys.tracked),
            args=(self._id(worker_id), self.keys.task_prefix))

    def claim_batch(self, release_ids: Sequence[str], claim_ids: Sequence[str],
                    tracked: Mapping[str, Tracked] = {}) -> Claimed:
        """Release the tasks of release_ids (done: counted) and claim up to one task per claim id,
        without blocking; a paused queue gives none. tracked: what the release of a tracked task's
        id writes into its record.

        One round trip. A claim id that still holds a task (the reply to the previous claim was
        lost) returns that task again, paused or not.
        """
        keys: Tuple[str, ...] = (self.keys.name, self.keys.noti, self.keys.processing, self.keys.counts,
                                 self.keys.paused, self.keys.tracked)
        if tracked:
            untracked = [worker_id for worker_id in release_ids if worker_id not in tracked]
            keys += tuple(self.keys.task(done.task_id) for done in tracked.values())
            results = [item for worker_id, done in tracked.items()
                       for item in (worker_id, done.result, done.note, done.seconds)]
            args = (self.keys.task_prefix, len(untracked), len(tracked), *untracked, *results, *claim_ids)
        else:  # the hot path: nothing tracked to release
            args = (self.keys.task_prefix, len(release_ids), 0, *release_ids, *claim_ids)
        reply = self._scripts["claim_batch"](keys=keys, args=args)
        return Claimed(bool(reply[0]), [(reply[i].decode(), reply[i + 1]) for i in range(1, len(reply), 2)])

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

    def give_back(self, held: Sequence[Tuple[str, bytes]]) -> int:
        """Return (worker id, blob) pairs not yet started to the head of the queue, in order (a tracked
        one's record says pending again: declared, as every key the script writes)."""
        keys: List[str] = [self.keys.name, self.keys.noti, self.keys.processing]
        args: List[Any] = []
        for worker_id, blob in held:
            task_id = tracking.task_id(blob)
            if task_id is not None:
                keys.append(self.keys.task(task_id))
            args += (worker_id, blob, 0 if task_id is None else len(keys))
        return self._scripts["give_back"](keys=keys, args=args)

    def unlock(self, locks: Sequence[Tuple[str, str]]) -> int:
        """Release unique tasks' locks, given as (unique key, token) pairs; each only if still its own."""
        return self._scripts["unlock"](keys=[self.keys.unique(key) for key, _ in locks],
                                       args=[token for _, token in locks])

    def move_due(self, limit: int = 1000) -> int:
        """Move up to limit scheduled tasks that are due into the queue; returns how many moved."""
        return self._scripts["move_due"](keys=(self.keys.scheduled, self.keys.name, self.keys.noti),
                                         args=(time.time(), limit))

    def dequeue(self) -> Optional[PyTask]:
        """claim() decoded as a PyTask (keakon/delayed's API); raises MalformedTaskError for bad blobs."""
        blob = self.claim()
        return None if blob is None else PyTask.deserialize(blob)

    def release(self, worker_id: Optional[str] = None) -> None:
        """Forget the task the worker holds: it is done (and counted, as claim_batch's releases are).

        Needs no fence: a processing field belongs to one worker id, and the only
        other writer, a sweeper, deletes it; releasing a field it took does nothing.
        """
        self.claim_batch((self._id(worker_id),), ())

    def requeue(self, claimed: bytes, blob: bytes, worker_id: Optional[str] = None,
                tracked: Optional[Tracked] = None) -> bool:
        """Enqueue blob (a retry of the held task) and release the held task, atomically; a tracked
        task's record says retrying, with tracked's error.

        Fenced: False, and nothing done, if the worker no longer holds `claimed`.
        """
        return bool(self._scripts["requeue"](
            keys=(self.keys.name, self.keys.noti, self.keys.processing, self.keys.counts, *self._record(tracked)),
            args=(self._id(worker_id), claimed, blob, *self._error(tracked)),
        ))

    def reschedule(self, claimed: bytes, blob: bytes, due: float, worker_id: Optional[str] = None,
                   tracked: Optional[Tracked] = None) -> bool:
        """Hold blob (the next attempt of the held task) until due and release the held task,
        atomically; fenced and tracked as requeue."""
        [member] = _scheduled((blob,), due)
        return bool(self._scripts["reschedule"](
            keys=(self.keys.processing, self.keys.scheduled, self.keys.counts, *self._record(tracked)),
            args=(self._id(worker_id), claimed, due, member, *self._error(tracked)),
        ))

    def bury(self, claimed: bytes, letter: dead_letter.Letter, worker_id: Optional[str] = None,
             tracked: Optional[Tracked] = None) -> bool:
        """Add a dead letter (see delayed.dead_letter.record) and release the held task, atomically,
        trimming the letters to dead_max and dead_max_age; fenced as requeue. A tracked task's
        record ends as tracked's status (failed or dead), with its error and the letter's id."""
        fields = [item for pair in letter.items() for item in pair]
        return bool(self._scripts["bury"](
            keys=(self.keys.dead_letters, self.keys.processing, self.keys.counts, *self._record(tracked)),
            args=(self._id(worker_id), claimed, self.dead_max, int(self.dead_max_age * 1000),
                  tracked.status if tracked else "", tracked.error if tracked else "", *fields),
        ))

    def _record(self, tracked: Optional[Tracked]) -> Tuple[str, ...]:
        """The record key a settling script takes last among its keys, for a tracked task."""
        return () if tracked is None else (self.keys.task(tracked.task_id),)

    @staticmethod
    def _error(tracked: Optional[Tracked]) -> Tuple[str, ...]:
        return () if tracked is None else (tracked.error,)

    def try_online(self, worker_ids: Optional[Sequence[str]] = None) -> bool:
        """Claim the ids' keep-alive keys, and list the worker in <name>_workers, in one script that a
        full Redis still runs; False (nothing set) if a live worker already had one of the ids."""
        return self._keep_alive("claim", worker_ids)

    def keep_alive(self, worker_ids: Optional[Sequence[str]] = None) -> None:
        """Refresh the ids' keep-alive keys and the worker's entry in <name>_workers (a full Redis too)."""
        self._keep_alive("refresh", worker_ids)

    def _keep_alive(self, action: str, worker_ids: Optional[Sequence[str]]) -> bool:
        ids = worker_ids or (self._id(None),)
        now = time.time()
        return bool(self._scripts["keep_alive"](keys=(self.keys.workers, *ids),
                                               args=(self._keep_alive_ms, now, now + self.keep_alive_timeout, action)))

    def go_offline(self, worker_ids: Optional[Sequence[str]] = None) -> None:
        """Delete the ids' keep-alive keys (they hold nothing and are leaving) and the worker's entry."""
        ids = worker_ids or (self._id(None),)
        with self.conn.pipeline(transaction=False) as pipe:
            for worker_id in ids:  # one DEL each: a cluster pipeline refuses a DEL of several keys
                pipe.delete(worker_id)
            pipe.zrem(self.keys.workers, ids[0])
            pipe.execute()

    def _id(self, worker_id: Optional[str]) -> str:
        """worker_id, else the queue's; a worker method called with neither is a bug, said plainly."""
        chosen = worker_id or self.worker_id
        if chosen is None:
            raise ValueError("no worker id: pass one, or set queue.worker_id")
        return chosen

    @property
    def _keep_alive_ms(self) -> int:
        return max(1, int(self.keep_alive_timeout * 1000))

    # Sweepers

    def requeue_lost(self, max_crashes: int = DEFAULT_MAX_CRASHES, notify_after: float = NOTIFY_AFTER) -> int:
        """sweep(), returning the number of notifications pushed, as go-delayed's requeue-lost does."""
        return self.sweep(max_crashes, notify_after).notified

    def sweep(self, max_crashes: int = DEFAULT_MAX_CRASHES, notify_after: float = NOTIFY_AFTER) -> Sweep:
        """Requeue the tasks of dead workers and top up notifications (go-delayed's sweep).

        The crashes of a task are counted in the task itself: each time one of our workers dies
        holding it, its blob comes back with its `crashes` option one higher, so identical tasks
        count apart. One that reaches more than max_crashes is dead-lettered instead, fenced as a
        worker's bury; a blob that is not a PyTask (it cannot count) at its first crash, as a worker
        would have (0 turns counting off: every task is requeued as it is). Only our workers'
        deaths count: a go-delayed worker never releases its last task, so one that stopped cleanly
        leaves a task behind too.
        The ids holding tasks are read first, so each script declares every keep-alive key it reads
        (a Redis Cluster needs that); an id that appears in between waits for the next sweep. They
        are handed over SWEEP_CHUNK at a time, and notifications pushed NOTIFY_CHUNK at a time, so
        no command of a sweep keeps Redis busy for long, however much lapsed.
        Tasks without notifications (a producer or worker died between two commands) get them
        from the first sweep that finds the queue's head where a sweep saw it short of
        notifications at least notify_after seconds before: sooner, a worker caught between
        its BLPOP and its dequeue would later find a stray notification.
        A held task it cannot handle (a bug: decoding never raises) is left where it is and listed
        in the Sweep's failures; the sweep goes on with the rest.
        """
        holders = cast(List[bytes], self.conn.hkeys(self.keys.processing))
        if is_cluster(self.conn):  # only ids in the queue's slot can be declared (ours carry its tag)
            holders = [worker_id for worker_id in holders if key_slot(worker_id) == self._slot]
        requeued, crashed = 0, []
        for start in range(0, len(holders), SWEEP_CHUNK):
            moved, left = self._requeue_lost(holders[start:start + SWEEP_CHUNK], max_crashes > 0)
            requeued += moved
            crashed += left
        crash_loops: List[CrashLoop] = []
        failures: List[Tuple[str, str]] = []
        again: List[Tuple[str, bytes, bytes]] = []
        for worker_id, blob in crashed:
            try:
                outcome = self._crashed(worker_id, blob, max_crashes)
            except redis.RedisError:
                raise  # Redis is away: the whole sweep is retried
            except Exception as exc:  # never let one task stop the sweep
                failures.append((worker_id, message_of(exc)))
                continue
            if isinstance(outcome, CrashLoop):
                crash_loops.append(outcome)
            else:
                again.append((worker_id, blob, outcome))
        for start in range(0, len(again), SWEEP_CHUNK):
            chunk = again[start:start + SWEEP_CHUNK]
            requeued += self._requeue_lost([worker_id for worker_id, _, _ in chunk], True,
                                           [blob for _, held, rewritten in chunk for blob in (held, rewritten)])[0]
        return Sweep(requeued + self._notify_missing(notify_after), crash_loops, failures)

    def _requeue_lost(self, holders: Sequence[Union[str, bytes]], counting: bool,
                      rewrites: Sequence[bytes] = ()) -> Tuple[int, List[Tuple[str, bytes]]]:
        """One requeue_lost call on holders: how many tasks it requeued, and the (id, blob) of our dead
        workers it left in place (counting). rewrites: per holder, the blob it held and the blob to
        requeue it as (its crash counted)."""
        reply = self._scripts["requeue_lost"](
            keys=(self.keys.name, self.keys.noti, self.keys.processing, self.keys.tracked, *holders),
            args=(int(counting), WORKER_ID_PREFIX, self.keys.task_prefix, self.keys.worker_id_suffix, *rewrites))
        return int(reply[0]), [(reply[i].decode(), reply[i + 1]) for i in range(1, len(reply), 2)]

    def _crashed(self, worker_id: str, blob: bytes, max_crashes: int) -> Union[CrashLoop, bytes]:
        """A task one of our workers died holding: the blob to requeue it as (one more crash counted
        in it), or, dead-lettered, its CrashLoop."""
        try:
            task = PyTask.deserialize(blob)
        except MalformedTaskError as exc:  # a worker of ours would dead-letter it: it cannot count crashes
            letter = dead_letter.record(reason=exc.reason, error=f"its worker died holding it; {exc}", blob=blob,
                                        queue=self.name, worker=worker_id, func=exc.func_path)
            return CrashLoop(worker_id, blob, 1, self._bury_crashed(worker_id, blob, letter, 1), exc.reason)
        crashes = task.options.get(CRASHES_OPTION, 0) + 1
        if crashes <= max_crashes:
            return task.with_options(**{CRASHES_OPTION: crashes}).serialize()
        letter = dead_letter.crash_loop(blob, self.name, worker_id, crashes, max_crashes)
        return CrashLoop(worker_id, blob, crashes, self._bury_crashed(worker_id, blob, letter, crashes))

    def _bury_crashed(self, worker_id: str, blob: bytes, letter: dead_letter.Letter, crashes: int) -> bool:
        task_id = tracking.task_id(blob)
        tracked = None if task_id is None else Tracked(
            task_id, status="dead", error=f"its workers died running it {crashes} times")
        return self.bury(blob, letter, worker_id, tracked)

    def _notify_missing(self, notify_after: float) -> int:
        """Top up the missing notifications, NOTIFY_CHUNK per call; returns how many were pushed."""
        pushed = 0
        while True:
            chunk, missing = self._scripts["notify_missing"](
                keys=(self.keys.name, self.keys.noti, self.keys.unnotified, self.keys.workers),
                args=(int(notify_after * 1000), NOTIFY_CHUNK, int(time.time())))
            pushed += int(chunk)
            if not chunk or not missing:
                return pushed

    # Dead letters (the operators' side: each call first moves an old <name>_dead list into the stream)

    def dead_letters(self, after: Optional[str] = None, count: Optional[int] = None,
                     migrate: bool = True, head: Optional[int] = None) -> List[Dict[str, Any]]:
        """Dead letters, oldest first, parsed (delayed.dead_letter.parse): up to count of them
        (default: all), starting after the letter id `after`. migrate=False reads without moving an
        old list into the stream first (for readers that must not write): its letters are not shown.
        head: read at most this many bytes of each letter's task and record (for previews: a
        too_large letter holds its whole blob); "task_bytes" says how long the task is."""
        if migrate:
            self.migrate_dead()
        if after is not None:
            dead_letter.check_ids([after])
            if after == dead_letter.LAST_ID:
                return []
        return self._read_dead("-" if after is None else "(" + after, "+", count, head)

    def dead_letter(self, letter_id: str, migrate: bool = True, head: Optional[int] = None) -> Dict[str, Any]:
        """One dead letter, parsed; DeadLetterError if there is none with this id (migrate and head:
        as dead_letters)."""
        dead_letter.check_ids([letter_id])
        if migrate:
            self.migrate_dead()
        entries = self._read_dead(letter_id, letter_id, 1, head)
        if not entries:
            raise DeadLetterError(f"no dead letter {letter_id} in {self.keys.dead_letters}")
        return entries[0]

    def _read_dead(self, start: str, end: str, count: Optional[int], head: Optional[int]) -> List[Dict[str, Any]]:
        """The letters from start to end (XRANGE's bounds), whole, or each field cut to head bytes."""
        if head is None:
            entries = cast(List[Tuple[bytes, Dict[bytes, bytes]]],
                           self.conn.xrange(self.keys.dead_letters, start, end, count))
            return [dead_letter.parse(letter_id, fields) for letter_id, fields in entries]
        reply = self._scripts["peek_dead"](keys=(self.keys.dead_letters,), args=(start, end, count or 0, head))
        return [dead_letter.parse(letter_id, _pairs(heads), _pairs(lengths)) for letter_id, heads, lengths in reply]

    def dead_count(self) -> int:
        """How many dead letters there are (those still in an old list included)."""
        with self.conn.pipeline(transaction=False) as pipe:
            pipe.xlen(self.keys.dead_letters)
            pipe.llen(self.keys.dead)
            return sum(pipe.execute())

    def requeue_dead(self, letter_ids: Sequence[str]) -> int:
        """Move the tasks of these letters back into the queue, each with its notification, in one
        script; if any id names no letter (or one without a task), DeadLetterError and nothing moves."""
        dead_letter.check_ids(letter_ids)
        self.migrate_dead()
        reply = self._scripts["requeue_dead"](keys=(self.keys.dead_letters, self.keys.name, self.keys.noti,
                                                    self.keys.counts),
                                              args=(dead_letter.TASK, *letter_ids))
        self._check_letters(reply[1:])
        return int(reply[0])

    def requeue_all_dead(self, progress: Optional[Callable[[int, int], None]] = None) -> int:
        """Move every dead letter's task back into the queue, with its notification, in chunks (each
        one script of a few ms: Redis stays responsive, and nothing is held here); letters without a
        task stay. progress(moved so far, letters at the start) after each chunk. Returns how many moved."""
        self.migrate_dead()
        total = int(self.conn.xlen(self.keys.dead_letters))
        moved, cursor = 0, "-"
        while True:
            chunk, skipped, last = self._scripts["requeue_dead_chunk"](
                keys=(self.keys.dead_letters, self.keys.name, self.keys.noti, self.keys.counts),
                args=(dead_letter.TASK, cursor, REQUEUE_CHUNK_LETTERS, REQUEUE_CHUNK_BYTES))
            if not chunk and not skipped:
                return moved
            moved += int(chunk)
            cursor = last.decode()
            if progress is not None:
                progress(moved, total)

    def delete_dead(self, letter_ids: Sequence[str]) -> int:
        """Delete these dead letters; if any id names no letter, DeadLetterError and nothing is deleted."""
        dead_letter.check_ids(letter_ids)
        self.migrate_dead()
        reply = self._scripts["delete_dead"](keys=(self.keys.dead_letters,), args=letter_ids)
        self._check_letters([item for letter_id in reply[1:] for item in (letter_id, b"no such dead letter")])
        return int(reply[0])

    def purge_dead(self) -> int:
        """Delete every dead letter (an old list's too; freed in the background); returns how many there were."""
        with self.conn.pipeline(transaction=True) as pipe:
            pipe.xlen(self.keys.dead_letters)
            pipe.llen(self.keys.dead)
            pipe.unlink(self.keys.dead_letters, self.keys.dead)
            letters, old, _ = pipe.execute()
        return int(letters) + int(old)

    def migrate_dead(self) -> int:
        """Move an old <name>_dead list (versions before the stream; an old worker may still write
        one) into the dead-letter stream, a few entries per script, each fenced on what was read;
        returns how many moved. Nothing is trimmed: the next letter a worker writes applies the bound."""
        moved = 0
        while True:
            head = cast(List[bytes], self.conn.lrange(self.keys.dead, 0, MIGRATE_CHUNK - 1))
            if not head:
                return moved
            args: List[Any] = [len(head), *(hashlib.sha1(entry).hexdigest() for entry in head)]
            for entry in head:
                letter = dead_letter.from_legacy(entry)
                args += [len(letter), *(item for pair in letter.items() for item in pair)]
            if self._scripts["migrate_dead"](keys=(self.keys.dead, self.keys.dead_letters), args=args):
                moved += len(head)

    def _check_letters(self, problems: Sequence[bytes]) -> None:
        """Raise DeadLetterError for a script's (id, problem) pairs, if any."""
        if problems:
            named = "; ".join(f"{problems[i].decode()}: {problems[i + 1].decode()}" for i in range(0, len(problems), 2))
            raise DeadLetterError(f"{self.keys.dead_letters}: {named} (nothing was changed)")


def _pairs(flat: Sequence[Any]) -> Dict[Any, Any]:
    """A script's flat [field, value, field, value, ...] reply as a dict."""
    return dict(zip(flat[::2], flat[1::2]))


def server_of(queue: Queue) -> Tuple[Any, ...]:
    """Where queue's Redis is (host, port, unix socket path, db), as its connection pool says; for a
    Redis Cluster, which cluster (the nodes its client was started from): a cluster client has no
    single pool."""
    if is_cluster(queue.conn):
        return ("cluster", *sorted(node.name for node in cast(Any, queue.conn).nodes_manager.startup_nodes.values()))
    kwargs = getattr(queue.conn.connection_pool, "connection_kwargs", {})
    return tuple(kwargs.get(name) for name in ("host", "port", "path", "db"))


def wait_for_notification(queues: Sequence[Queue], timeout: Optional[float] = None) -> Optional[Queue]:
    """Wait up to timeout (default: the first queue's dequeue_timeout) seconds for a notification on
    any of the queues (all on the first one's Redis) and take it: the first of them that had one, in
    the order given (BLPOP's), or None. The caller then takes its task (Queue.take_head).
    On a Redis Cluster one BLPOP cannot span slots: it waits on the queues in the first one's slot."""
    first = queues[0]
    if is_cluster(first.conn):
        queues = [queue for queue in queues if queue._slot == first._slot]
    by_key = {queue.keys.noti: queue for queue in queues}
    popped = first.conn.blpop(list(by_key), first.dequeue_timeout if timeout is None else timeout)
    if not popped:
        return None
    key = popped[0]
    return by_key[key.decode() if isinstance(key, bytes) else key]


class AsyncQueue:
    """The producer side of Queue for asyncio code, on a redis.asyncio connection, whose
    commands it sends exactly once, as Queue does."""

    def __init__(
        self, name: str, conn: redis.asyncio.Redis, max_task_size: int = DEFAULT_MAX_TASK_SIZE
    ) -> None:
        self.keys = _keys(name, conn)
        self.conn = sent_once_async(conn)
        self.max_task_size = max_task_size
        self._scripts = scripts.register(self.conn)

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
            call = _unique_call(self.keys, task, delay, at, unique_for, unique_key, self.max_task_size, track)
            with _refused_when_full(self.name):
                reply = await self._scripts["enqueue_unique"](**call)
            _check_unique(reply, call)
            return None if track is None else AsyncTaskHandle(self, track[0])
        if result_ttl is not None:
            return (await self.enqueue_many((task,), delay, at, result_ttl=result_ttl))[0]
        blobs = _blobs((task,), self.max_task_size)
        due = _due(delay, at)
        with _refused_when_full(self.name):
            if due is None:
                await self._scripts["enqueue"](keys=(self.keys.name, self.keys.noti, self.keys.counts), args=blobs)
            else:
                async with self.conn.pipeline(transaction=True) as pipe:
                    _stage_enqueue(pipe, self.keys, blobs, due)
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
            ids, call = _tracked_call(self.keys, tasks, _due(delay, at), ttl, self.max_task_size)
            if ids:
                with _refused_when_full(self.name):
                    await self._scripts["enqueue_tracked"](**call)
            return [AsyncTaskHandle(self, task_id) for task_id in ids]
        blobs = _blobs(tasks, self.max_task_size)
        due = _due(delay, at)
        if blobs:
            with _refused_when_full(self.name):
                async with self.conn.pipeline(transaction=True) as pipe:
                    _stage_enqueue(pipe, self.keys, blobs, due)
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
        return _task_info(self.keys, task_id, fields, ttl)

    async def cancel(self, task_id: str) -> Cancel:
        """Cancel a tracked task that waits, as Queue.cancel."""
        outcome, status = await self._scripts["cancel"](**_cancel_call(self.keys, task_id))
        if outcome == b"missing":
            _task_info(self.keys, task_id, {}, -2)
        return tracking.cancel_outcome(task_id, self.name, outcome.decode(), status.decode())

    async def len(self) -> int:
        return await self.conn.llen(self.keys.name)
