"""Worker(threads=N): up to N tasks at once in one process, each held under its own id."""
import logging
import time

import pytest

from delayed import PyTask, Queue
from delayed.worker.batch import Lookahead
from delayed.worker.cli import parser as worker_parser

from . import tasks
from .conftest import results, wait_for


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


def dead(conn):
    return Queue("q", conn).dead.list()


def drained(conn):
    return conn.llen("q") == 0 and conn.hlen("q_processing") == 0


@pytest.mark.parametrize("func", [tasks.meet, tasks.async_meet])
def test_plain_and_coroutine_tasks_run_at_once(conn, queue, run_worker, func):
    queue.enqueue_many([PyTask(func, [f"t{i}", 10]) for i in range(10)])  # each waits until all ten run
    run_worker(threads=10)
    wait_for(lambda: conn.llen("results") == 10, what="ten tasks to meet")
    wait_for(lambda: drained(conn), what="release")
    assert sorted(results(conn)) == sorted(repr((f"t{i}", (), {})) for i in range(10))
    assert not dead(conn)


def test_claims_only_as_many_tasks_as_there_are_free_slots(conn, queue, run_worker):
    queue.enqueue_many([PyTask(tasks.slow, [f"t{i}", 0.2]) for i in range(12)])
    run_worker(threads=3)
    most = 0
    while conn.llen("results") < 12:
        most = max(most, conn.hlen("q_processing"))
        time.sleep(0.01)
    assert most == 3
    wait_for(lambda: drained(conn), what="release")


def test_tasks_kept_ready_for_busy_slots_go_back_to_the_queue_for_another_worker(conn, queue, run_worker):
    # Quick tasks teach the worker to keep tasks ready for its slots; then both slots take a slow
    # task that runs until every task has started: the tasks it kept ready must go back for the
    # second worker (kept behind the slow ones, they would never start, and the slow ones give up).
    queue.enqueue_many([PyTask(tasks.stamp, [f"noop{i}"]) for i in range(500)] +
                       [PyTask(tasks.stamp_until, [f"slow{i}", 542]) for i in range(2)] +
                       [PyTask(tasks.stamp, [f"quick{i}"]) for i in range(40)])
    run_worker(threads=2)
    wait_for(lambda: conn.hexists("stamps", "slow0") and conn.hexists("stamps", "slow1"), what="both slow tasks")
    run_worker(threads=2)
    wait_for(lambda: conn.llen("results") == 2 or dead(conn), what="the slow tasks to see every task start")
    assert not dead(conn) and sorted(results(conn)) == [repr((f"slow{i}", (), {})) for i in range(2)]
    wait_for(lambda: drained(conn), what="release")


def test_ready_tasks_follow_the_mean_run_time():
    lookahead = Lookahead(10, patience=0.02)
    assert lookahead.ahead(given_back=0) == 0  # nothing known yet: claim only for free slots
    lookahead.finished(0.0001)
    assert lookahead.ahead(given_back=0) == 10  # quick tasks: one per slot
    for _ in range(100):
        lookahead.finished(0.01)
    assert lookahead.ahead(given_back=0) == 10  # a round of 10 ms tasks starts within the patience
    for _ in range(100):
        lookahead.finished(0.05)
    assert lookahead.ahead(given_back=0) == 3  # 50 ms tasks: 10 slots free one every 5 ms
    assert lookahead.ahead(given_back=2) == 0  # the watcher gave some back: none until a task finishes
    assert lookahead.ahead(given_back=2) == 0
    lookahead.finished(0.05)
    assert lookahead.ahead(given_back=2) == 3
    for _ in range(100):
        lookahead.finished(3)
    assert lookahead.ahead(given_back=2) == 0


def test_two_threaded_workers_share_a_queue_and_run_everything_once(conn, queue, run_worker):
    queue.enqueue_many([PyTask(tasks.record, [i]) for i in range(1000)])
    run_worker(threads=4)
    run_worker(threads=4)
    wait_for(lambda: conn.llen("results") == 1000, what="1000 tasks")
    wait_for(lambda: drained(conn), what="release")
    assert sorted(results(conn)) == sorted(repr((i, (), {})) for i in range(1000))


def test_a_plain_task_past_its_time_limit_is_interrupted_in_its_thread(conn, queue, run_worker):
    # (a blocking call, time.sleep(3) say, is interrupted only when it returns to the interpreter)
    queue.enqueue(PyTask(tasks.busy, ["stuck", 3], time_limit=0.2))
    queue.enqueue(PyTask(tasks.record, ["after"]))
    run_worker(threads=2)
    wait_for(lambda: dead(conn), what="the time-out")
    [entry] = dead(conn)
    assert entry["reason"] == "timed_out" and "TimeLimitExceeded" in entry["error"]
    assert results(conn) == [repr(("after", (), {}))]  # busy's except Exception did not swallow it
    wait_for(lambda: drained(conn), what="release")


def test_a_thread_that_will_not_stop_stays_held_keeps_its_slot_and_is_reported(conn, queue, run_worker, caplog):
    caplog.set_level(logging.WARNING, "delayed")
    queue.enqueue_many([PyTask(tasks.unstoppable, [f"mule{i}", 600, "release"], time_limit=0.3) for i in range(2)])
    worker = run_worker(threads=2)
    wait_for(lambda: conn.exists("started:mule0", "started:mule1") == 2, what="both to start")
    queue.enqueue(PyTask(tasks.record, ["waits"]))
    wait_for(lambda: "past its time limit" in caplog.text, what="the overrun warning")
    wait_for(lambda: conn.exists("interrupted:mule0", "interrupted:mule1") == 2, what="both to be interrupted")
    # still held under the worker's ids, their keep-alive on, both slots taken: nothing else started
    holders = [holder.decode() for holder in conn.hkeys("q_processing")]
    assert len(holders) == 2 and all(holder.startswith(worker.id) and conn.exists(holder) for holder in holders)
    assert results(conn) == []
    conn.set("release", 1)  # the mules end
    wait_for(lambda: len(results(conn)) == 3, what="all three tasks")
    assert results(conn).index(repr(("waits", (), {}))) > 0  # it started only once a mule ended
    wait_for(lambda: drained(conn), what="release")


def test_a_coroutine_past_its_time_limit_is_cancelled_in_threaded_mode(conn, queue, run_worker):
    queue.enqueue(PyTask(tasks.async_slow, ["late", 0.5], time_limit=0.1))
    queue.enqueue(PyTask(tasks.async_slow, ["next", 0.8]))
    run_worker(threads=2)
    wait_for(lambda: results(conn) and dead(conn), what="the next coroutine, and the late one's dead letter")
    assert results(conn) == [repr(("next", (), {}))]  # not cancelled, "late" would have recorded first
    assert [entry["reason"] for entry in dead(conn)] == ["timed_out"]


def test_stopping_lets_the_running_tasks_finish_and_gives_nothing_up(conn, queue, run_worker):
    queue.enqueue_many([PyTask(tasks.slow, [f"t{i}", 0.4]) for i in range(3)] +
                       [PyTask(tasks.record, ["later"])])
    worker = run_worker(threads=3)
    wait_for(lambda: all(conn.exists(f"started:t{i}") for i in range(3)), what="three tasks running")
    worker.stop()
    wait_for(lambda: not conn.exists(worker.id), what="the worker to go offline")
    assert sorted(results(conn)) == sorted(repr((f"t{i}", (), {})) for i in range(3))
    assert conn.llen("q") == 1 and conn.hlen("q_processing") == 0


def test_the_command_line_takes_threads():
    assert worker_parser().parse_args(["--threads", "8", "tasks"]).threads == 8
    assert worker_parser().parse_args(["tasks"]).threads == 1


def test_a_plain_function_that_returns_an_awaitable_has_it_awaited(conn, queue, run_worker):
    queue.enqueue(PyTask(tasks.returns_awaitable, ["awaited"]))
    run_worker(threads=2)
    wait_for(lambda: results(conn), what="the awaitable to run")
    assert results(conn) == [repr(("awaited", (), {}))]
