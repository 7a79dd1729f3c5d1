"""Cancelling a running task: the request in its record and on the queue's cancels channel, the worker that
stops it (a coroutine's CancelledError, a thread's `delayed.current().cancelled`, a claimed task not
called), and the scripts that end it cancelled whatever it does: released, retried, dead-lettered, given
back, or requeued by a sweeper after its worker died; a worker that missed the message still ends it so."""
import contextlib
import logging
import signal
import threading

import msgpack
import pytest
import redis

from delayed import Middleware, PyTask, Queue, Worker, chain
from delayed.errors import TaskFailedError
from delayed.protocol.sweeper_ops import SweeperOps
from delayed.protocol.worker_ops import WorkerOps
from delayed.wire import dead_letter
from delayed.wire.tracking import Tracked
from delayed.worker.cancels import Cancels, Listening
from delayed.worker.holding import Cancelled

from .conftest import WAIT, WORKER_TIMING, finish, results, spawn, stop, wait_for

HOLDER = "delayed-py-" + "c" * 32
"""A worker id of ours that no live worker has: a claim made by hand, or a dead worker's."""


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


def subscribed(conn, queue="q"):
    """How many connections listen on a queue's cancels channel."""
    return conn.pubsub_numsub(queue + "_cancels")[0][1]


def claimed(queue, task, **options):
    """A tracked task enqueued and claimed by HOLDER, as a worker claims it: its handle and blob."""
    handle = queue.enqueue(task, result_ttl=60, **options)
    [(_, blob)] = WorkerOps(queue).claim_batch((), (HOLDER,)).tasks
    return handle, blob


def ended_cancelled(handle):
    info = handle.info()
    return info.status == "cancelled" and info.result is None and info.cancel_requested_at is not None


# The request


def test_a_running_task_s_cancel_is_noted_in_its_record_and_its_id_published(conn, queue):
    handle, _ = claimed(queue, PyTask("m:f"))
    listener = conn.pubsub(ignore_subscribe_messages=True)
    listener.subscribe("q_cancels")
    listener.get_message(timeout=1)  # the subscription's own reply
    outcome = handle.cancel()
    assert outcome and outcome.requested and not outcome.cancelled
    assert (outcome.status, outcome.worker) == ("running", HOLDER)
    assert listener.get_message(timeout=WAIT)["data"] == handle.id.encode()
    info = handle.info()
    assert info.status == "running" and info.cancel_requested_at is not None
    assert handle.cancel().requested  # asked again: requested again
    listener.close()


@pytest.mark.parametrize("settle", ["release", "requeue", "reschedule", "bury"])
def test_whatever_settles_a_task_whose_cancel_was_requested_ends_it_cancelled_uncounted(conn, queue, settle):
    handle, blob = claimed(queue, PyTask("m:f", retry=3))
    assert handle.cancel().requested
    ops = WorkerOps(queue)
    if settle == "release":
        ops.claim_batch([HOLDER], (), tracked={HOLDER: Tracked(handle.id, result=msgpack.packb("kept?"))})
    elif settle == "requeue":
        assert ops.requeue(blob, blob, HOLDER, Tracked(handle.id, error="boom"))
    elif settle == "reschedule":
        assert ops.reschedule(blob, blob, 0, HOLDER, Tracked(handle.id, error="boom"))
    else:
        letter = dead_letter.record(reason="failed", error="boom", blob=blob, queue="q", worker=HOLDER)
        assert queue.dead.bury(HOLDER, blob, letter, Tracked(handle.id, status="failed", error="boom"))
    assert ended_cancelled(handle) and handle.info().error is None
    assert conn.hlen("q_processing") == conn.llen("q") == conn.zcard("q_scheduled") == 0  # never to run again
    assert conn.xlen("q_dead_letters") == 0
    assert {key: value for key, value in conn.hgetall("q_counts").items() if key != b"enqueued"} == {}


def test_a_task_given_back_unstarted_after_its_cancel_was_requested_ends_cancelled(conn, queue):
    handle, blob = claimed(queue, PyTask("m:f"))
    assert handle.cancel().requested
    assert WorkerOps(queue).give_back([(HOLDER, blob)]) == 0
    assert ended_cancelled(handle) and conn.llen("q") == conn.llen("q_noti") == 0


@pytest.mark.parametrize("max_crashes", [0, 3, 1], ids=["not-counting", "counted", "crash-loop"])
def test_a_sweeper_ends_a_dead_worker_s_task_cancelled_if_its_cancel_was_requested(conn, queue, max_crashes):
    """(A requeue counts its crash in the blob first, or dead-letters a crash loop: both end it cancelled.)"""
    handle, blob = claimed(queue, PyTask("m:f").with_options(crashes=max_crashes))  # HOLDER has no keep-alive key
    assert handle.cancel().requested
    SweeperOps(queue).sweep(max_crashes)
    assert ended_cancelled(handle)
    assert conn.hlen("q_processing") == conn.llen("q") == conn.llen("q_noti") == conn.xlen("q_dead_letters") == 0


# The worker


@pytest.mark.parametrize("time_limit", [None, 3600], ids=["no-limit", "time-limit"])
@pytest.mark.parametrize("threads", [1, 3])
def test_a_running_coroutine_gets_cancelled_error_and_ends_cancelled(conn, queue, run_worker, caplog, threads,
                                                                     time_limit):
    caplog.set_level(logging.INFO, logger="delayed.worker")
    handle = queue.enqueue(PyTask("tests.tasks:async_until_cancelled", ["co"], time_limit=time_limit), result_ttl=60)
    run_worker(threads=threads)
    wait_for(lambda: conn.exists("started:co") and subscribed(conn), what="the coroutine to start")
    assert handle.cancel().requested
    with pytest.raises(TaskFailedError, match="cancelled"):
        handle.result(timeout=WAIT)
    assert conn.lrange("cancelled", 0, -1) == [b"co"]  # it got CancelledError
    assert results(conn) == [repr(("co", (), {}))]  # and ran its finally
    assert ended_cancelled(handle) and handle.info().attempts == 1
    lines = [(record.levelname, record.getMessage()) for record in caplog.records if record.name == "delayed.worker"
             and "tests.tasks:async_until_cancelled" in record.getMessage()]
    assert lines == [("INFO", f"task {handle.id} tests.tasks:async_until_cancelled cancelled: its cancel was "
                              "requested while it ran")]
    assert conn.xlen("q_dead_letters") == 0


@pytest.mark.parametrize("threads", [1, 3])
def test_a_function_in_a_thread_sees_its_cancel_and_its_result_is_not_kept(conn, queue, run_worker, threads):
    handle = queue.enqueue(PyTask("tests.tasks:until_cancelled", ["loop"]), result_ttl=60)
    run_worker(threads=threads)
    wait_for(lambda: conn.exists("started:loop") and subscribed(conn), what="the task to start")
    assert handle.cancel().requested
    wait_for(lambda: handle.status() == "cancelled", what="the task to end")
    assert results(conn) == [repr(("loop", (), {}))]  # it saw the flag and returned "loop"
    assert ended_cancelled(handle)


class Seen(Middleware):
    """Notes what the public hooks see: each call's outcome and cancelled flag, and the errors they are told."""

    def __init__(self) -> None:
        self.ended, self.errors = [], []

    def around_call(self, call):
        return contextlib.nullcontext()  # (one overridden: the call runs inside the hooks)

    def on_call_error(self, call, error):
        self.errors.append(error)

    def after_call(self, call):
        self.ended.append((call.func_path, call.outcome, call.cancelled))


@pytest.mark.parametrize("func", ["async_until_cancelled", "until_cancelled"])
def test_middleware_sees_a_cancelled_call_s_outcome_and_no_error(conn, queue, run_worker, func):
    seen = Seen()
    handle = queue.enqueue(PyTask("tests.tasks:" + func, ["mw"]), result_ttl=60)
    run_worker(middleware=[seen])
    wait_for(lambda: conn.exists("started:mw") and subscribed(conn), what="the task to start")
    assert handle.cancel().requested
    wait_for(lambda: seen.ended, what="the call to end")
    assert seen.ended == [("tests.tasks:" + func, "cancelled", True)] and seen.errors == []


def test_a_cancelled_task_with_retries_left_is_not_retried(conn, queue, run_worker):
    handle = queue.enqueue(PyTask("tests.tasks:fail_once_cancelled", ["f"], max_retries=3), result_ttl=60)
    run_worker()
    wait_for(lambda: conn.exists("started:f") and subscribed(conn), what="the task to start")
    assert handle.cancel().requested
    wait_for(lambda: handle.status() == "cancelled", what="the task to end")
    assert handle.info().attempts == 1 and conn.zcard("q_scheduled") == conn.llen("q") == 0
    assert conn.xlen("q_dead_letters") == 0 and conn.hget("q_counts", "retried") is None


@pytest.mark.parametrize("threads", [1, 3])
def test_a_cancelled_error_a_coroutine_raises_without_a_cancel_is_a_failure(conn, queue, run_worker, threads):
    """As it was with threads; with one slot it used to end the worker's loop instead."""
    handle = queue.enqueue(PyTask("tests.tasks:async_cancels_itself", ["self"]), result_ttl=60)
    run_worker(threads=threads)
    with pytest.raises(TaskFailedError, match="failed"):
        handle.result(timeout=WAIT)
    assert conn.xlen("q_dead_letters") == 1


def test_a_task_whose_cancel_was_heard_before_it_started_is_not_called(conn, queue):
    """Its claim came after the cancel (the worker was taking it) or it waited behind running tasks: the ids
    a worker heard are remembered, and such a task is settled cancelled without its call."""
    handle, blob = claimed(queue, PyTask("tests.tasks:record", ["never"]))
    cancels = Cancels()
    listening = Listening([queue], cancels)
    listening.start()
    try:
        wait_for(lambda: subscribed(conn), what="the subscription")
        assert handle.cancel().requested
        wait_for(lambda: handle.id in cancels._heard, what="the cancel to be heard")
    finally:
        listening.stop()
    worker = Worker(queue, ["tests.tasks"])
    worker._cancels, worker._invoker.cancels = cancels, cancels  # the worker whose listener heard it
    settlement = worker.execute(blob)
    assert isinstance(settlement, Cancelled) and settlement.tracked == Tracked(handle.id, 0.0)
    WorkerOps(queue).claim_batch([HOLDER], (), tracked={HOLDER: settlement.tracked})
    assert results(conn) == [] and ended_cancelled(handle)


def test_a_worker_that_missed_the_cancel_still_ends_the_task_cancelled_and_hears_the_next_once_back(
        conn, redis_server, queue):
    """The worker's user loses its channels (Redis drops its subscription) while the cancel is published, and
    gets them back after: the first task never sees its cancel, the second does."""
    conn.execute_command("ACL", "SETUSER", "worker", "on", "nopass", "~*", "&*", "+@all")
    client = redis.Redis.from_url(redis_server.url, username="worker", password="any")
    worker = Worker(Queue("q", client), ["tests.tasks"], **WORKER_TIMING)  # one at a time: missed, then heard
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    missed, heard = (queue.enqueue(PyTask("tests.tasks:watch_for_cancel", [tag, seconds]), result_ttl=60)
                     for tag, seconds in (("missed", 1), ("heard", WAIT)))
    thread.start()
    try:
        wait_for(lambda: conn.exists("started:missed") and subscribed(conn), what="the first task to start")
        conn.execute_command("ACL", "SETUSER", "worker", "resetchannels")  # its subscription is dropped
        assert subscribed(conn) == 0 and missed.cancel().requested
        conn.execute_command("ACL", "SETUSER", "worker", "&*")
        wait_for(lambda: missed.status() == "cancelled", what="the first task to end")
        assert results(conn)[0] == repr(("missed", (False,), {}))  # it never saw its cancel
        wait_for(lambda: conn.exists("started:heard") and subscribed(conn), what="the listener to be back")
        assert heard.cancel().requested
        wait_for(lambda: heard.status() == "cancelled", what="the second task to end")
        assert results(conn)[1] == repr(("heard", (True,), {}))
    finally:
        worker.stop()
        thread.join(WAIT)
        conn.execute_command("ACL", "DELUSER", "worker")
    assert ended_cancelled(missed) and ended_cancelled(heard)


def test_a_worker_that_cannot_listen_still_runs_its_tasks(conn, redis_server, queue, caplog):
    """A worker waits for its first subscription before it claims: one that failed does not hold it back."""
    conn.execute_command("ACL", "SETUSER", "worker", "on", "nopass", "~*", "resetchannels", "+@all")
    queue.enqueue(PyTask("tests.tasks:record", ["ran"]))
    client = redis.Redis.from_url(redis_server.url, username="worker", password="any")
    worker = Worker(Queue("q", client), ["tests.tasks"], burst=True, **WORKER_TIMING)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False}, daemon=True)
    thread.start()
    thread.join(WAIT)
    conn.execute_command("ACL", "DELUSER", "worker")
    assert not thread.is_alive() and results(conn) == [repr(("ran", (), {}))]
    assert any("no permissions" in record.getMessage() for record in caplog.records if record.levelname == "WARNING")


def test_a_task_whose_worker_is_killed_after_its_cancel_never_runs_again(conn, redis_server, queue):
    """Decided: the sweeper that finds it under a dead worker ends it cancelled instead of requeuing it."""
    handle = queue.enqueue(PyTask("tests.tasks:slow", ["k", 300]), result_ttl=60)
    first = spawn("delayed.worker", "--queue", "q", "--keep-alive-timeout", "1", "tests.tasks",
                  redis_url=redis_server.url)
    wait_for(lambda: conn.exists("started:k") and subscribed(conn), what="the task to start")
    assert handle.cancel().requested  # a plain function that ignores it: it runs on
    first.send_signal(signal.SIGKILL)
    finish(first)
    second = spawn("delayed.worker", "--queue", "q", "--sweep-interval", "0.2", "tests.tasks",
                   redis_url=redis_server.url)
    try:
        wait_for(lambda: handle.status() == "cancelled", what="a sweep to end it")
    finally:
        stop(second)
    assert ended_cancelled(handle) and handle.info().attempts == 1 and results(conn) == []
    assert conn.hlen("q_processing") == conn.llen("q") == conn.xlen("q_dead_letters") == 0


def test_a_cancelled_task_frees_its_limit_slot_for_the_task_held_back_behind_it(conn, queue, run_worker):
    """Its release counts as no task done, and frees the slot all the same."""
    first = queue.enqueue(PyTask("tests.tasks:until_cancelled", ["first"], concurrency_limit=1, limit_key="k"),
                          result_ttl=60)
    queue.enqueue(PyTask("tests.tasks:record", ["second"], concurrency_limit=1, limit_key="k"))
    run_worker(threads=2)
    wait_for(lambda: conn.exists("started:first") and conn.llen("q_limit_waiting:k") == 1,
             what="the first task to run and hold the second back")
    assert first.cancel().requested
    wait_for(lambda: results(conn) == [repr(("first", (), {})), repr(("second", (), {}))], what="the second to run")
    wait_for(lambda: conn.hget("q_counts", "done") == b"1", what="the second task's release")  # the first's: none
    assert ended_cancelled(first)


# Workflows


def test_a_running_step_cancelled_stops_its_chain_and_ends_its_workflow_cancelled(conn, queue, run_worker):
    handle = queue.enqueue(chain(PyTask("tests.tasks:until_cancelled", ["step"]), PyTask("tests.tasks:record",
                                                                                       ["after"])), result_ttl=60)
    running, after = handle.steps()
    run_worker()
    wait_for(lambda: conn.exists("started:step") and subscribed(conn), what="the first step to start")
    assert running.cancel().requested
    wait_for(lambda: handle.status() == "cancelled", what="the workflow to end")
    assert ended_cancelled(running) and after.status() == "cancelled"
    assert results(conn) == [repr(("step", (), {}))]  # nothing ran after it


def test_cancelling_a_workflow_stops_its_running_steps(conn, queue, run_worker):
    handle = queue.enqueue(chain(PyTask("tests.tasks:async_until_cancelled", ["step"]),
                                 PyTask("tests.tasks:record", ["after"])), result_ttl=60)
    running, after = handle.steps()
    run_worker()
    wait_for(lambda: conn.exists("started:step") and subscribed(conn), what="the first step to start")
    outcome = handle.cancel()
    assert outcome and outcome.reason.endswith("1 step(s) that had not started; cancel requested of 1 running "
                                               "step(s), which end cancelled")
    wait_for(lambda: running.status() == "cancelled", what="the running step to end")
    assert conn.lrange("cancelled", 0, -1) == [b"step"] and after.status() == "cancelled"
    assert handle.status() == "cancelled" and results(conn) == [repr(("step", (), {}))]
