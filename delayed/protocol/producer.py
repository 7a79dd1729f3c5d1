"""The producer's operations, each planned once (see calls.py) for Queue and AsyncQueue: `Producer`,
their shared core, and what its plans send: the blobs, due times and scheduled-set members of an
enqueue, the arguments of the enqueue scripts, and the MULTI that enqueues a batch."""
import contextlib
import copy
import hashlib
import os
import time
from typing import Any, Dict, Generic, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

import redis
from redis.crc import key_slot

from ..errors import DuplicateTaskError, NotReplicatedError, QueueFullError, TaskNotFoundError, TaskTooLargeError
from ..wire import tracking
from ..wire.hooks import Enqueuing, Middleware
from ..wire.keys import QueueKeys, scheduled_nonce
from ..wire.options import NO_OPTIONS, PUBLIC, Place, TaskOptions, expires_at, make, place_of
from ..wire.task import Task
from ..wire.tracking import Cancel, TaskInfo
from .calls import Call, Command, Pipeline, Plan, RunScript
from .connection import is_cluster
from .enqueue_hooks import EnqueueHooks
from .redis_errors import refused_for_memory
from .scripts import Script

PUBLIC_NAMES = frozenset(PUBLIC)
DEFAULT_MAX_TASK_SIZE = 1024 * 1024
"""Bytes; larger blobs are refused at enqueue and dead-lettered when found in a queue."""

NOTIFICATION = b"1"

ENQUEUE = Script("enqueue")
ENQUEUE_UNIQUE = Script("enqueue_unique")
ENQUEUE_TRACKED = Script("enqueue_tracked")
CANCEL = Script("cancel")
MOVE_DUE = Script("move_due")


def blobs_of(tasks: Iterable[Task], max_task_size: int) -> List[bytes]:
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


def with_given(task: Task, **given: Any) -> Tuple[Task, TaskOptions]:
    """What an enqueue writes: the task, with the options given to enqueue that ride in its blob, and
    its options: the task's own, with those given (None: not given) winning. Every option is checked
    by TaskOptions (ValueError or TypeError naming it)."""
    return _applied(task, _winner(given))


def _winner(given: Dict[str, Any]) -> Optional[TaskOptions]:
    """The options given to an enqueue (None: not given), checked; None if none was given."""
    chosen = {name: value for name, value in given.items() if value is not None}
    if chosen:
        return make(**chosen)
    if given.keys() - PUBLIC_NAMES:
        make(**given)  # a misspelled option is refused even when None
    return None


def given_to(task: Task, winner: Optional[TaskOptions]) -> Task:
    """The task with the options given to enqueue (winner, see _winner) in it, the enqueue-only ones
    too (its delay, result_ttl ...): what producer middleware sees as enqueuing.task."""
    return task if winner is None else task.with_options(**TaskOptions.overrides(winner))


def _applied(task: Task, winner: Optional[TaskOptions]) -> Tuple[Task, TaskOptions]:
    if winner is None:
        options = task.options
    elif any(place_of(name) is not Place.ENQUEUE for name in winner.given()):
        task = task.with_options(**TaskOptions.overrides(winner))  # a GoTask refuses what its blob cannot carry
        options = task.options
    else:
        options = task.options.merged(winner)
    return stamped(task, options, time.time()), options


def stamped(task: Task, options: TaskOptions, now: float) -> Task:
    """task as an enqueue at now writes it: with `expires` in options, its blob carries the moment it
    expires (expires_at), so expiry counts from this enqueue; else task itself."""
    if options.expires is None:
        return task
    return task.with_options(expires_at=expires_at(options, now))


def batch_of(tasks: Iterable[Task], **given: Any) -> Tuple[List[Task], TaskOptions]:
    """enqueue_many's tasks as it writes them, and the options that say how: one due time and one
    result_ttl for the whole batch. Unique tasks go one at a time, through enqueue."""
    winner = _winner(given)
    written: List[Task] = []
    shared: Optional[TaskOptions] = None
    shared_how: Dict[str, Any] = {}
    for task in tasks:
        if winner is None and task.options is NO_OPTIONS:  # most batches: nothing to merge or compare
            options, how = NO_OPTIONS, {}
        else:
            task, options = _applied(task, winner)
            how = options.given(Place.ENQUEUE)
            how.pop("expires", None)  # each task's own: _applied stamped its blob
            if "unique_for" in how:
                raise TypeError("enqueue_many takes no unique task (unique_for): enqueue those one at a time")
        if shared is None:
            shared, shared_how = options, how
        elif how != shared_how:
            raise ValueError(f"enqueue_many enqueues a batch with one delay, at and result_ttl, and {task.func_path} "
                             f"has {how or 'none'} where another has {shared_how or 'none'}: give them to "
                             "enqueue_many, or enqueue the tasks apart")
        written.append(task)
    return written, shared or NO_OPTIONS


def due_time(options: TaskOptions) -> Optional[float]:
    """The unix time a task becomes due (its delay or at), or None to enqueue it now (none, or one past)."""
    if options.at is not None:
        due = options.at.timestamp()  # a naive datetime is taken as local time
    elif options.delay is not None:
        due = time.time() + options.delay
    else:
        return None
    return due if due > time.time() else None


def scheduled_members(blobs: Sequence[bytes], due: float, kind: str = "delayed") -> Dict[bytes, float]:
    """Scheduled-set members for blobs, of this kind ("delayed", or a worker's "retry"): a nonce that
    says the kind and keeps identical tasks apart, then the blob (see keys.scheduled_nonce)."""
    return {scheduled_nonce(kind) + blob: due for blob in blobs}


def unique_digest(task: Task) -> str:
    """The lock key of a unique task without unique_key: the hex SHA-1 of its blob without its headers and
    its expires_at (a tracing middleware's traceparent, and an expiry counted from the enqueue, differ at
    each enqueue of the same call). Go's producer takes the same (go/delayed/unique.go)."""
    return hashlib.sha1(task.with_options(headers=None, expires_at=None).serialize()).hexdigest()


def unique_call(keys: QueueKeys, task: Task, options: TaskOptions, max_task_size: int,
                track: Optional[Tuple[str, int]] = None) -> Dict[str, Any]:
    """The enqueue_unique script's arguments, for options with unique_for: the lock is keyed by
    unique_key, or by the task's own digest; the task carries the lock's key and token so its worker
    can release it. track: (task id, record ttl) of a tracked task (the digest is the untracked task's).
    A GoTask's lock is taken as a PyTask's: our Go worker releases it, a go-delayed worker never does
    (the lock then lasts unique_for)."""
    assert options.unique_for is not None
    key = options.unique_key or unique_digest(task)
    token = os.urandom(8).hex()
    [blob] = blobs_of((task.with_options(unique_key=key, unique_token=token, id=track and track[0]),), max_task_size)
    due = due_time(options)
    member = b"" if due is None else next(iter(scheduled_members((blob,), due)))
    return dict(lock=keys.unique(key), lock_ms=max(1, int(options.unique_for * 1000)), token=token, blob=blob,
                due="" if due is None else due, member=member,
                tracking_keys=() if track is None else (keys.tracked, keys.task(track[0])),
                tracking_args=() if track is None else (task.func_path, track[1]))


def tracked_call(keys: QueueKeys, tasks: Iterable[Task], due: Optional[float], ttl: int,
                  max_task_size: int) -> Tuple[List[str], Dict[str, Any]]:
    """The ids of tracked tasks and the enqueue_tracked script's arguments to enqueue them. A GoTask is
    tracked as a PyTask is: our Go worker writes its record, a go-delayed worker never does (the record
    then says pending, and never expires)."""
    ids, func_paths, tracked = [], [], []
    for task in tasks:
        ids.append(tracking.new_id())
        func_paths.append(task.func_path)
        tracked.append(task.with_options(id=ids[-1]))
    blobs = blobs_of(tracked, max_task_size)
    members = [b""] * len(blobs) if due is None else list(scheduled_members(blobs, due))
    per_task = [item for entry in zip(func_paths, blobs, members) for item in entry]
    return ids, dict(records=[keys.task(task_id) for task_id in ids], ttl=ttl, due="" if due is None else due,
                     tasks=per_task)


def task_info_of(keys: QueueKeys, task_id: str, fields: Union[Dict[bytes, bytes], List[bytes]], ttl: int) -> TaskInfo:
    """The TaskInfo of a record read with HGETALL and TTL; TaskNotFoundError if there is none. A cluster
    transaction on RESP2 (redis-py before 8.0 speaks it by default) gives HGETALL's flat list."""
    if isinstance(fields, list):
        fields = dict(zip(fields[::2], fields[1::2]))
    if not fields:
        raise TaskNotFoundError(f"no record of task {task_id} in {keys.name}: never tracked (enqueued without "
                                "result_ttl), or it expired result_ttl seconds after the task ended")
    return tracking.parse(task_id, keys.name, fields, ttl)


def check_unique(reply: int, call: Dict[str, Any]) -> None:
    """DuplicateTaskError unless enqueue_unique took the lock (its reply: 1, else the lock's ms left, negated)."""
    if reply != 1:
        raise DuplicateTaskError(f"{call['lock']} is held by a task queued or running; "
                                 f"it expires in {-reply / 1000:.1f} s")


@contextlib.contextmanager
def refused_when_full(queue: str) -> Iterator[None]:
    """QueueFullError for an enqueue Redis refused for want of memory (at maxmemory, with a policy
    that evicts nothing): nothing of it was applied (a script's first write, or a MULTI's command,
    was refused). redis-py's own message would quote the command, the task's bytes included."""
    try:
        yield
    except redis.exceptions.RedisError as exc:
        if not refused_for_memory(exc):
            raise
        raise QueueFullError(f"{queue}: Redis is full (its used memory is over maxmemory and it evicts nothing): "
                             "the task was not enqueued; drain the queues or give Redis more memory") from None


def enqueue_call(keys: QueueKeys, blobs: Sequence[bytes], due: Optional[float]) -> Call:
    """The one round trip that enqueues blobs: the enqueue script for one task due now; else a MULTI of
    the blobs and one notification each (or, with a due time, the blobs into the scheduled set), then
    their count added to "enqueued".

    (A script would be one command for a batch too, but Lua's unpack() tops out near 8,000 values.)"""
    if due is None and len(blobs) == 1:
        return RunScript(ENQUEUE, {"blobs": blobs})
    staged: Tuple[Command, ...]
    if due is None:
        staged = (Command("rpush", (keys.name, *blobs)), Command("rpush", (keys.noti, *[NOTIFICATION] * len(blobs))))
    else:
        staged = (Command("zadd", (keys.scheduled, scheduled_members(blobs, due))),)
    return Pipeline((*staged, Command("hincrby", (keys.counts, "enqueued", len(blobs)))))


def _handles(result: Any, one: bool, count: int) -> List[Any]:
    """Each task's handle, from what _plan_write returned: a tracked task's handle, None for an untracked one."""
    if one:
        return [result]
    return result if isinstance(result, list) else [None] * count


P = TypeVar("P", bound="Producer[Any]")
H = TypeVar("H")
"""The task handle a face gives: TaskHandle (Queue) or AsyncTaskHandle (AsyncQueue)."""


class Producer(Generic[H]):
    """What Queue and AsyncQueue share: a queue's keys, client and producer settings, and every producer
    operation as a plan (the `_plan_` methods). A face runs a plan with its executor and gives its own
    task handles (`task`); the arguments are documented on Queue."""

    def __init__(self, keys: QueueKeys, conn: Any, max_task_size: int, wait_replicas: int,
                 wait_timeout_ms: int, middleware: Sequence[Middleware] = ()) -> None:
        self.keys = keys
        self.conn = conn
        self.max_task_size = max_task_size
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self._hooks = EnqueueHooks.of(middleware)

    @property
    def name(self) -> str:
        """The queue's name."""
        return self.keys.name

    @property
    def slot(self) -> int:
        """The Redis Cluster hash slot of the queue's keys."""
        return key_slot(self.name.encode())

    def task(self, task_id: str) -> H:
        raise NotImplementedError  # each face gives its own handle

    def _sibling(self: P, name: str) -> P:
        """This face on another queue of the same Redis (where a workflow's step runs), for its handles."""
        if name == self.name:
            return self
        sibling = copy.copy(self)
        sibling.keys = QueueKeys.of(name)
        sibling._executor = type(self._executor)(self.conn, sibling.keys)  # type: ignore[attr-defined]
        return sibling

    def _plan_enqueue(self, tasks: Iterable[Task], one: bool, **given: Any) -> Plan[Any]:
        """enqueue's arguments (one task) and enqueue_many's, read here and nowhere else, as the plan that
        enqueues: what enqueue returns (None, or a handle) if one, else what enqueue_many returns.
        given: the options given by name (None: not given; see with_given and batch_of). With enqueue
        hooks, the tasks go through them (delayed.protocol.enqueue_hooks), the options given in them."""
        if self._hooks is None:
            return self._plan_write(tasks, one, **given)
        return self._plan_hooked(self._hooks, tasks, one, given)

    def _plan_hooked(self, hooks: EnqueueHooks, tasks: Iterable[Task], one: bool, given: Dict[str, Any]) -> Plan[Any]:
        """_plan_enqueue through the enqueue hooks."""
        winner = _winner(given)
        enqueuings = [Enqueuing(given_to(task, winner), self.name) for task in tasks]
        return (yield from hooks.run(enqueuings, lambda written: self._plan_write(written, one),
                                     lambda result: _handles(result, one, len(enqueuings))))

    def _plan_write(self, tasks: Iterable[Task], one: bool, **given: Any) -> Plan[Any]:
        """_plan_enqueue, past the hooks."""
        if one:
            [task] = tasks
            task, chosen = with_given(task, **given)
            written = [task]
        else:
            written, chosen = batch_of(tasks, **given)
        if chosen.unique_for is not None:  # one task: batch_of refuses unique ones
            track = None if chosen.result_ttl is None else (tracking.new_id(), tracking.ttl_seconds(chosen.result_ttl))
            call = unique_call(self.keys, task, chosen, self.max_task_size, track)
            with refused_when_full(self.name):
                reply = yield RunScript(ENQUEUE_UNIQUE, call)
            check_unique(reply, call)
            yield from self._plan_replicated()
            return None if track is None else self.task(track[0])
        if chosen.result_ttl is not None:
            ttl = tracking.ttl_seconds(chosen.result_ttl)
            ids, call = tracked_call(self.keys, written, due_time(chosen), ttl, self.max_task_size)
            if ids:
                with refused_when_full(self.name):
                    yield RunScript(ENQUEUE_TRACKED, call)
                yield from self._plan_replicated()
            handles = [self.task(task_id) for task_id in ids]
            return handles[0] if one else handles
        blobs = blobs_of(written, self.max_task_size)
        if blobs:
            with refused_when_full(self.name):
                yield enqueue_call(self.keys, blobs, due_time(chosen))
            yield from self._plan_replicated()
        return None if one else len(blobs)

    def _plan_replicated(self) -> Plan[None]:
        """With wait_replicas, wait until that many replicas have every write made so far; else raise.

        WAIT covers the writes sent on its own connection, and the enqueue may have used another
        pooled one: so one round trip writes first (adding 0 to the "enqueued" count, which Redis
        replicates like any write) and then WAITs. The replication stream is one ordered log, so a
        replica that has this write has the enqueue before it. In a cluster both go to the queue's node.
        """
        if not self.wait_replicas:
            return
        on_node: Dict[str, Any] = {}
        if is_cluster(self.conn):  # WAIT names no key to route by
            on_node["target_nodes"] = self.conn.get_node_from_key(self.keys.counts)
        replies = yield Pipeline((Command("hincrby", (self.keys.counts, "enqueued", 0)),
                                  Command("execute_command", ("WAIT", self.wait_replicas, self.wait_timeout_ms),
                                          on_node)), transaction=False)
        acknowledged = int(replies[-1])
        if acknowledged < self.wait_replicas:
            raise NotReplicatedError(
                f"{self.name}: {acknowledged} of {self.wait_replicas} replicas acknowledged the enqueue within "
                f"{self.wait_timeout_ms} ms; it is on the primary, and a failover now could lose it", acknowledged)

    def _plan_task_info(self, task_id: str) -> Plan[TaskInfo]:
        """A tracked task's record and its time to live, read in one MULTI."""
        record = self.keys.task(task_id)
        fields, ttl = yield Pipeline((Command("hgetall", (record,)), Command("ttl", (record,))))
        return task_info_of(self.keys, task_id, fields, ttl)

    def _plan_cancel(self, task_id: str) -> Plan[Cancel]:
        """The cancel script, and its outcome said for people (TaskNotFoundError for no record)."""
        outcome, status, worker = yield RunScript(CANCEL, {"record": self.keys.task(task_id)})
        if outcome == b"missing":
            task_info_of(self.keys, task_id, {}, -2)
        return tracking.cancel_outcome(task_id, self.name, outcome.decode(), status.decode(), worker.decode())

    def _plan_len(self) -> Plan[int]:
        return int((yield Command("llen", (self.keys.name,))))

    def _plan_pause(self) -> Plan[bool]:
        return bool((yield Command("set", (self.keys.paused, int(time.time())), {"nx": True})))

    def _plan_resume(self) -> Plan[bool]:
        return bool((yield Command("delete", (self.keys.paused,))))

    def _plan_paused_since(self) -> Plan[Optional[float]]:
        since = yield Command("get", (self.keys.paused,))
        return None if since is None else float(since)

    def _plan_move_due(self, limit: int) -> Plan[int]:
        return int((yield RunScript(MOVE_DUE, {"now": time.time(), "limit": limit})))
