"""What a sweeper sends: requeue the tasks of dead workers (counting our workers' crashes in the
tasks, dead-lettering crash loops) and top up missing notifications, as go-delayed's sweep does."""
import time
from dataclasses import dataclass
from typing import List, Sequence, Tuple, Union, cast

import redis
from redis.crc import key_slot

from ..errors import MalformedTaskError, message_of
from ..wire import dead_letter, tracking
from ..wire.keys import WORKER_ID_PREFIX
from ..wire.task import decode_task
from ..wire.tracking import Tracked
from .base import QueueBase
from .connection import is_cluster
from .scripts import Script, Scripts

DEFAULT_MAX_CRASHES = 3
"""A task is dead-lettered when its workers die holding it more often than this."""
NOTIFY_AFTER = 1.0
"""Seconds the head of a queue short of notifications must stand still before a sweep tops them up."""
SWEEP_CHUNK = 100
"""Holders one sweep script looks at, and crashed tasks one requeues: each call stays well under a
millisecond of Redis's time, however many workers died."""
NOTIFY_CHUNK = 5000
"""Notifications one sweep script pushes at most (the sweep calls it again while some are missing)."""

REQUEUE_LOST = Script("requeue_lost")
NOTIFY_MISSING = Script("notify_missing")
CLAIM_SWEEP = Script("claim_sweep")


@dataclass(frozen=True)
class CrashLoop:
    """A task one of our workers died holding that a sweep dead-lettered: one its workers died holding
    more than max_crashes times (reason crash_loop), or one that cannot count its crashes, not being
    a task (reason "malformed", as a worker would have given it). buried is False if another sweeper
    took it first."""

    worker_id: str
    blob: bytes
    crashes: int
    buried: bool
    reason: str = dead_letter.Reason.CRASH_LOOP


@dataclass(frozen=True)
class Sweep:
    """What one sweep of a queue did.

    Attributes:
        notified (int): The notifications pushed (go-delayed's count): the missing ones, and one per
            task requeued.
        crash_loops (list[CrashLoop]): The tasks it dead-lettered: crash loops, and blobs our workers
            died holding that cannot count crashes, not being tasks.
        failures (list[tuple[str, str]]): The held tasks it could not handle, as (worker id, why): left
            where they are for the next sweep.
    """

    notified: int
    crash_loops: List[CrashLoop]
    failures: List[Tuple[str, str]]


class SweeperOps:
    """The commands a sweeper sends to one queue, for writing a sweeper of your own.

    Args:
        queue: The queue.
    """

    def __init__(self, queue: QueueBase) -> None:
        self.queue = queue
        self._scripts = Scripts(queue.conn, queue.keys)

    def claim_sweep(self, interval: float, force: bool = False) -> bool:
        """Claim the queue's next sweep: the lock that keeps our workers and sweepers, between them, to
        at most one sweep of a queue per interval.

        The claim is made by Redis's clock, and recorded in the queue's `N_swept` key as
        `<unix ms>:<interval ms>` (what `delayed stats` reads to warn about a queue nothing sweeps).

        Args:
            interval: The caller's seconds between sweeps: the queue is claimed only if no claim was
                made for it within that long.
            force: Claim (and record) it whatever the last claim, for a sweep asked for now.

        Returns:
            Whether the caller should sweep the queue now.
        """
        return bool(self._scripts[CLAIM_SWEEP](interval_ms=max(1, round(interval * 1000)), force=int(force)))

    def requeue_lost(self, max_crashes: int = DEFAULT_MAX_CRASHES, notify_after: float = NOTIFY_AFTER) -> int:
        """`sweep()`, returning the number of notifications pushed, as go-delayed's requeue-lost does.

        Args:
            max_crashes: As for `sweep`.
            notify_after: As for `sweep`.

        Returns:
            The notifications pushed.
        """
        return self.sweep(max_crashes, notify_after).notified

    def sweep(self, max_crashes: int = DEFAULT_MAX_CRASHES, notify_after: float = NOTIFY_AFTER) -> Sweep:
        """Requeue the tasks of dead workers and top up missing notifications (go-delayed's sweep).

        A task is requeued once the keep-alive of the worker holding it lapsed. Its crashes are counted in
        the task itself: each time one of our workers dies holding it, its blob comes back with its
        `crashes` option one higher, so identical tasks count apart. One that reaches more than
        `max_crashes` is dead-lettered instead (reason `crash_loop`), fenced as a worker's bury; a blob
        that is not a task (it cannot count) at its first crash, as a worker would have. PyTasks and
        GoTasks count alike, since our workers of either language hold both. Only our workers' deaths count: a go-delayed worker never releases its last task, so one that stopped
        cleanly leaves a task behind too.

        The ids holding tasks are read first, so each script declares every keep-alive key it reads (a
        Redis Cluster needs that); an id that appears in between waits for the next sweep. They are handed
        over 100 at a time, and notifications pushed 5,000 at a time, so no command of a sweep keeps Redis
        busy for long, however much lapsed.

        Tasks without notifications (a producer or worker died between two commands) get them from the
        first sweep that finds the queue's head where a sweep saw it short of notifications at least
        `notify_after` seconds before: sooner, a worker caught between its `BLPOP` and its dequeue would
        later find a stray notification.

        A held task it cannot handle (a bug: decoding never raises) is left where it is and listed in the
        result's `failures`; the sweep goes on with the rest.

        Args:
            max_crashes: Dead-letter a task once our workers died holding it more often than this (default
                3); 0 turns counting off: every task is requeued as it is.
            notify_after: Seconds the queue's head must stand still, short of notifications, before they
                are topped up (default 1).

        Returns:
            What the sweep did.

        Raises:
            redis.RedisError: Redis could not be reached, or refused; sweep again.
        """
        holders = cast(List[bytes], self.queue.conn.hkeys(self.queue.keys.processing))
        if is_cluster(self.queue.conn):  # only ids in the queue's slot can be declared (ours carry its tag)
            holders = [worker_id for worker_id in holders if key_slot(worker_id) == self.queue.slot]
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
        reply = self._scripts[REQUEUE_LOST](holders=holders, counting=int(counting), worker_id_prefix=WORKER_ID_PREFIX,
                                          rewrites=rewrites)
        return int(reply[0]), [(reply[i].decode(), reply[i + 1]) for i in range(1, len(reply), 2)]

    def _crashed(self, worker_id: str, blob: bytes, max_crashes: int) -> Union[CrashLoop, bytes]:
        """A task one of our workers died holding: the blob to requeue it as (one more crash counted
        in it), or, dead-lettered, its CrashLoop."""
        try:
            task = decode_task(blob)
        except MalformedTaskError as exc:  # a worker of ours would dead-letter it: it cannot count crashes
            letter = dead_letter.record(reason=exc.reason, error=f"its worker died holding it; {exc}", blob=blob,
                                        queue=self.queue.name, worker=worker_id, func=exc.func_path)
            buried = self._bury_crashed(worker_id, blob, letter, 1, exc.reason)
            return CrashLoop(worker_id, blob, 1, buried, exc.reason)
        crashes = task.options.crashes + 1
        if crashes <= max_crashes:
            return task.with_options(crashes=crashes).serialize()
        letter = dead_letter.crash_loop(blob, self.queue.name, worker_id, crashes, max_crashes)
        buried = self._bury_crashed(worker_id, blob, letter, crashes, dead_letter.Reason.CRASH_LOOP)
        return CrashLoop(worker_id, blob, crashes, buried)

    def _bury_crashed(self, worker_id: str, blob: bytes, letter: dead_letter.Letter, crashes: int,
                      reason: str) -> bool:
        """Dead-letter a task its workers died holding; a tracked one's record ends as its reason says."""
        task_id = tracking.task_id(blob)
        tracked = None if task_id is None else Tracked(
            task_id, status=dead_letter.STATUS_OF[dead_letter.Reason(reason)],
            error=f"its workers died running it {crashes} times")
        return self.queue.dead.bury(worker_id, blob, letter, tracked)

    def _notify_missing(self, notify_after: float) -> int:
        """Top up the missing notifications, NOTIFY_CHUNK per call; returns how many were pushed."""
        pushed = 0
        while True:
            chunk, missing = self._scripts[NOTIFY_MISSING](still_ms=int(notify_after * 1000), limit=NOTIFY_CHUNK,
                                                         now=int(time.time()))
            pushed += int(chunk)
            if not chunk or not missing:
                return pushed
