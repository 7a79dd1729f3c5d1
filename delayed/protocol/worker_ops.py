"""What a worker sends: claim tasks, admit those with limits, settle them (release, requeue, reschedule;
a dead letter is written by DeadLetters.bury), give back what it will not run, and keep its ids alive."""
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, cast

from ..wire import tracking
from ..wire.keys import QueueKeys, scheduled_nonce
from ..wire.limits import Admission, Limit
from ..wire.tracking import Tracked
from .base import QueueBase
from .connection import is_cluster
from .producer import scheduled_members
from .scripts import Script, Scripts

DEQUEUE = Script("dequeue")
CLAIM_BATCH = Script("claim_batch")
GIVE_BACK = Script("give_back")
GIVE_BACK_FIXED_KEYS = len(GIVE_BACK.keys) - 1
"""give_back.lua's keys before the records (its ARGV points at a record by its index in KEYS)."""
UNLOCK = Script("unlock")
REQUEUE = Script("requeue")
RESCHEDULE = Script("reschedule")
ADMIT = Script("admit")
KEEP_ALIVE = Script("keep_alive")
NOTE_CLAIMS = Script("note_claims")

DEFAULT_DEQUEUE_TIMEOUT: float = 1
"""Seconds a worker blocks waiting for a notification, unless told otherwise."""
DEFAULT_KEEP_ALIVE_TIMEOUT: float = 60
"""Seconds a worker's keep-alive key lives without a refresh, unless told otherwise."""


@dataclass(frozen=True)
class Claimed:
    """What a claim_batch round trip gave: whether the queue is paused, and (worker id, blob) pairs."""

    paused: bool
    tasks: List[Tuple[str, bytes]]


class WorkerOps:
    """The commands a worker sends to one queue, for writing a worker of your own.

    A worker claims tasks (`claim`, `take_head`, `claim_batch`), admits those with limits (`admit`),
    settles them (`release`, `requeue`, `reschedule`; a dead letter is `queue.dead.bury`), gives back
    what it will not run (`give_back`), and keeps its ids alive (`try_online`, `keep_alive`,
    `go_offline`). It may hold several ids, each with its own processing field and keep-alive key.

    Settling is fenced: `requeue`, `reschedule` and `bury` do nothing (and return False) if the worker
    no longer holds the task, because a sweeper requeued it after the worker's keep-alive lapsed.

    Args:
        queue: The queue.
        keep_alive_timeout: Seconds the worker's keep-alive keys live without a refresh (default 60);
            once they lapse, a sweeper takes the worker for dead and requeues its tasks.

    Attributes:
        queue (Queue): The queue.
        keep_alive_timeout (float): As given.

    Example:
        ```python
        from delayed import Queue, connect
        from delayed.protocol.worker_ops import WorkerOps

        queue = Queue("default", connect())
        ops = WorkerOps(queue)
        [worker_id] = queue.keys.worker_ids(1)
        ops.try_online([worker_id])
        blob = ops.claim(worker_id, timeout=0.1)  # None if no task came within 0.1 s
        ```
    """

    def __init__(self, queue: QueueBase, keep_alive_timeout: float = DEFAULT_KEEP_ALIVE_TIMEOUT) -> None:
        self.queue = queue
        self.keep_alive_timeout = keep_alive_timeout
        self._scripts = Scripts(queue.conn, queue.keys)

    def claim(self, worker_id: str, timeout: float = DEFAULT_DEQUEUE_TIMEOUT) -> Optional[bytes]:
        """Wait for a task and hold it as `worker_id`'s.

        If `worker_id` already holds a task (the reply to the last claim was lost), that task comes back.

        Args:
            worker_id: The id to hold it under.
            timeout: The most seconds to wait (default 1).

        Returns:
            The task's raw blob, or None if none came.
        """
        if wait_for_notification([self.queue], timeout) is None:
            return None
        return self.take_head(worker_id)

    def take_head(self, worker_id: str) -> Optional[bytes]:
        """Hold the task at the head of the queue as `worker_id`'s, once its notification was taken.

        This is go-delayed's dequeue script; `claim` waits for the notification, then calls it. If
        `worker_id` already holds a task, that task comes back.

        Args:
            worker_id: The id to hold it under.

        Returns:
            The task's raw blob, or None if the queue was empty.
        """
        return self._scripts[DEQUEUE](worker_id=worker_id)

    def claim_batch(self, release_ids: Sequence[str], claim_ids: Sequence[str],
                    tracked: Mapping[str, Tracked] = {}, worker: Optional[str] = None,
                    unnoted: Sequence[str] = ()) -> Claimed:
        """Release finished tasks and claim new ones, in one round trip, without blocking.

        A paused queue gives no task. A claim id that still holds a task (the reply to the last claim was
        lost) gets that task again, paused or not.

        Args:
            release_ids: The ids whose tasks are done: released, and counted.
            claim_ids: The ids to claim with, up to one task each.
            tracked: For the release of a tracked task, by id: what its record gets (its result).
            worker: The main id of the worker the ids are of, whose description `unnoted` names.
            unnoted: Ids whose claim notes (see `note_claims`) go first: they no longer hold those tasks.

        Returns:
            Whether the queue is paused, and the (worker id, blob) pairs claimed.
        """
        notes = {"info": self.queue.keys.worker_info(worker or ""), "unnoted_count": len(unnoted), "unnoted": unnoted}
        if tracked:
            untracked = [worker_id for worker_id in release_ids if worker_id not in tracked]
            reply = self._scripts[CLAIM_BATCH](
                records=[self.queue.keys.task(done.task_id) for done in tracked.values()],
                released_count=len(untracked), tracked_count=len(tracked), released=untracked,
                results=[item for worker_id, done in tracked.items()
                         for item in (worker_id, done.result, done.note, done.seconds)], claim_ids=claim_ids, **notes)
        else:  # the hot path: nothing tracked to release
            reply = self._scripts[CLAIM_BATCH](records=(), released_count=len(release_ids), tracked_count=0,
                                      released=release_ids, results=(), claim_ids=claim_ids, **notes)
        return Claimed(bool(reply[0]), [(reply[i].decode(), reply[i + 1]) for i in range(1, len(reply), 2)])

    def note_claims(self, worker: str, claims: Sequence[Tuple[str, float]]) -> bool:
        """Note, for people, when some of a worker's ids claimed the tasks they hold, in its description
        (`delayed.wire.worker_info`): by Redis's clock, less each task's age.

        Args:
            worker: The worker's main id.
            claims: (id, seconds since it claimed its task) pairs.

        Returns:
            True; False if the worker has no description (it never wrote one, or its keys lapsed).
        """
        return bool(self._scripts[NOTE_CLAIMS](info=self.queue.keys.worker_info(worker),
                                      claims=[item for worker_id, age in claims for item in (worker_id, int(age * 1000))]))

    def give_back(self, held: Sequence[Tuple[str, bytes]]) -> int:
        """Return tasks not yet started to the head of the queue, in order, with their notifications.

        Fenced: a task goes back only if its id still holds exactly that blob. A tracked task's record says
        `pending` again (its claim not counted as a run).

        Args:
            held: (worker id, blob) pairs.

        Returns:
            How many tasks went back.
        """
        records: List[str] = []
        per_task: List[Any] = []
        for worker_id, blob in held:
            task_id = tracking.task_id(blob)
            if task_id is not None:
                records.append(self.queue.keys.task(task_id))
            per_task += (worker_id, blob, 0 if task_id is None else GIVE_BACK_FIXED_KEYS + len(records))
        return self._scripts[GIVE_BACK](records=records, held=per_task)

    def unlock(self, locks: Sequence[Tuple[str, str]]) -> int:
        """Release unique tasks' locks, each only if it is still that task's (its token matches).

        Args:
            locks: (unique key, token) pairs, from the tasks' `unique_key` and `unique_token` options.

        Returns:
            How many locks were released.
        """
        return self._scripts[UNLOCK](locks=[self.queue.keys.unique(key) for key, _ in locks], tokens=[token for _, token in locks])

    def release(self, worker_id: str) -> None:
        """Forget the task the worker holds: it is done, and counted.

        Needs no fence: a processing field belongs to one worker id, and the only other writer, a
        sweeper, deletes it; releasing a field it took does nothing.

        Args:
            worker_id: The worker's id.
        """
        self.claim_batch((worker_id,), ())

    def requeue(self, claimed: bytes, blob: bytes, worker_id: str,
                tracked: Optional[Tracked] = None) -> bool:
        """Enqueue a retry of the held task and release the held task, atomically.

        A tracked task's record says `retrying`, with `tracked`'s error.

        Args:
            claimed: The blob the worker holds.
            blob: The blob to enqueue (the retry, e.g. with one retry fewer).
            worker_id: The worker's id.
            tracked: For a tracked task, what its record gets.

        Returns:
            True; False, and nothing done, if the worker no longer holds `claimed`.
        """
        return bool(self._scripts[REQUEUE](record=_record(self.queue.keys, tracked), worker_id=worker_id,
                                  claimed=claimed, blob=blob, error=_error(tracked)))

    def reschedule(self, claimed: bytes, blob: bytes, due: float, worker_id: str,
                   tracked: Optional[Tracked] = None) -> bool:
        """Hold the next attempt of the held task in the scheduled set until due, and release the held task, atomically.

        Fenced and tracked as `requeue`.

        Args:
            claimed: The blob the worker holds.
            blob: The blob to schedule (the next attempt).
            due: When it is due, in unix seconds.
            worker_id: The worker's id.
            tracked: For a tracked task, what its record gets.

        Returns:
            True; False, and nothing done, if the worker no longer holds `claimed`.
        """
        [member] = scheduled_members((blob,), due, "retry")
        return bool(self._scripts[RESCHEDULE](record=_record(self.queue.keys, tracked), worker_id=worker_id,
                                     claimed=claimed, due=due, member=member, error=_error(tracked)))

    def admit(self, worker_id: str, blob: bytes, limit: Limit, task_id: Optional[str] = None) -> Tuple[Admission, float]:
        """Admit the held task under its limits, or hold it back, in one script, by Redis's clock.

        Call it once the task is decoded, just before its call. Fenced: nothing happens (FENCED) if the
        worker no longer holds `blob`. A task held back leaves `<queue>_processing`: it waits for a
        slot of its key (WAITING), or in the scheduled set until a start is free for it (SCHEDULED); a
        tracked one's record says pending or scheduled, its claim not counted as a run.

        Args:
            worker_id: The id holding the task.
            blob: The blob it holds.
            limit: The task's limits (`delayed.wire.limits.limit_of`).
            task_id: A tracked task's id.

        Returns:
            What was done, and when a task held for its rate is due (unix seconds; else 0).
        """
        reply = self._scripts[ADMIT](
            **self._limit_keys(limit.key), record=() if task_id is None else (self.queue.keys.task(task_id),),
            worker_id=worker_id, blob=blob, limit_key=limit.key, rate_limit=limit.rate_limit,
            rate_count=limit.rate_count, period_ms=limit.period_ms, concurrency=limit.concurrency,
            nonce=scheduled_nonce("limited"))
        return Admission(reply[0].decode()), float(reply[1]) if len(reply) > 1 else 0.0

    def _limit_keys(self, key: str) -> Dict[str, str]:
        keys = self.queue.keys
        return {"running": keys.limit_running(key), "waiting": keys.limit_waiting(key),
                "starts": keys.limit_starts(key), "reserved": keys.limit_reserved(key)}

    def try_online(self, worker_ids: Sequence[str], about: Sequence[str] = ()) -> bool:
        """Claim the ids' keep-alive keys and list the worker in `<queue>_workers`, in one script.

        A full Redis still runs it.

        Args:
            worker_ids: The ids (the first is the worker's main id).
            about: The worker's description (`delayed.wire.worker_info.describe`: field, value, ...), kept
                in `<queue>_worker:<main id>` with the keys' expiry; none for none.

        Returns:
            True; False, and nothing set, if a live worker already had one of the ids.
        """
        return self._keep_alive("claim", worker_ids, about)

    def keep_alive(self, worker_ids: Sequence[str], about: Sequence[str] = ()) -> None:
        """Refresh the ids' keep-alive keys, the worker's entry in `<queue>_workers` and its description; a
        full Redis still runs it.

        Call it well within `keep_alive_timeout`, or a sweeper requeues the worker's tasks.

        Args:
            worker_ids: The ids.
            about: As for `try_online`: written again if its key is gone.
        """
        self._keep_alive("refresh", worker_ids, about)

    def _keep_alive(self, action: str, worker_ids: Sequence[str], about: Sequence[str]) -> bool:
        now = time.time()
        return bool(self._scripts[KEEP_ALIVE](info=self.queue.keys.worker_info(worker_ids[0]), ids=worker_ids,
                                            ttl_ms=self._keep_alive_ms, now=now, lapse_at=now + self.keep_alive_timeout,
                                            action=action, about=about))

    def go_offline(self, worker_ids: Sequence[str]) -> None:
        """Delete the ids' keep-alive keys, the worker's entry and its description: the worker holds nothing and
        is leaving.

        Args:
            worker_ids: The ids (the first is the worker's main id).
        """
        with self.queue.conn.pipeline(transaction=False) as pipe:
            for worker_id in worker_ids:  # one DEL each: a cluster pipeline refuses a DEL of several keys
                pipe.delete(worker_id)
            pipe.delete(self.queue.keys.worker_info(worker_ids[0]))
            pipe.zrem(self.queue.keys.workers, worker_ids[0])
            pipe.execute()

    @property
    def _keep_alive_ms(self) -> int:
        return max(1, int(self.keep_alive_timeout * 1000))


def _record(keys: QueueKeys, tracked: Optional[Tracked]) -> Tuple[str, ...]:
    """The record key a settling script takes last among its keys, for a tracked task."""
    return () if tracked is None else (keys.task(tracked.task_id),)


def _error(tracked: Optional[Tracked]) -> Tuple[str, ...]:
    return () if tracked is None else (tracked.error,)


def server_of(queue: QueueBase) -> Tuple[Any, ...]:
    """Where queue's Redis is (host, port, unix socket path, db), as its connection pool says; for a
    Redis Cluster, which cluster (the nodes its client was started from): a cluster client has no
    single pool."""
    if is_cluster(queue.conn):
        return ("cluster", *sorted(node.name for node in cast(Any, queue.conn).nodes_manager.startup_nodes.values()))
    kwargs = getattr(queue.conn.connection_pool, "connection_kwargs", {})
    return tuple(kwargs.get(name) for name in ("host", "port", "path", "db"))


def wait_for_notification(queues: Sequence[QueueBase], timeout: float) -> Optional[QueueBase]:
    """Wait up to timeout seconds for a notification on
    any of the queues (all on the first one's Redis) and take it: the first of them that had one, in
    the order given (BLPOP's), or None. The caller then takes its task (Queue.take_head).
    On a Redis Cluster one BLPOP cannot span slots: it waits on the queues in the first one's slot."""
    first = queues[0]
    if is_cluster(first.conn):
        queues = [queue for queue in queues if queue.slot == first.slot]
    by_key = {queue.keys.noti: queue for queue in queues}
    popped = first.conn.blpop(list(by_key), timeout)
    if not popped:
        return None
    key = popped[0]
    return by_key[key.decode() if isinstance(key, bytes) else key]
