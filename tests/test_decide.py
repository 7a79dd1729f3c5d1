"""decide(): how a run is settled, from its task and what happened to it; and the Tracking middleware's
part of the settlement. Plain unit tests: no Redis, and a Policy with fixed answers for the clock, the
backoff curves and the retry-forever delays. The end states' one vocabulary is pinned here too."""
import json
from typing import Optional

import msgpack
import pytest
import redis

from delayed import GoTask, PyTask, Queue, SkipRetry
from delayed.wire.dead_letter import REASONS, STATUS_OF, Reason
from delayed.wire.hooks import Call
from delayed.wire.tracking import ENDED, Status, Tracked
from delayed.worker.decide import RELEASE, decide
from delayed.worker.holding import (
    OUTCOME_OF,
    Bury,
    Cancelled,
    Held,
    Outcome,
    Release,
    Requeue,
    Reschedule,
    Settlement,
)
from delayed.worker.run import Run
from delayed.worker.time_limit import TimeLimitExceeded
from delayed.worker.tracking import Tracking

QUEUE = Queue("q", redis.Redis(port=1))  # never connected to: decide sends nothing
NOW = 1_700_000_000.0
TRACKED_ID = "0123456789abcdef0123456789abcdef"


class Fixed:
    """A Policy whose answers are fixed: backoff is 10 s per attempt, a retry-forever wait 0.5 s."""

    worker: Optional[str] = "delayed-py-test"

    def now(self) -> float:
        return NOW

    def backoff(self, task: PyTask, attempt: int) -> float:
        return 10.0 * attempt

    def forever(self, blob: bytes) -> float:
        return 0.5


def ran(task: PyTask, error: Optional[BaseException] = None, result: object = None, seconds: float = 0.25) -> Run:
    """A run of task that returned result, or raised error."""
    run = Run(task.serialize(), QUEUE)
    run.task, run.result, run.error, run.seconds = task, result, error, seconds
    return run


def refused(task: PyTask, reason: Reason, error: str) -> Run:
    run = Run(task.serialize(), QUEUE)
    run.task = task
    run.refuse(reason, error, task.func_path)
    return run


def record(settlement: Settlement) -> dict:
    assert isinstance(settlement, Bury)
    return json.loads(settlement.letter["record"])


def test_a_run_that_returned_is_released():
    assert decide(ran(PyTask("m:f", [1])), Fixed()) is RELEASE


@pytest.mark.parametrize("error", [None, ValueError("no"), SkipRetry("no")], ids=["returned", "raised", "skip-retry"])
@pytest.mark.parametrize("options", [{}, {"retry": 3}, {"max_retries": 3}, {"retry": -1}],
                         ids=["none", "retry", "max-retries", "forever"])
def test_a_run_whose_call_was_cancelled_is_cancelled_whatever_it_did_never_retried(error, options):
    task = PyTask("m:f", [1], **options).with_options(id=TRACKED_ID)
    run = ran(task, error, result="kept?")
    run.call = Call(task, "q", "delayed-py-test")
    run.call.cancel()
    settlement = run.settlement = decide(run, Fixed())
    assert isinstance(settlement, Cancelled) and settlement.outcome == "cancelled"
    Tracking().after(run)  # the record gets no result: the script that releases it ends it cancelled
    assert run.settlement == Cancelled(tracked=Tracked(TRACKED_ID, 0.25))


@pytest.mark.parametrize("retry", [1, 3])
def test_a_run_that_raised_with_retries_left_is_requeued_with_one_less(retry):
    task = PyTask("m:f", [1], retry=retry)
    settlement = decide(ran(task, ValueError("no")), Fixed())
    assert settlement == Requeue(task.with_retry(retry - 1).serialize())


def test_a_run_of_a_task_that_retries_forever_is_rescheduled_as_it_was_after_the_policy_s_delay():
    task = PyTask("m:f", [1], retry=-1)
    assert decide(ran(task, ValueError("no")), Fixed()) == Reschedule(task.serialize(), NOW + 0.5)


@pytest.mark.parametrize("attempt", [0, 1, 2])
def test_a_run_with_max_retries_left_is_rescheduled_after_its_backoff_with_the_attempt_counted(attempt):
    task = PyTask("m:f", [1], max_retries=3).with_options(attempt=attempt)
    settlement = decide(ran(task, ValueError("no")), Fixed())
    assert settlement == Reschedule(task.with_options(attempt=attempt + 1).serialize(), NOW + 10.0 * (attempt + 1))


def test_a_run_out_of_max_retries_is_dead_lettered_whatever_its_retry():
    task = PyTask("m:f", [1], max_retries=2, retry=5).with_options(attempt=2)
    settlement = decide(ran(task, ValueError("no")), Fixed())
    assert isinstance(settlement, Bury) and settlement.reason == Reason.FAILED


def test_a_run_out_of_retries_is_dead_lettered_with_its_error_and_traceback():
    try:
        raise ValueError("no luck")
    except ValueError as exc:
        error = exc
    task = PyTask("m:f", [1])
    settlement = decide(ran(task, error), Fixed())
    assert isinstance(settlement, Bury) and settlement.letter["task"] == task.serialize()
    letter = record(settlement)
    assert letter.pop("traceback").endswith("ValueError: no luck\n")
    assert letter == {"reason": "failed", "error": "ValueError: no luck", "func": "m:f", "queue": "q",
                      "worker": "delayed-py-test", "failed_at": "2023-11-14T22:13:20.000+00:00"}


def test_skip_retry_dead_letters_at_once_whatever_retries_are_left():
    for task in (PyTask("m:f", retry=5), PyTask("m:f", retry=-1), PyTask("m:f", max_retries=5)):
        settlement = decide(ran(task, SkipRetry("hopeless")), Fixed())
        assert isinstance(settlement, Bury) and record(settlement)["reason"] == "failed"


def test_a_time_out_is_retried_like_any_failure_and_dead_lettered_as_timed_out():
    exceeded = TimeLimitExceeded("ran longer than its time limit of 1 s")
    assert isinstance(decide(ran(PyTask("m:f", retry=1), exceeded), Fixed()), Requeue)
    settlement = decide(ran(PyTask("m:f"), exceeded), Fixed())
    assert isinstance(settlement, Bury) and settlement.reason == Reason.TIMED_OUT
    assert record(settlement)["error"] == "TimeLimitExceeded: ran longer than its time limit of 1 s"


@pytest.mark.parametrize("reason", [Reason.BAD_ARGUMENTS, Reason.NOT_ALLOWED])
def test_a_refused_task_is_dead_lettered_for_its_reason_never_retried(reason):
    for task in (PyTask("m:f", retry=5), PyTask("m:f", retry=-1), PyTask("m:f", max_retries=5)):
        settlement = decide(refused(task, reason, "TypeError: f() missing a required argument: 'a'"), Fixed())
        assert isinstance(settlement, Bury) and settlement.reason == reason
        assert record(settlement)["error"] == "TypeError: f() missing a required argument: 'a'"
        assert "traceback" not in record(settlement)


@pytest.mark.parametrize("blob, reason", [
    (b"\xc1", Reason.MALFORMED),
    (msgpack.packb(["m:f", "not a list"]), Reason.MALFORMED),
    (GoTask("main.F", 1).serialize(), Reason.GO_TASK),
])
def test_a_blob_that_did_not_decode_is_dead_lettered_as_it_is(blob, reason):
    run = Run(blob, QUEUE)
    run.refuse(reason, "not a task", None)
    settlement = decide(run, Fixed())
    assert isinstance(settlement, Bury) and settlement.letter["task"] == blob
    assert (settlement.reason, settlement.lock, record(settlement)["func"]) == (reason, None, None)


def test_a_unique_task_that_ended_releases_its_lock_and_one_that_runs_again_keeps_it():
    task = PyTask("m:f", [1], retry=1).with_options(unique_key="k", unique_token="t")
    lock = ("k", "t")
    assert decide(ran(task), Fixed()) == Release(lock)
    assert decide(ran(task, ValueError("no")), Fixed()).lock is None  # a Requeue: it still holds the lock
    assert decide(ran(task.with_retry(0), ValueError("no")), Fixed()).lock == lock
    assert decide(refused(task, Reason.NOT_ALLOWED, "not allowed"), Fixed()).lock == lock
    assert decide(refused(task, Reason.BAD_ARGUMENTS, "bad"), Fixed()).lock == lock


def test_a_run_its_limits_held_back_is_held_keeping_its_unique_lock_and_its_record_untouched():
    task = PyTask("m:f", [1], concurrency_limit=1).with_options(unique_key="k", unique_token="t", id=TRACKED_ID)
    run = Run(task.serialize(), QUEUE)
    run.task = task
    run.hold(Held("waiting"))
    assert tracked(run) == Held("waiting")  # admit.lua moved it and wrote its record: nothing more to send
    assert decide(run, Fixed()).lock is None  # it runs later, still holding its lock


def tracked(run: Run) -> Settlement:
    """How run is settled once decide() and the Tracking middleware have had it."""
    run.settlement = decide(run, Fixed())
    Tracking().after(run)
    return run.settlement


def test_a_tracked_task_s_settlement_carries_what_its_record_gets():
    task = PyTask("m:f", [1], retry=1).with_options(id=TRACKED_ID)
    assert tracked(ran(task, result=[1, "two"])) == Release(tracked=Tracked(TRACKED_ID, 0.25, msgpack.packb([1, "two"])))
    retried = tracked(ran(task, ValueError("no")))
    assert isinstance(retried, Requeue) and retried.tracked == Tracked(TRACKED_ID, 0.25, error="ValueError: no")
    failed = tracked(ran(task.with_retry(0), ValueError("no")))
    assert isinstance(failed, Bury) and failed.tracked == Tracked(TRACKED_ID, status="failed", error="ValueError: no")
    dead = tracked(refused(task, Reason.NOT_ALLOWED, "'m:f' is not allowed"))
    assert dead.tracked == Tracked(TRACKED_ID, status="dead", error="'m:f' is not allowed")
    assert tracked(ran(PyTask("m:f", [1]), result=3)) is RELEASE  # untracked: nothing to carry


def test_a_tracked_blob_that_did_not_decode_still_gets_its_record_ended():
    blob = PyTask("m:f", [1]).with_options(id=TRACKED_ID).serialize()
    blob = blob.replace(b"m:f", b"m:\xff")  # the func path no longer decodes
    run = Run(blob, QUEUE)
    run.refuse(Reason.MALFORMED, "not UTF-8")
    assert tracked(run).tracked == Tracked(TRACKED_ID, status="dead", error="not UTF-8")


def test_every_end_state_is_said_in_one_vocabulary():
    # A dead letter's reason says which status its record ends in; a settlement's outcome (the observe
    # hook's, the metrics' label) is that status, or retried for retrying, or held for a task its limits
    # held back (it did not end: it runs later); the strings are the wire's.
    assert set(STATUS_OF) == set(Reason) == set(REASONS)
    assert {reason for reason, status in STATUS_OF.items() if status == Status.FAILED} == {
        Reason.FAILED, Reason.TIMED_OUT, Reason.BAD_ARGUMENTS}
    assert set(STATUS_OF.values()) == {Status.FAILED, Status.DEAD} <= set(ENDED)
    assert [outcome.value for outcome in Outcome] == ["done", "retried", "failed", "dead", "held", "cancelled"]
    assert OUTCOME_OF == {Status.DONE: "done", Status.RETRYING: "retried", Status.FAILED: "failed",
                          Status.DEAD: "dead", Status.CANCELLED: "cancelled"}
    settlements = [Release(), Requeue(b""), Reschedule(b"", 0.0), Bury(Reason.TIMED_OUT, {}), Bury(Reason.NOT_ALLOWED, {}),
                   Held("waiting"), Held("scheduled", 1.0), Cancelled()]
    assert [settlement.outcome for settlement in settlements] == ["done", "retried", "retried", "failed", "dead", "held",
                                                                  "held", "cancelled"]
    assert [settlement.status for settlement in settlements[-3:-1]] == [Status.PENDING, Status.SCHEDULED]
