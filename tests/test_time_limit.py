"""Time limits: a finished call is never timed out, and a coroutine past its limit is cancelled."""
import json

import pytest

from delayed import PyTask, Queue, Worker
from delayed.worker.holding import Bury, Release

from . import tasks
from .conftest import results, wait_for


@pytest.fixture
def queue(conn):
    return Queue("q", conn, dequeue_timeout=0.05, keep_alive_timeout=5)


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
