"""Weighted queues: a worker serving several queues with weights takes from each about its weight's
share of the claims while all have tasks, and none starves; bad weights are refused. (Strict priority,
without weights, is tests/test_priority.py's.)"""
import threading

import pytest

from delayed import PyTask, Queue, Worker

from . import tasks
from .conftest import WAIT, WORKER_TIMING, tags
from .test_operating import run

TASKS = 700
"""Tasks in each queue of the proportion test: more than the first TASKS runs can take from either."""


def fill(conn, name, count):
    Queue(name, conn).enqueue_many(PyTask(tasks.record, [name]) for _ in range(count))


def drain(worker):
    """Run a burst worker to the end, in a thread, so that a hang fails the test instead of holding it."""
    thread = threading.Thread(target=worker.run, kwargs=dict(handle_signals=False))
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive(), "the worker did not drain its queues"


def test_two_full_queues_weighted_6_to_1_share_the_claims_6_to_1(conn):
    fill(conn, "high", TASKS)
    fill(conn, "low", TASKS)
    worker = Worker([Queue("high", conn), Queue("low", conn)], ["tests.tasks"], weights=[6, 1], batch=1, burst=True,
                    **WORKER_TIMING)
    worker.holdings.random.seed(1)  # the draws of this run are the same each time
    drain(worker)
    ran = tags(conn)
    assert len(ran) == 2 * TASKS
    first = ran[:TASKS]  # neither queue can have run out within them
    # one claim, one task: each a draw that picks low with probability 1/7, so 100 of 700 expected,
    # with a standard deviation of 9.3; the tolerance is about four of them
    assert 60 <= first.count("low") <= 140, first.count("low")


def test_a_weight_1_queue_gets_tasks_while_the_weight_6_one_is_never_empty(conn):
    fill(conn, "high", 2000)
    fill(conn, "low", 50)
    worker = Worker([Queue("high", conn), Queue("low", conn)], ["tests.tasks"], weights=[6, 1], threads=4,
                    burst=True, **WORKER_TIMING)
    drain(worker)
    ran = tags(conn)
    last_low = len(ran) - 1 - ran[::-1].index("low")
    # every low task ran while high still had hundreds waiting (strict priority runs them all last)
    assert ran.count("low") == 50 and ran[last_low + 1:].count("high") > 500, last_low


def test_weights_are_checked_as_the_worker_is_made(conn):
    queues = [Queue("high", conn), Queue("low", conn)]
    for weights in ([6], [6, 1, 1], [6, 0], [6, -1], [6, 1.5], [6, True], "61", {"high": 6, "low": 1}):
        with pytest.raises(ValueError, match="weights must be whole numbers of 1 or more, one per queue"):
            Worker(queues, ["tests.tasks"], weights=weights)
    assert Worker(queues, ["tests.tasks"], weights=(6, 1)).weights == (6, 1)
    assert Worker(queues, ["tests.tasks"]).weights is None


@pytest.mark.parametrize("queues, says", [
    (["high=6", "low"], "--queue high=6 --queue low: give every queue a weight (NAME=WEIGHT), or none"),
    (["high=6", "low=0"], "--queue: weights must be whole numbers of 1 or more"),
    (["high=6", "low=x"], "--queue low=x: the weight after '=' must be a whole number of 1 or more"),
    (["high=6", "high=1"], "--queue high given twice"),
])
def test_the_command_line_refuses_bad_weights_in_one_line(conn, redis_server, queues, says):
    arguments = [word for queue in queues for word in ("--queue", queue)]
    status, out, err = run(*arguments, "tests.tasks", module="delayed.worker", url=redis_server.url)
    assert status == 2 and err.strip().count("\n") == 0, err
    assert says in err
    assert conn.dbsize() == 0  # it never went online


def test_the_command_line_worker_takes_weights_and_says_them(conn, redis_server):
    fill(conn, "high", 30)
    fill(conn, "low", 30)
    status, out, err = run("--queue", "high=6", "--queue", "low=1", "--burst", "tests.tasks", module="delayed.worker",
                           url=redis_server.url)
    assert status == 0, err
    assert "online on queues 'high' (weight 6), 'low' (weight 1)" in err
    assert sorted(tags(conn)) == ["high"] * 30 + ["low"] * 30
