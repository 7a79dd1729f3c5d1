"""What a running worker holds: its ids, their keep-alive, the tasks it claimed, and how each is settled.

A worker process owns 2 x capacity ids (one random base id, then the same id with -1, -2, ...
appended), each its own field in <queue>_processing and its own keep-alive key, so any sweeper,
Python or Go, requeues what a dead worker held. A task is claimed under a free id and stays
held until it is settled: released (batched into the next claim's round trip), requeued,
rescheduled or buried (each one fenced script), or given back unstarted.

A claim never uses an id whose release rides in the same round trip, and a claim whose reply
was lost is sent again with the same ids: so a resent claim re-delivers what the lost one
claimed (a claim returns what an id already holds) and never releases a task it had just claimed.
A worker serving several queues has one Holding per queue (its own ids on each), and Holdings
claims across them in priority order, or with weights in a weighted random order drawn for each claim. Every Redis command goes through the Queue (the protocol layer).

For people, a worker describes itself as it goes online (delayed.wire.worker_info), and notes when it
claimed each task it has held for NOTE_AFTER seconds (note_claims, from a thread of its own), so that
nothing is written for the many tasks that end sooner; such a note goes with the next claim's round trip
once its task is settled, before its id claims again.
"""
import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple, cast

import redis

from ..protocol.queue import Queue
from ..protocol.redis_errors import error_text
from ..protocol.worker_ops import DEFAULT_DEQUEUE_TIMEOUT, DEFAULT_KEEP_ALIVE_TIMEOUT, WorkerOps, wait_for_notification
from ..runtime.backoff import OutageBackoff
from ..runtime.lifecycle import Lifecycle
from ..wire import worker_info
from ..wire.dead_letter import STATUS_OF, Letter, Reason
from ..wire.limits import Admission, Limit
from ..wire.strenum import StrEnum
from ..wire.tracking import Status, Tracked

logger = logging.getLogger(__name__)

Lock = Tuple[str, str]
"""A unique task's lock: (unique key, token)."""
NOTE_AFTER = 1.0
"""Seconds a task is held before its worker notes when it claimed it (see Holding.note_claims)."""


class Claim(NamedTuple):
    """A task held under one of the worker's ids: the id, the exact blob claimed, the Holding (so the
    queue) it was claimed through, which settles it, and when it was claimed (time.monotonic()). (A tuple:
    a batch makes dozens per round trip.)"""

    worker_id: str
    blob: bytes
    holding: "Holding"
    claimed: float = 0.0

    @property
    def queue(self) -> Queue:
        return self.holding.queue


_new_claim = tuple.__new__
"""Claim(...) without the Python frame of a NamedTuple's __new__: a batch makes dozens per round trip."""


class Outcome(StrEnum):
    """How the worker settled a claim, one outcome each: what the observe hook is told, and the metrics'
    outcome label. Each is the Status the settlement gives a tracked task's record (retried: retrying)."""

    DONE = Status.DONE.value
    """It returned."""
    RETRIED = "retried"
    """It raised and runs again (its record says retrying)."""
    FAILED = Status.FAILED.value
    """It raised, or its arguments did not fit, and is dead-lettered."""
    DEAD = Status.DEAD.value
    """Dead-lettered without running: malformed, a GoTask, too large, not allowed."""
    HELD = "held"
    """Not run: a limit held it back at its start (it runs later, and is told again then), or it was no
    longer this worker's to run (see Held)."""
    CANCELLED = Status.CANCELLED.value
    """Its cancel was requested while the worker held it (delayed.worker.cancels): stopped, or not started."""


OUTCOME_OF = {Status.DONE: Outcome.DONE, Status.RETRYING: Outcome.RETRIED, Status.FAILED: Outcome.FAILED,
              Status.DEAD: Outcome.DEAD, Status.CANCELLED: Outcome.CANCELLED}
"""The outcome of a settlement, by the status it gives a tracked task's record."""


class Settlement:
    """How a held task leaves the worker; apply() sends its one fenced script through the queue.

    status: where it leaves the task, as a tracked task's record says it (outcome: as the observe hook
    and the metrics say it).
    lock: the unique lock to release once the task is settled (a task that ended: done or buried).
    tracked: what a tracked task's settlement writes into its record.
    """

    status: Status
    lock: Optional[Lock] = None
    tracked: Optional[Tracked] = None

    @property
    def outcome(self) -> Outcome:
        return OUTCOME_OF[self.status]

    def apply(self, ops: WorkerOps, claim: Claim) -> bool:
        """Settle the claim; False if the claim's id no longer holds its blob (fenced off)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Release(Settlement):
    """The task is done: forget it (batched into the next claim's round trip, with a tracked task's result)."""

    status = Status.DONE
    lock: Optional[Lock] = None
    tracked: Optional[Tracked] = None

    def apply(self, ops: WorkerOps, claim: Claim) -> bool:
        ops.release(claim.worker_id)
        return True


@dataclass(frozen=True)
class Cancelled(Release):
    """The task's cancel was requested while it was held: released as a finished task is, and the script
    that releases it ends its record cancelled (the request is in the record: tracking.lua), its result
    not kept."""

    status = Status.CANCELLED


@dataclass(frozen=True)
class Requeue(Settlement):
    """A retry at once: blob goes to the tail of the queue as the held task is released."""

    status = Status.RETRYING
    blob: bytes
    tracked: Optional[Tracked] = None

    def apply(self, ops: WorkerOps, claim: Claim) -> bool:
        return ops.requeue(claim.blob, self.blob, claim.worker_id, self.tracked)


@dataclass(frozen=True)
class Reschedule(Settlement):
    """A retry later: blob waits in the scheduled set until due (unix seconds)."""

    status = Status.RETRYING
    blob: bytes
    due: float
    tracked: Optional[Tracked] = None

    def apply(self, ops: WorkerOps, claim: Claim) -> bool:
        return ops.reschedule(claim.blob, self.blob, self.due, claim.worker_id, self.tracked)


@dataclass(frozen=True)
class Bury(Settlement):
    """The task cannot or did not run: its dead letter (delayed.wire.dead_letter.record), written for
    reason, goes to <queue>_dead_letters."""

    reason: Reason
    letter: Letter
    lock: Optional[Lock] = None
    tracked: Optional[Tracked] = None

    @property
    def status(self) -> Status:  # type: ignore[override]
        return STATUS_OF[self.reason]

    def apply(self, ops: WorkerOps, claim: Claim) -> bool:
        return ops.queue.dead.bury(claim.worker_id, claim.blob, self.letter, self.tracked)


@dataclass(frozen=True)
class Held(Settlement):
    """The task did not start, and nothing is left to send: its limits held it back (admit.lua moved it
    out of <queue>_processing, to wait for a slot or for its start in the scheduled set: admission), or
    it was no longer the id's to run (fenced: a sweeper had taken it back), or its admission gave up as
    the worker stopped (then the task stays held for a sweeper). Not counted as done: the task runs later.

    admission: what admit.lua said (delayed.wire.limits.Admission), "" when it gave up; due: when a task
    held for its rate is due (unix seconds).
    """

    admission: str = ""
    due: float = 0.0

    @property
    def status(self) -> Status:  # type: ignore[override]
        return Status.SCHEDULED if self.due else Status.PENDING

    @property
    def outcome(self) -> Outcome:
        return Outcome.HELD

    def apply(self, ops: WorkerOps, claim: Claim) -> bool:
        return True


class Holding:
    """A running worker's ids, keep-alive, claims and settlements, on one Queue.

    capacity: the most tasks held at once (the batch size, or the slots and as many kept ready);
    the worker owns twice as many ids. backoff: how Redis errors are waited out and logged (Holdings
    shares one between its queues). lifecycle: the worker's; once it is stopping, going online
    and Redis errors while settling give up (the keep-alive keys then expire and a sweeper
    requeues what is held), and a stop cuts the backoff's waits short. keep_alive_timeout: how long
    the ids' keep-alive keys live without a refresh (the worker's).
    Claims, settlements and give-backs may come from several threads (a batch's watcher gives
    back): the ones that talk to Redis take a lock; a release only moves an id between two lists.
    """

    def __init__(self, queue: Queue, capacity: int, lifecycle: Lifecycle,
                 backoff: Optional[OutageBackoff] = None, keep_alive_timeout: float = DEFAULT_KEEP_ALIVE_TIMEOUT) -> None:
        self.queue = queue
        self.ops = WorkerOps(queue, keep_alive_timeout)
        self.ids: List[str] = []
        self._capacity = capacity
        self._lifecycle = lifecycle
        self._backoff = backoff or OutageBackoff(logger, "worker", wait=lifecycle.wait)
        self._held: Dict[str, Claim] = {}  # id -> its claim, not yet settled
        self._noted: Set[str] = set()  # ids whose claim time is noted in Redis (see note_claims)
        self._about: List[str] = []  # the worker's description (see go_online)
        self._finished: List[str] = []  # ids whose task is done, released with the next claim
        self._results: Dict[str, Tracked] = {}  # those of them whose task is tracked: what their release writes
        self._unsure: List[str] = []  # the claim ids of a claim whose reply was lost: sent again as they were
        self._unlocks: List[Lock] = []  # unique tasks that ended: their locks, released after each batch
        self._abandoned = False  # a settlement gave up at stop: tasks may still be held
        self.paused = False  # as the last claim found the queue
        self._lock = threading.RLock()

    @property
    def id(self) -> Optional[str]:
        """The worker's main id (its other ids are this id with -1, -2, ... appended)."""
        return self.ids[0] if self.ids else None

    def go_online(self, queues: Sequence[str] = (), started: float = 0.0) -> bool:
        """Take fresh ids (SET NX on each keep-alive key), the worker described as serving queues since
        started (delayed.wire.worker_info); after a Redis error, fresh ones again (a lost reply may have
        set the last). True once online, False if stopped first."""
        self._about = worker_info.describe(queues, started)
        while not self._lifecycle.stopping:
            ids = self.queue.keys.worker_ids(2 * self._capacity)
            try:
                if self.ops.try_online(ids, self._about):
                    self.ids = ids
                    self._backoff.succeeded()
                    return True
            except redis.RedisError as exc:
                self._backoff.failed(exc)
        return False

    def keep_alive(self) -> None:
        """Refresh every id's keep-alive key (raises redis errors: the caller rides them out)."""
        self.ops.keep_alive(self.ids, self._about)

    def go_offline(self) -> None:
        """Delete the keep-alive keys, unless tasks may still be held: then let them expire for a sweeper."""
        if self._finished or self._abandoned or self._held or not self.ids:
            return
        try:
            self.ops.go_offline(self.ids)
        except redis.RedisError as exc:
            logger.warning("worker %s could not go offline (%s); its keys expire by themselves", self.id,
                           error_text(exc))
        else:
            logger.info("worker %s offline", self.id)

    def claim(self, count: int) -> List[Claim]:
        """Release the finished tasks and claim up to count more, in one round trip, without
        blocking (no round trip if there is neither). [] after a Redis error (once the backoff waited)."""
        with self._lock:
            claim_ids = self._claim_ids(count)
            unnoted = [worker_id for worker_id in self._noted if worker_id not in self._held] if self._noted else []
            if not claim_ids and not self._finished and not unnoted:
                return []
            try:
                claimed = self.ops.claim_batch(self._finished, claim_ids, self._results, self.id, unnoted)
            except redis.RedisError as exc:
                self._failed(claim_ids, exc)
                return []
            self._finished, self._results = [], {}
            self._noted.difference_update(unnoted)
            self._note_paused(claimed.paused)
            return self._took(claimed.tasks)

    def claim_notified(self) -> List[Claim]:
        """Claim the task at the head of the queue for one free id, once a notification of this queue
        was taken (see delayed.protocol.worker_ops.wait_for_notification). [] if the queue was empty, or after a Redis error."""
        with self._lock:
            claim_ids = self._claim_ids(1)
            if not claim_ids:
                return []
            try:
                blob = self.ops.take_head(claim_ids[0])
            except redis.RedisError as exc:
                self._failed(claim_ids, exc)
                return []
            return self._took([] if blob is None else [(claim_ids[0], blob)])

    def _note_paused(self, paused: bool) -> None:
        """Say when the queue turns paused or resumed (`delayed pause` / `resume`)."""
        if paused != self.paused:
            self.paused = paused
            logger.info("queue %r %s: worker %s %s", self.queue.name, "is paused" if paused else "resumed", self.id,
                        "takes no new task from it until it is resumed" if paused else "takes its tasks again")

    def _failed(self, claim_ids: List[str], exc: redis.RedisError) -> None:
        """A claim whose reply was lost: its ids are sent again as they were (it may have landed)."""
        self._unsure = claim_ids
        self._backoff.failed(exc)

    def _took(self, pairs: List[Tuple[str, bytes]]) -> List[Claim]:
        self._unsure = []
        self._backoff.succeeded()
        now = time.monotonic()
        claims = [_new_claim(Claim, (worker_id, blob, self, now)) for worker_id, blob in pairs]
        for claim in claims:
            self._held[claim.worker_id] = claim
        return claims

    def _claim_ids(self, count: int) -> List[str]:
        """The ids to claim with: those of a claim whose reply was lost, as they were, then free ones; an
        id whose claim note is still in Redis is not free (the next claim_batch deletes the note first)."""
        busy = set(self._held).union(self._finished, self._noted)
        extra = [worker_id for worker_id in self.ids if worker_id not in busy and worker_id not in self._unsure]
        return self._unsure + extra[:max(0, count - len(self._unsure))]

    def settle(self, claim: Claim, settlement: Settlement) -> None:
        """Settle a claimed task: a release waits for the next claim's round trip; anything else
        is its own fenced script, retried through Redis outages until it lands or we stop."""
        if settlement.lock is not None:
            self._unlocks.append(settlement.lock)
        if isinstance(settlement, Release):  # no lock: a few atomic steps on the hot path
            self._held.pop(claim.worker_id, None)
            self._finished.append(claim.worker_id)
            if settlement.tracked is not None:
                self._results[claim.worker_id] = settlement.tracked
            return
        with self._lock:
            applied = self._persist(settlement.apply, self.ops, claim)
            if applied is None:
                return
            self._held.pop(claim.worker_id, None)
            if not applied:
                logger.warning("could not settle (%s) the task of %s: it no longer holds it (a sweeper requeued "
                               "it after its keep-alive lapsed, or an earlier try whose reply was lost did it)",
                               type(settlement).__name__.lower(), claim.worker_id)

    def admit(self, worker_id: str, blob: bytes, limit: Limit, task_id: Optional[str]) -> Optional[Tuple[Admission, float]]:
        """WorkerOps.admit, retried through Redis outages; None once stopping (the task then stays held,
        the worker's keep-alive lapses, and a sweeper requeues it)."""
        with self._lock:
            return cast(Optional[Tuple[Admission, float]], self._persist(self.ops.admit, worker_id, blob, limit, task_id))

    def give_back(self, claims: Sequence[Claim]) -> None:
        """Return claimed tasks not yet started to the head of the queue, in order (fenced on id and blob)."""
        with self._lock:
            if not claims:
                return
            pairs = [(claim.worker_id, claim.blob) for claim in claims]
            if self._persist(self.ops.give_back, pairs) is not None:
                for claim in claims:
                    self._held.pop(claim.worker_id, None)

    def note_claims(self) -> None:
        """Note in Redis when each task held for NOTE_AFTER seconds or more was claimed, once (raises redis
        errors: the caller rides them out). The ids count as noted before the note is sent: one whose reply
        was lost may have landed, and must be deleted before its id claims again."""
        with self._lock:
            now = time.monotonic()
            due = [claim for claim in list(self._held.values())
                   if now - claim.claimed >= NOTE_AFTER and claim.worker_id not in self._noted]
            if due and self.id is not None:
                self._noted.update(claim.worker_id for claim in due)
                self.ops.note_claims(self.id, [(claim.worker_id, now - claim.claimed) for claim in due])

    def flush(self) -> None:
        """Send what waits for a round trip: releases (at stop) and the locks of unique tasks that ended."""
        with self._lock:
            if self._finished and self._persist(self.ops.claim_batch, self._finished, (), self._results) is not None:
                self._finished, self._results = [], {}
            self.unlock()

    def unlock(self) -> None:
        """Release the locks of the unique tasks that ended (done, or dead-lettered)."""
        with self._lock:
            if self._unlocks and self._persist(self.ops.unlock, self._unlocks) is not None:
                self._unlocks = []

    def _persist(self, apply: Callable[..., Any], *args: Any) -> Any:
        """Run a settling call and return its result, retrying through Redis outages; once
        stopping, give up and leave the held tasks to a sweeper (None)."""
        while True:
            try:
                result = apply(*args)
            except redis.RedisError as exc:
                if self._lifecycle.stopping:
                    logger.error("could not settle tasks of worker %s before stopping; "
                                 "a sweeper will requeue them", self.id)
                    self._abandoned = True
                    return None
                self._backoff.failed(exc)
            else:
                self._backoff.succeeded()
                return result


def check_weights(weights: Any, queues: int) -> Tuple[int, ...]:
    """Weights for this many queues, checked: a sequence of whole numbers of 1 or more, one per queue
    (ValueError otherwise, saying what it got)."""
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence) or len(weights) != queues or not all(
            isinstance(weight, int) and not isinstance(weight, bool) and weight >= 1 for weight in weights):
        raise ValueError(f"weights must be whole numbers of 1 or more, one per queue ({queues}), in the queues' "
                         f"order: got {weights!r}")
    return tuple(weights)


class Holdings:
    """A worker's Holding on each queue it serves, used as one: in priority order, or by weight.

    Without weights, a claim fills from the first queue, then from the next ones for what is left
    (strict priority: a queue is claimed from only while the ones before it have no task to give).
    With weights (one per queue, see check_weights), each claim first draws the order it tries the
    queues in, as Asynq's processor does: a queue comes first with probability its weight over the
    sum of the weights, and so on down among the rest (Efraimidis and Spirakis' weighted sampling
    without replacement). So while every queue has tasks, each gets about its weight's share of the
    claims, and none with a weight starves. `random` is the source of the draws (a test may seed it).
    When every queue is empty it waits on all their notification lists at once, in the claim's order
    (BLPOP takes from the first non-empty one). Finished tasks are released with the next claim on
    their own queue, and every queue with releases waiting gets that round trip, whether or not it is
    claimed from. A claim is settled by the Holding it came through (Claim.holding). dequeue_timeout:
    how long a claim blocks by default; keep_alive_timeout: each Holding's (the worker's timing, see
    Worker).
    """

    def __init__(self, queues: Sequence[Queue], capacity: int, lifecycle: Lifecycle,
                 dequeue_timeout: float = DEFAULT_DEQUEUE_TIMEOUT,
                 keep_alive_timeout: float = DEFAULT_KEEP_ALIVE_TIMEOUT,
                 weights: Optional[Sequence[int]] = None) -> None:
        self._backoff = OutageBackoff(logger, "worker", wait=lifecycle.wait)  # one Redis: one outage, said once
        self.outage = self._backoff.outage  # the worker's other threads say theirs through it too
        self.holdings = [Holding(queue, capacity, lifecycle, self._backoff, keep_alive_timeout) for queue in queues]
        self._lifecycle = lifecycle
        self.dequeue_timeout = dequeue_timeout
        self.weights = None if weights is None else check_weights(weights, len(self.holdings))
        self._exponents = None if self.weights is None else [1.0 / weight for weight in self.weights]
        self.random = random.Random()

    def in_claim_order(self) -> List[Holding]:
        """The Holdings in the order the next claim tries them: as given, or with weights a weighted
        random order drawn now (each queue's key is a uniform draw to the power 1/weight, the largest
        first)."""
        if self._exponents is None:
            return self.holdings
        draw = self.random.random
        keys = [draw() ** exponent for exponent in self._exponents]
        return [self.holdings[index] for index in sorted(range(len(keys)), key=keys.__getitem__, reverse=True)]

    @property
    def id(self) -> Optional[str]:
        """The worker's main id: the first queue's main id."""
        return self.holdings[0].id

    @property
    def ids(self) -> List[str]:
        """Every id the worker holds tasks under, on every queue."""
        return [worker_id for holding in self.holdings for worker_id in holding.ids]

    @property
    def failing(self) -> bool:
        """The last call to Redis failed (the worker is backing off)."""
        return self._backoff.failing

    def go_online(self) -> bool:
        """Every Holding online (see Holding.go_online); False if stopped first (none left online)."""
        queues, started = [holding.queue.name for holding in self.holdings], time.time()
        for holding in self.holdings:
            if not holding.go_online(queues, started):
                self.go_offline()
                return False
        return True

    def keep_alive(self) -> None:
        for holding in self.holdings:
            holding.keep_alive()

    def note_claims(self) -> None:
        for holding in self.holdings:
            holding.note_claims()

    def go_offline(self) -> None:
        for holding in self.holdings:
            holding.go_offline()

    def claim(self, count: int, block: bool = True, timeout: Optional[float] = None) -> List[Claim]:
        """Release the finished tasks and claim up to count more, in claim order (in_claim_order); if
        none came and block, wait up to timeout (default: dequeue_timeout) for one, on the
        queues that are not paused (a paused one is looked at again in the next round)."""
        claims: List[Claim] = []
        ordered = self.in_claim_order()
        for holding in ordered:
            claims += holding.claim(count - len(claims))
        if claims or not block or count < 1 or self.failing:
            return claims
        timeout = self.dequeue_timeout if timeout is None else timeout
        unpaused = [holding for holding in ordered if not holding.paused]
        if not unpaused:
            self._lifecycle.wait(timeout)
            return []
        try:
            notified = wait_for_notification([holding.queue for holding in unpaused], timeout)
        except redis.RedisError as exc:
            self._backoff.failed(exc)
            return []
        self._backoff.succeeded()
        return next((holding.claim_notified() for holding in unpaused if holding.queue is notified), [])

    def admit(self, queue: Queue, worker_id: str, blob: bytes, limit: Limit,
              task_id: Optional[str]) -> Optional[Tuple[Admission, float]]:
        """Holding.admit, on the Holding of queue."""
        [holding] = [holding for holding in self.holdings if holding.queue is queue]
        return holding.admit(worker_id, blob, limit, task_id)

    def give_back(self, claims: Sequence[Claim]) -> None:
        """Holding.give_back, each queue's claims to its own queue."""
        for holding in self.holdings:
            holding.give_back([claim for claim in claims if claim.holding is holding])

    def flush(self) -> None:
        for holding in self.holdings:
            holding.flush()

    def unlock(self) -> None:
        for holding in self.holdings:
            holding.unlock()
