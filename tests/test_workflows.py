"""Workflows on a Queue, end to end on a real Redis with real workers: chain, group (with and without a
callback, "stop" and "pass" on a member's failure), depends_on, on_success and on_failure, nesting,
steps on other queues, delays, cancel, failure and its requeue, expiry, and what enqueue refuses.

The workers here are burst workers run to the end in the test's thread: a workflow moves on only
through them, so each test knows exactly what ran before it looks.
"""
import datetime
import re
import subprocess
import sys
import threading
import time
import uuid

import pytest

from delayed import FlowStatus, PyTask, Queue, Step, StepFailed, TaskHandle, Worker, WorkflowHandle, chain, group
from delayed.errors import TaskFailedError, TaskNotFoundError
from delayed.ops.cli import main as delayed_main
from delayed.wire import tracking
from delayed.wire.options import MAX_SECONDS

from .conftest import ROOT, WAIT, wait_for
from .flow_tasks import received

ALLOW = ["tests.flow_tasks", "tests.tasks"]


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


def task(name, *args, **options):
    """A PyTask of tests.flow_tasks."""
    return PyTask("tests.flow_tasks:" + name, list(args), **options)


def takes(name, *args, **step):
    """A Step of tests.flow_tasks that takes the result of the steps before it."""
    return Step(task(name, *args), takes_result=True, **step)


def drain(conn, *names):
    """Run a burst worker on the named queues (default "q") until they are empty."""
    Worker([Queue(name, conn) for name in names or ("q",)], ALLOW, burst=True).run(handle_signals=False)


def statuses(handle):
    return [step.status() for step in handle.steps()]


def snapshot(conn):
    """Every key and its DUMP: whether anything at all was written."""
    return {key: conn.dump(key) for key in conn.keys("*")}


def counts(conn, queue="q"):
    return {key.decode(): int(value) for key, value in conn.hgetall(queue + "_counts").items()}


def failed_as_data(step, error):
    """What tests.flow_tasks.got records for a StepFailed of step (a TaskHandle) that failed with error."""
    info = step.info()
    return ["StepFailed", step.id, info.func, "failed", error]


# chain


def test_a_chain_runs_its_steps_in_order_each_taking_the_previous_result_only_if_it_asks(conn, queue):
    handle = queue.enqueue(chain(task("plain", 1), takes("got", "b"), task("got", "c", "own"), takes("got", "d")),
                           result_ttl=60)
    assert isinstance(handle, WorkflowHandle) and len(handle.id) == 32
    assert handle.status() == FlowStatus.RUNNING
    assert statuses(handle) == ["pending", "waiting", "waiting", "waiting"]
    assert conn.llen("q") == 1  # only the first step is in the queue
    drain(conn)
    assert received(conn, "b") == [[1]]         # takes_result: the previous result as an extra last argument
    assert received(conn, "c") == [["own"]]     # without it, nothing is passed
    assert received(conn, "d") == [[["own"]]]
    assert handle.result(timeout=WAIT) == [["own"]]
    assert handle.status() == FlowStatus.DONE
    info = handle.info()
    assert (info.total, info.left, info.failed, info.error, info.shape) == (4, 0, None, None, "one")
    assert info.final == [info.steps[-1]] and info.created_at <= info.finished_at
    assert counts(conn)["workflows_started"] == counts(conn)["workflows_done"] == 1


def test_a_chain_after_a_group_without_callback_receives_the_list_of_its_results(conn, queue):
    handle = queue.enqueue(chain(group([task("plain", 1), task("plain", 2), task("plain", 3)]), takes("got", "after"),
                                 group([task("plain", 4)]), task("got", "blind")))
    drain(conn)
    assert received(conn, "after") == [[[1, 2, 3]]]
    assert received(conn, "blind") == [[]]  # a step that takes no result gets nothing, even after a group
    assert handle.result(timeout=WAIT) == []


# group


def test_a_group_s_callback_runs_once_with_the_results_in_member_order_whatever_order_they_finished_in(conn, queue):
    # member 0 runs on a queue no worker serves until the others are done: it finishes last
    members = [Step(task("plain", 0), queue="late")] + [task("plain", n) for n in range(1, 5)]
    handle = queue.enqueue(group(members, callback=task("got", "callback")))
    drain(conn)
    steps = handle.steps()
    assert [step.status() for step in steps] == ["pending"] + ["done"] * 4 + ["waiting"]
    assert received(conn, "callback") == [] and handle.status() == FlowStatus.RUNNING
    drain(conn, "late")
    assert steps[-1].status() == "pending"  # released by the script that settled member 0
    drain(conn)
    assert steps[0].info().finished_at > max(step.info().finished_at for step in steps[1:5])
    assert received(conn, "callback") == [[[0, 1, 2, 3, 4]]]  # exactly once
    assert handle.result(timeout=WAIT) == [[0, 1, 2, 3, 4]]
    assert not [field for field in conn.hkeys(f"q_task:{steps[-1].id}") if field.startswith(b"in:")]


def test_a_group_without_callback_has_the_list_of_its_members_results_as_its_result(conn, queue):
    handle = queue.enqueue(group([Step(task("plain", "first"), queue="late"), task("plain", "second"),
                                  task("plain", {"third": 3})]))
    drain(conn)
    assert handle.status() == FlowStatus.RUNNING
    drain(conn, "late")
    assert handle.result(timeout=WAIT) == ["first", "second", {"third": 3}]
    assert handle.info().shape == "list"


def test_a_failed_member_stops_the_callback_until_its_dead_letter_is_requeued(conn, queue):
    handle = queue.enqueue(group([task("plain", 1), task("flaky", "member", 2), task("plain", 3)],
                                 callback=task("got", "callback")), result_ttl=60)
    drain(conn)
    member, callback = handle.steps()[1], handle.steps()[3]
    assert (member.status(), callback.status()) == ("failed", "waiting")
    info = handle.info()
    assert info.status == FlowStatus.FAILED and info.failed == ("q", member.id)
    assert info.error == "failed: ValueError: member fails once"
    with pytest.raises(TaskFailedError, match=f"step {member.id} in q failed: ValueError: member fails once"):
        handle.result(timeout=WAIT)
    assert counts(conn)["workflows_failed"] == 1
    assert queue.dead.requeue([member.info().letter]) == 1
    drain(conn)
    assert received(conn, "callback") == [[[1, 2, 3]]]  # once, with every result
    assert handle.result(timeout=WAIT) == [[1, 2, 3]]
    info = handle.info()
    assert (info.status, info.failed, info.error, info.left) == (FlowStatus.DONE, None, None, 0)


def test_with_pass_a_failed_member_s_place_holds_a_step_failed_and_the_workflow_is_done(conn, queue):
    handle = queue.enqueue(group([task("plain", 1), task("boom", "member"), task("plain", 3)],
                                 callback=task("got", "callback"), on_member_failure="pass"), result_ttl=60)
    drain(conn)
    member = handle.steps()[1]
    expected = [1, failed_as_data(member, "ValueError: member fails"), 3]
    assert received(conn, "callback") == [[expected]]
    assert handle.status() == FlowStatus.DONE and handle.result(timeout=WAIT) == [expected]
    assert member.status() == "failed"
    assert int(conn.get("boom:member")) == 1


@pytest.mark.parametrize("last_digit", ["0", "f"])
def test_with_pass_the_workflow_is_done_whatever_its_ids_end_with(conn, queue, monkeypatch, last_digit):
    """A record key in a step's `next` edges ends with its id: one ending in "f" is no on_failure edge."""
    monkeypatch.setattr(tracking, "new_id", lambda: uuid.uuid4().hex[:-1] + last_digit)
    handle = queue.enqueue(group([task("boom", "member")], callback=task("got", "callback"), on_member_failure="pass"))
    drain(conn)
    assert handle.steps()[1].id.endswith(last_digit)
    assert handle.status() == FlowStatus.DONE and handle.info().failed is None
    assert counts(conn)["workflows_done"] == 1 and "workflows_failed" not in counts(conn)


def test_a_step_failed_reaches_the_callback_as_an_exception_it_can_raise(conn, queue):
    """The callback gets a StepFailed itself (tests.flow_tasks.got shows it as a list): check the type."""
    handle = queue.enqueue(group([task("boom", "member")], callback=PyTask("tests.tasks:record", ["cb"]),
                                 on_member_failure="pass"))
    drain(conn)
    assert handle.status() == FlowStatus.DONE
    [call] = [item.decode() for item in conn.lrange("results", 0, -1)]
    member = handle.steps()[0]
    assert call == repr(("cb", ([StepFailed(member.id, "tests.flow_tasks:boom", "failed", "ValueError: member fails")],),
                         {}))


# a chain's failure


def test_a_failed_step_stops_its_successors_until_requeued_then_the_chain_goes_on(conn, queue, redis_server):
    handle = queue.enqueue(chain(task("plain", 1), takes("flaky", "middle"), takes("got", "last")), result_ttl=60)
    drain(conn)
    first, middle, last = handle.steps()
    assert [first.status(), middle.status(), last.status()] == ["done", "failed", "waiting"]
    assert handle.status() == FlowStatus.FAILED and handle.info().failed == ("q", middle.id)
    with pytest.raises(TaskFailedError, match=middle.id) as raised:
        handle.result(timeout=WAIT)
    assert "ValueError: middle fails once" in str(raised.value) and raised.value.info.failed == ("q", middle.id)
    # kept while it may run again: the waiting step and the workflow have no expiry, the failed step's
    # record expires in ten years (an expiry, by which the claim that runs it again tells it apart)
    assert conn.ttl(f"q_task:{last.id}") == conn.ttl(f"q_flow:{handle.id}") == -1
    assert conn.ttl(f"q_task:{middle.id}") > MAX_SECONDS - 60
    assert 0 < conn.ttl(f"q_task:{first.id}") <= 60
    assert delayed_main(["--redis-url", redis_server.url, "dead", "requeue", "--queue", "q",
                         middle.info().letter]) == 0
    drain(conn)
    assert received(conn, "last") == [[1]]  # flaky returned 1, the value it took
    assert handle.result(timeout=WAIT) == [1]
    assert [step.status() for step in (first, middle, last)] == ["done"] * 3
    for key in (f"q_task:{middle.id}", f"q_task:{last.id}", f"q_flow:{handle.id}"):
        assert 0 < conn.ttl(key) <= 60
    assert counts(conn)["workflows_failed"] == counts(conn)["workflows_done"] == 1


# cancel


def test_cancel_cancels_every_step_that_has_not_started_and_a_running_one_ends_cancelled(conn, queue):
    handle = queue.enqueue(group([chain(Step(task("gate", "running", 1), queue="held"), task("got", "after")),
                                  task("got", "pending"), task("got", "scheduled", delay=3600)],
                                 callback=task("got", "callback")), result_ttl=60)
    running, after, pending, scheduled, callback = handle.steps()
    worker = Worker(Queue("held", conn), ALLOW, dequeue_timeout=0.05)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    thread.start()
    try:
        wait_for(lambda: conn.exists("started:running"), what="the first step to start")
        assert [step.status() for step in handle.steps()] == ["running", "waiting", "pending", "scheduled", "waiting"]
        outcome = handle.cancel()
        assert outcome.cancelled and "4 step(s)" in outcome.reason
        assert "cancel requested of 1 running step(s)" in outcome.reason
        assert running.info().cancel_requested_at is not None
        assert [step.status() for step in (after, pending, scheduled, callback)] == ["cancelled"] * 4
        assert conn.llen("q") == conn.llen("q_noti") == conn.zcard("q_scheduled") == 0
        assert handle.status() == FlowStatus.CANCELLED
        conn.set("open:running", 1)  # it ignores the cancel and returns: it ends cancelled all the same
        wait_for(lambda: running.status() == "cancelled", what="the running step to end")
        assert running.info().result is None
    finally:
        conn.set("open:running", 1)
        worker.stop()
        thread.join(WAIT)
    drain(conn)
    assert not conn.keys("got:*")  # nothing ran after it, nor instead of the cancelled steps
    assert handle.status() == FlowStatus.CANCELLED
    with pytest.raises(TaskFailedError, match="cancelled"):
        handle.result(timeout=WAIT)
    assert not handle.cancel()  # it had ended


def test_cancelling_one_waiting_step_cancels_the_steps_that_needed_it(conn, queue):
    handle = queue.enqueue(group([chain(task("plain", 1), takes("got", "b"), takes("got", "c")), task("plain", 2)],
                                 callback=task("got", "callback")))
    first, second, third, other, callback = handle.steps()
    assert queue.cancel(second.id).cancelled
    assert [third.status(), callback.status()] == ["cancelled", "cancelled"]
    assert first.status() == other.status() == "pending"  # what it did not need runs
    drain(conn)
    assert not conn.keys("got:*")
    assert first.status() == other.status() == "done"
    assert handle.info().left == 0


# depends_on


def test_depends_on_a_done_task_runs_at_once_with_its_result(conn, queue):
    before = queue.enqueue(task("plain", 5), result_ttl=60)
    drain(conn)
    handle = queue.enqueue(takes("got", "after"), depends_on=[before])
    [step] = handle.steps()
    assert step.status() == "pending" and conn.llen("q") == 1
    drain(conn)
    assert received(conn, "after") == [[[5]]]  # depends_on's results come as a list
    assert handle.result(timeout=WAIT) == [[5]]


def test_depends_on_a_pending_task_waits_for_it(conn, queue):
    first = queue.enqueue(task("plain", "a"), result_ttl=60)
    second = queue.enqueue(task("plain", "b"), result_ttl=60)
    handle = queue.enqueue(takes("got", "after"), depends_on=[first, second])
    assert handle.steps()[0].status() == "waiting" and conn.llen("q") == 2
    drain(conn)
    assert received(conn, "after") == [[["a", "b"]]]


def test_depends_on_a_failed_task_waits_until_it_is_requeued_and_keeps_its_record(conn, queue):
    before = queue.enqueue(task("flaky", "before", 7), result_ttl=60)
    drain(conn)
    assert before.status() == "failed" and 0 < conn.ttl(f"q_task:{before.id}") <= 60
    handle = queue.enqueue(takes("got", "after"), depends_on=[before])
    assert handle.steps()[0].status() == "waiting"
    assert conn.ttl(f"q_task:{before.id}") > MAX_SECONDS - 60  # it must outlive its requeue, to release the step
    drain(conn)
    assert received(conn, "after") == []
    queue.dead.requeue([before.info().letter])
    drain(conn)
    assert received(conn, "after") == [[[7]]]
    assert handle.status() == FlowStatus.DONE


@pytest.mark.parametrize("how", ["missing", "cancelled", "untracked"])
def test_depends_on_a_missing_or_cancelled_task_raises_and_writes_nothing(conn, queue, how):
    if how == "missing":
        before = queue.task("0123456789abcdef0123456789abcdef")
    elif how == "untracked":
        before = TaskHandle(queue, "fedcba9876543210fedcba9876543210")
        queue.enqueue(task("plain", 1))
    else:
        before = queue.enqueue(task("plain", 1), delay=3600, result_ttl=60)
        assert before.cancel()
    already = snapshot(conn)
    with pytest.raises(TaskNotFoundError, match=before.id):
        queue.enqueue(chain(task("plain", 1), task("plain", 2)), depends_on=[before], on_success=task("plain", 3))
    assert snapshot(conn) == already


# on_success, on_failure


def test_on_success_runs_after_a_success_and_on_failure_ends_cancelled(conn, queue):
    handle = queue.enqueue(task("plain", 1), on_success=takes("got", "success"), on_failure=takes("got", "failure"),
                           result_ttl=60)
    main, success, failure = handle.steps()
    drain(conn)
    assert received(conn, "success") == [[1]] and received(conn, "failure") == []
    assert (success.status(), failure.status()) == ("done", "cancelled")
    assert handle.status() == FlowStatus.DONE and handle.result(timeout=WAIT) == 1  # the task's own result


def test_on_failure_runs_with_a_step_failed_and_on_success_ends_cancelled(conn, queue):
    handle = queue.enqueue(task("boom", "main"), on_success=takes("got", "success"),
                           on_failure=takes("got", "failure"), result_ttl=60)
    main, success, failure = handle.steps()
    drain(conn)
    assert received(conn, "failure") == [[failed_as_data(main, "ValueError: main fails")]]
    assert received(conn, "success") == []
    assert (main.status(), success.status(), failure.status()) == ("failed", "cancelled", "done")
    info = handle.info()
    assert (info.status, info.left) == (FlowStatus.FAILED, 0)  # it ended, a step failed on the way
    assert 0 < conn.ttl(f"q_task:{main.id}") <= 60  # its failure was taken: nothing waits for it to run again
    with pytest.raises(TaskFailedError):
        handle.result(timeout=WAIT)


def test_a_group_s_on_failure_runs_at_its_first_failing_member_and_on_success_ends_cancelled(conn, queue):
    """on_failure watches every member: the first failure runs it (the others need not end), and what
    needed the failed member to succeed is cancelled; the workflow ends failed."""
    handle = queue.enqueue(group([task("flaky", "member", 1), task("plain", 2)]), on_success=takes("got", "success"),
                           on_failure=takes("got", "failure"))
    member, plain, success, failure = handle.steps()
    drain(conn)
    assert received(conn, "failure") == [[failed_as_data(member, "ValueError: member fails once")]]
    assert received(conn, "success") == []
    assert [step.status() for step in handle.steps()] == ["failed", "done", "cancelled", "done"]
    info = handle.info()
    assert (info.status, info.left, info.failed) == (FlowStatus.FAILED, 0, ("q", member.id))
    assert info.error == "failed: ValueError: member fails once"


def test_on_failure_of_a_chain_runs_when_a_middle_step_fails(conn, queue):
    """A chain's on_failure hears from every step, not only the last: the steps after the failed one
    are cancelled, the on_failure step runs once, and the workflow ends failed."""
    handle = queue.enqueue(chain(task("plain", 1), task("boom", "middle"), task("got", "last")),
                           on_failure=takes("got", "failure"))
    first, middle, last, failure = handle.steps()
    drain(conn)
    assert received(conn, "failure") == [[failed_as_data(middle, "ValueError: middle fails")]]
    assert received(conn, "last") == []
    assert [step.status() for step in handle.steps()] == ["done", "failed", "cancelled", "done"]
    assert handle.status() == FlowStatus.FAILED


def test_two_stopped_members_keep_the_workflow_failed_until_both_ran_again(conn, queue):
    """The workflow names every step whose failure stops it: requeuing one leaves it failed, naming
    the other, and it runs on once both were requeued."""
    handle = queue.enqueue(group([task("flaky", "a", 1), task("flaky", "b", 2)], callback=takes("got", "callback")))
    a, b, callback = handle.steps()
    drain(conn)
    assert {handle.info().failed} <= {("q", a.id), ("q", b.id)} and handle.status() == FlowStatus.FAILED
    queue.dead.requeue([a.info().letter])
    drain(conn)
    info = handle.info()
    assert (info.status, info.failed) == (FlowStatus.FAILED, ("q", b.id))
    queue.dead.requeue([b.info().letter])
    drain(conn)
    assert received(conn, "callback") == [[[1, 2]]]
    assert handle.status() == FlowStatus.DONE
    assert conn.hget("q_counts", "workflows_failed") == b"1"  # counted once, however many steps failed


def test_a_step_cancelled_on_its_own_ends_its_workflow_cancelled(conn, queue):
    handle = queue.enqueue(chain(task("plain", 1), task("got", "second")), delay=60)
    first, second = handle.steps()
    assert queue.cancel(first.id)
    assert [step.status() for step in handle.steps()] == ["cancelled", "cancelled"]
    assert handle.status() == FlowStatus.CANCELLED
    assert conn.hget("q_counts", "workflows_done") is None


def test_depends_on_takes_no_delay(conn, queue):
    done = queue.enqueue(task("plain", 1), result_ttl=60)
    with pytest.raises(ValueError, match="depends_on"):
        queue.enqueue(task("got", "x"), depends_on=[done], delay=5)


# nesting, queues, time


def test_a_chain_of_groups(conn, queue):
    handle = queue.enqueue(chain(group([task("plain", 1), task("plain", 2)]),
                                 group([takes("got", "x"), takes("got", "y")], callback=task("got", "callback")),
                                 takes("got", "last")))
    drain(conn)
    assert received(conn, "x") == received(conn, "y") == [[[1, 2]]]
    assert received(conn, "callback") == [[[[[1, 2]], [[1, 2]]]]]
    assert received(conn, "last") == [[[[[[1, 2]], [[1, 2]]]]]]
    assert handle.result(timeout=WAIT) == received(conn, "last")[0]


def test_a_group_of_chains(conn, queue):
    handle = queue.enqueue(group([chain(task("plain", 1), takes("got", "a")),
                                  chain(task("plain", 2), takes("got", "b"), takes("got", "c"))],
                                 callback=task("got", "callback")))
    drain(conn)
    assert received(conn, "callback") == [[[[1], [[2]]]]]
    assert handle.result(timeout=WAIT) == [[[1], [[2]]]]
    assert handle.info().total == 6


def test_a_step_runs_on_the_queue_its_step_names(conn, queue):
    handle = queue.enqueue(chain(task("plain", 1), takes("got", "other", queue="other")), result_ttl=60)
    first, second = handle.steps()
    assert (first.queue.name, second.queue.name) == ("q", "other")
    assert conn.exists(f"other_task:{second.id}") and not conn.exists(f"q_task:{second.id}")
    drain(conn)
    assert second.status() == "pending" and conn.llen("other") == conn.llen("other_noti") == 1 and not conn.llen("q")
    drain(conn, "other")
    assert received(conn, "other") == [[1]]
    assert handle.result(timeout=WAIT) == [1]
    assert counts(conn, "other")["done"] == 1 and "workflows_done" not in counts(conn, "other")
    assert counts(conn)["workflows_done"] == 1  # the workflow counts on the queue it was enqueued on


def test_delay_and_at_delay_the_first_steps_only(conn, queue):
    before = time.time()
    handle = queue.enqueue(group([task("plain", 1), task("plain", 2)], callback=task("got", "callback")), delay=3600)
    assert [step.status() for step in handle.steps()] == ["scheduled", "scheduled", "waiting"]
    scores = [score for _, score in conn.zrange("q_scheduled", 0, -1, withscores=True)]
    assert len(scores) == 2 and all(before + 3600 <= score <= time.time() + 3600 for score in scores)
    assert not conn.llen("q")
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=2)
    later = queue.enqueue(chain(task("plain", 3), task("got", "later")), at=at)
    assert conn.zscore("q_scheduled", conn.zrange("q_scheduled", -1, -1)[0]) == pytest.approx(at.timestamp())
    assert [step.status() for step in later.steps()] == ["scheduled", "waiting"]
    for member in conn.zrange("q_scheduled", 0, -1):  # due now: they run, and what follows them
        conn.zadd("q_scheduled", {member: 1})
    drain(conn)
    assert received(conn, "callback") == [[[1, 2]]] and received(conn, "later") == [[]]
    assert handle.status() == later.status() == FlowStatus.DONE


# what enqueue refuses, writing nothing


@pytest.mark.parametrize("build, error", [
    (lambda: chain(), ValueError),
    (lambda: group([]), ValueError),
    (lambda: group([task("plain", 1)], on_member_failure="later"), ValueError),
])
def test_an_empty_or_ill_made_workflow_is_refused_as_it_is_built(build, error):
    with pytest.raises(error):
        build()


@pytest.mark.parametrize("workflow, options, error, says", [
    (lambda: chain(task("plain", 1), task("plain", 2, unique_for=60)), {}, TypeError, "unique_for"),
    (lambda: group([task("plain", 1, unique_for=60)]), {}, TypeError, "unique"),
    (lambda: chain(task("plain", 1), task("plain", 2, delay=5)), {}, ValueError, "delay"),
    (lambda: group([task("plain", 1)], callback=task("got", "c", at=datetime.datetime.now(datetime.timezone.utc))), {}, ValueError,
     "delay or at"),
    (lambda: chain(task("plain", 1, result_ttl=5)), {}, TypeError, "result_ttl"),
    (lambda: chain(task("plain", 1), task("plain", 2)), {"unique_for": 60}, TypeError, "unique_for"),
    (lambda: chain(task("plain", 1), task("plain", 2)), {"max_retries": 3}, TypeError, "max_retries"),
    (lambda: group([task("plain", 1)]), {"unique_key": "k"}, TypeError, "unique_key"),
])
def test_enqueue_refuses_what_a_workflow_cannot_honour_and_writes_nothing(conn, queue, workflow, options, error, says):
    queue.enqueue(task("plain", 0), result_ttl=60)  # something to keep unchanged
    already = snapshot(conn)
    with pytest.raises(error, match=says):
        queue.enqueue(workflow(), **options)
    assert snapshot(conn) == already


@pytest.mark.parametrize("name", ["jobs|high", "jobs;high", "jobs\nhigh"])
def test_a_queue_whose_name_holds_a_separator_of_the_records_takes_no_workflow(conn, name):
    """A step's `next` edges are "<when>|<record key>|<slot>;" entries, a workflow's steps one per line: a
    queue named "jobs|high" made its steps' successors unreadable, and they waited forever."""
    with pytest.raises(ValueError, match="cannot hold"):
        Queue(name, conn).enqueue(chain(task("plain", 1), task("plain", 2)))
    with pytest.raises(ValueError, match="cannot hold"):
        Queue("q", conn).enqueue(chain(task("plain", 1), Step(task("plain", 2), queue=name)))
    assert conn.dbsize() == 0


# expiry


def test_records_and_the_workflow_expire_result_ttl_after_the_end(conn, queue):
    handle = queue.enqueue(chain(task("plain", 1), Step(task("plain", 2), queue="other")), result_ttl=30)
    keys = [f"q_flow:{handle.id}"] + [f"{step.queue.name}_task:{step.id}" for step in handle.steps()]
    assert [conn.ttl(key) for key in keys] == [-1, -1, -1]
    drain(conn)
    assert conn.ttl(keys[0]) == -1 and 0 < conn.ttl(keys[1]) <= 30  # the workflow runs on: its hash stays
    drain(conn, "other")
    assert all(0 < conn.ttl(key) <= 30 for key in keys)
    short = queue.enqueue(group([task("plain", 1), task("plain", 2)]), result_ttl=1)
    drain(conn)
    gone = [f"q_flow:{short.id}"] + [f"q_task:{step.id}" for step in short.steps()]
    wait_for(lambda: not any(conn.exists(key) for key in gone), what="the short workflow's keys to expire")


# handles


def test_steps_are_handles_on_their_own_queues_in_the_order_the_workflow_lists_them(conn, queue):
    handle = queue.enqueue(group([task("plain", 1), Step(task("plain", 2), queue="b")],
                                 callback=Step(task("got", "c"), queue="c")))
    steps = handle.steps()
    assert all(isinstance(step, TaskHandle) for step in steps)
    assert [(step.queue.name, step.info().func) for step in steps] == [
        ("q", "tests.flow_tasks:plain"), ("b", "tests.flow_tasks:plain"), ("c", "tests.flow_tasks:got")]
    assert [step.id for step in steps] == [task_id for _, task_id in handle.info().steps]


def test_a_workflow_is_read_by_its_id_from_another_process(conn, queue, redis_server):
    handle = queue.enqueue(chain(task("plain", 20), takes("got", "x")), result_ttl=60)
    code = ("import sys; from delayed import Queue, connect; handle = Queue('q', connect(sys.argv[1])).workflow(sys.argv[2]);"
            "print(handle.status(), handle.result(timeout=60), len(handle.steps()))")
    reader = subprocess.Popen([sys.executable, "-c", code, redis_server.url, handle.id], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    drain(conn)
    output, _ = reader.communicate(timeout=WAIT)
    assert reader.returncode == 0, output
    status, result = output.split(" ", 1)
    assert status in ("running", "done") and result.strip() == "[20] 2"
    with pytest.raises(TaskNotFoundError):
        Queue("other", conn).workflow(handle.id).status()  # a workflow is read on the queue it was enqueued on


def test_a_stopped_step_s_record_is_kept_for_max_seconds_as_flow_lua_says():
    """flow.lua's KEPT_SECONDS is options.py's MAX_SECONDS: the longest any expiry delayed sets."""
    source = (ROOT / "delayed" / "protocol" / "lua" / "flow.lua").read_text()
    [kept] = re.findall(r"^local KEPT_SECONDS = (\d+)$", source, re.M)
    assert int(kept) == MAX_SECONDS

