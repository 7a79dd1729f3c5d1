"""Delayed tasks: held in <queue>_scheduled, moved into the queue when due by workers and sweepers."""
import asyncio
import datetime
import signal
import threading
import time

import pytest
import redis.asyncio

from delayed import AsyncQueue, GoTask, PyTask, Queue, Worker
from delayed.protocol.worker_ops import WorkerOps
from delayed.worker.retry import exponential_with_jitter

from .conftest import WAIT, results, spawn, wait_for


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


def test_a_delayed_task_waits_in_the_scheduled_set_until_due(conn, queue):
    task, later = PyTask("m:f", [1]), PyTask("m:f", [2])
    before = time.time()
    queue.enqueue(task, delay=0.3)
    after = time.time()
    queue.enqueue(later, delay=3600)
    assert not conn.exists("q", "q_noti")
    [(member, due), _] = conn.zrange("q_scheduled", 0, -1, withscores=True)
    assert member[8:] == task.serialize() and before + 0.3 <= due <= after + 0.3
    time.sleep(0.35)
    assert queue.move_due() == 1  # the task due; the one due in an hour stays
    assert conn.lrange("q", 0, -1) == [task.serialize()] and conn.llen("q_noti") == 1
    assert [member[8:] for member in conn.zrange("q_scheduled", 0, -1)] == [later.serialize()]


def test_identical_tasks_scheduled_alike_stay_two(conn, queue):
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=60)
    queue.enqueue(PyTask("m:f"), at=at)
    queue.enqueue_many([PyTask("m:f"), GoTask("main.F", 1)], at=at)
    assert conn.zcard("q_scheduled") == 3
    assert {score for _, score in conn.zrange("q_scheduled", 0, -1, withscores=True)} == {at.timestamp()}


def test_no_delay_or_one_already_past_enqueues_at_once(conn, queue):
    queue.enqueue(PyTask("m:f"), delay=0)
    queue.enqueue(PyTask("m:f"), at=datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1))
    assert conn.llen("q") == 2 and not conn.exists("q_scheduled")
    with pytest.raises(ValueError, match="not both"):
        queue.enqueue(PyTask("m:f"), delay=1, at=datetime.datetime.now())


@pytest.mark.parametrize("delay", [float("inf"), float("nan")])
def test_a_delay_that_is_not_finite_is_refused_and_writes_nothing(conn, queue, delay):
    # inf parked a task in N_scheduled forever (and broke `scheduled list`); nan compared false both ways
    for enqueue in (lambda: queue.enqueue(PyTask("m:f"), delay=delay),
                    lambda: queue.enqueue_many([PyTask("m:f")], delay=delay),
                    lambda: queue.enqueue(PyTask("m:f"), delay=delay, unique_for=60)):
        with pytest.raises(ValueError, match="finite"):
            enqueue()
    assert conn.dbsize() == 0


def test_moving_is_bounded_per_call(conn, queue):
    queue.enqueue_many([PyTask("m:f", [i]) for i in range(25)], delay=0.05)
    time.sleep(0.1)
    assert [queue.move_due(limit=10) for _ in range(4)] == [10, 10, 5, 0]
    # tasks due at the same moment come out in member order, and members start with random bytes
    assert sorted(conn.lrange("q", 0, -1)) == sorted(PyTask("m:f", [i]).serialize() for i in range(25))
    assert conn.llen("q_noti") == 25


def test_async_queue_schedules_too(conn, redis_server):
    async def produce():
        client = redis.asyncio.Redis.from_url(redis_server.url)
        queue = AsyncQueue("q", client)
        await queue.enqueue(PyTask("m:f"), delay=60)
        await queue.enqueue_many([PyTask("m:f")] * 2, delay=60)
        await client.aclose()

    asyncio.run(produce())
    assert conn.zcard("q_scheduled") == 3 and not conn.exists("q")


def test_a_worker_runs_a_delayed_task_when_it_is_due(conn, queue):
    queue.enqueue(PyTask("tests.tasks:record", ["later"]), delay=1.0)
    queue.enqueue(PyTask("tests.tasks:record", ["now"]))
    worker = Worker(queue, ["tests.tasks"], dequeue_timeout=0.05)
    thread = threading.Thread(target=worker.run)
    started = time.monotonic()
    thread.start()
    try:
        wait_for(lambda: len(results(conn)) == 2, what="both tasks")
        assert time.monotonic() - started >= 0.9
        assert results(conn) == [repr(("now", (), {})), repr(("later", (), {}))]
    finally:
        worker.stop()
        thread.join(WAIT)


def test_a_sweeper_moves_due_tasks_for_queues_no_python_worker_drains(conn, redis_server):
    # A Go-only queue: no Python worker, only our sweeper; go-delayed workers BLPOP <name>_noti.
    queue = Queue("go", conn)
    queue.enqueue(GoTask("main.Add", [1, 2]), delay=0.5)
    sweeper = spawn("delayed.sweeper", "--queue", "go", "--interval", "60", redis_url=redis_server.url)
    try:
        wait_for(lambda: conn.llen("go"), what="the task in the queue")
        assert conn.lrange("go", 0, -1) == [GoTask("main.Add", [1, 2]).serialize()]
        assert conn.llen("go_noti") == 1
    finally:
        sweeper.send_signal(signal.SIGTERM)
        assert sweeper.wait(WAIT) == 0


def scheduled_attempts(conn):
    return [PyTask.deserialize(member[8:]).options.attempt for member in conn.zrange("q_scheduled", 0, -1)]


def test_a_failed_attempt_waits_its_backoff_in_the_scheduled_set(conn, queue, run_worker):
    queue.enqueue(PyTask("tests.tasks:fail_until", ["calls", 2], max_retries=3, backoff=0.3))
    run_worker()
    wait_for(lambda: scheduled_attempts(conn) == [1], what="the first retry to be scheduled")
    assert conn.llen("q") == 0 and conn.hlen("q_processing") == 0
    wait_for(lambda: results(conn), what="the third attempt to succeed")
    assert conn.get("calls") == b"3" and not conn.exists("q_dead_letters", "q_scheduled")


def test_retries_with_backoff_end_in_the_dead_letter_list(conn, queue, run_worker):
    queue.enqueue(PyTask("tests.tasks:always_fail", ["boom"], max_retries=2, backoff="tests.tasks:tenth_of_attempt"))
    run_worker()
    wait_for(lambda: queue.dead.count(), what="a dead letter")
    assert conn.get("boom") == b"3"  # the first run and two retries
    [entry] = queue.dead.list()
    assert entry["reason"] == "failed" and PyTask.deserialize(entry["task"]).options.attempt == 2


def test_skip_retry_dead_letters_at_once(conn, queue, run_worker):
    queue.enqueue(PyTask("tests.tasks:give_up", ["skip"], max_retries=5, retry=5))
    run_worker()
    wait_for(lambda: queue.dead.count(), what="a dead letter")
    assert conn.get("skip") == b"1" and not conn.exists("q_scheduled")
    assert queue.dead.list()[0]["error"] == "SkipRetry: skip: not worth retrying"


def test_the_default_backoff_is_exponential_with_jitter():
    waits = [[exponential_with_jitter(attempt) for _ in range(200)] for attempt in (1, 2, 3)]
    assert 16 <= min(waits[0]) and max(waits[0]) <= 36 and len(set(waits[0])) > 100
    assert min(waits[2]) >= 96 > max(waits[0])


def test_reschedule_is_fenced(conn, queue):
    queue.enqueue(PyTask("m:f", max_retries=1))
    held = WorkerOps(queue).claim_batch([], ["w"]).tasks[0][1]
    assert not WorkerOps(queue).reschedule(b"another blob", held, time.time(), "w")
    assert WorkerOps(queue).reschedule(held, held, time.time() + 60, "w")
    assert conn.zcard("q_scheduled") == 1 and conn.hlen("q_processing") == 0
