"""Time limits: a finished call is never timed out, and a coroutine past its limit is cancelled."""
import json

import pytest

from delayed import PyTask, Queue, Worker
from delayed.worker.holding import Bury, Release

from . import tasks
from .conftest import results, wait_for


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


def test_an_alarm_that_lands_after_the_call_returned_does_not_time_it_out(conn, queue):
    # In the main thread (SIGALRM): the alarm is handled while the frame that called the task
    # runs, as when it fires between the task's return and the timer's reset.
    worker = Worker(queue, ["tests.tasks"])
    settlement = worker.execute(PyTask(tasks.alarm_in_caller, ["returned"], time_limit=5).serialize())
    assert isinstance(settlement, Release), settlement
    assert results(conn) == [repr(("returned", (), {}))]


def test_an_alarm_inside_the_call_still_times_it_out(conn, queue):
    worker = Worker(queue, ["tests.tasks"])
    settlement = worker.execute(PyTask(tasks.stubborn, ["stuck", 2], time_limit=0.1).serialize())
    assert isinstance(settlement, Bury) and json.loads(settlement.letter["record"])["reason"] == "timed_out"
    assert results(conn) == []


def test_a_coroutine_past_its_time_limit_is_cancelled_not_left_running(conn, queue, run_worker):
    queue.enqueue(PyTask(tasks.async_slow, ["late", 0.5], time_limit=0.2))
    queue.enqueue(PyTask(tasks.async_slow, ["next", 1.0]))
    run_worker()
    wait_for(lambda: results(conn), what="the next coroutine")
    assert results(conn) == [repr(("next", (), {}))]  # "late" never resumed during "next"
    [entry] = queue.dead.list()
    assert entry["reason"] == "timed_out" and entry["func"] == "tests.tasks:async_slow"


def test_a_coroutine_within_its_time_limit_is_released(conn, queue):
    worker = Worker(queue, ["tests.tasks"])
    settlement = worker.execute(PyTask(tasks.async_slow, ["fine", 0.01], time_limit=1).serialize())
    assert isinstance(settlement, Release)
    assert results(conn) == [repr(("fine", (), {}))]


LIMIT_ERROR = "TimeLimitExceeded: ran longer than its time limit of 0.2 s"


def test_a_one_slot_worker_s_time_limit_errors_say_the_limit(conn, queue):
    worker = Worker(queue, ["tests.tasks"])
    for task in (PyTask(tasks.busy, ["plain", 3], time_limit=0.2), PyTask(tasks.async_slow, ["coro", 3], time_limit=0.2)):
        settlement = worker.execute(task.serialize())
        assert isinstance(settlement, Bury) and json.loads(settlement.letter["record"])["error"] == LIMIT_ERROR


def test_a_threaded_worker_s_time_limit_errors_say_the_limit(conn, queue, run_worker):
    # a plain task's TimeLimitExceeded is injected into its thread as a bare class: no message of its own
    queue.enqueue(PyTask(tasks.busy, ["plain", 3], time_limit=0.2))
    queue.enqueue(PyTask(tasks.async_slow, ["coro", 3], time_limit=0.2))
    run_worker(threads=2)
    wait_for(lambda: queue.dead.count() == 2, what="both time-outs")
    assert sorted((entry["func"], entry["error"]) for entry in queue.dead.list()) == [
        ("tests.tasks:async_slow", LIMIT_ERROR), ("tests.tasks:busy", LIMIT_ERROR)]
