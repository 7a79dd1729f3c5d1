"""A worker serving several queues, in priority order: in-process and as real processes."""
import pytest
import redis

from delayed import PyTask, Queue, Worker

from . import tasks
from .conftest import finish, results, spawn, tags, wait_for
from .test_operating import run
from .test_processes import worker


def drained(conn, *names):
    return all(conn.llen(name) == 0 and conn.hlen(name + "_processing") == 0 for name in names)


@pytest.mark.parametrize("batch", [1, 32])
def test_the_first_queue_s_tasks_all_run_before_the_second_s(conn, start_worker, batch):
    for i in range(5):
        Queue("low", conn).enqueue(PyTask(tasks.record, [f"low{i}"]))
    for i in range(5):
        Queue("high", conn).enqueue(PyTask(tasks.record, [f"high{i}"]))
    start_worker("high", "low", batch=batch)
    wait_for(lambda: len(results(conn)) == 10, what="ten results")
    assert tags(conn) == [f"high{i}" for i in range(5)] + [f"low{i}" for i in range(5)]
    wait_for(lambda: drained(conn, "high", "low"), what="releases on both queues")


def test_a_threaded_worker_drains_every_queue_and_settles_each_task_on_its_own_queue(conn, start_worker):
    for name in ("high", "low"):
        queue = Queue(name, conn)
        queue.enqueue_many(PyTask(tasks.record, [f"{name}{i}"]) for i in range(20))
        queue.enqueue(PyTask(tasks.fail_until, [f"{name}-retried", 1], retry=1))
        queue.enqueue(PyTask("os:system", ["true"]))
    start_worker("high", "low", threads=4)
    wait_for(lambda: len(results(conn)) == 42, what="every task of both queues")
    assert sorted(tags(conn)) == sorted([f"{name}{i}" for name in ("high", "low") for i in range(20)]
                                        + ["high-retried", "low-retried"])
    wait_for(lambda: drained(conn, "high", "low"), what="releases on both queues")
    for name in ("high", "low"):
        [letter] = Queue(name, conn).dead.list()
        assert (letter["reason"], letter["queue"]) == ("not_allowed", name)
        assert int(conn.hget(name + "_counts", "done")) == 21


def test_an_idle_worker_waits_on_every_queue_at_once(conn, start_worker):
    worker = start_worker("high", "low", batch=1)
    wait_for(lambda: conn.zcard("high_workers") == 1 and conn.zcard("low_workers") == 1,
             what="the worker listed on both queues")
    Queue("low", conn).enqueue(PyTask(tasks.record, ["low"]))
    wait_for(lambda: tags(conn) == ["low"], what="the second queue's task")
    Queue("high", conn).enqueue(PyTask(tasks.record, ["high"]))
    wait_for(lambda: tags(conn) == ["low", "high"], what="the first queue's task")
    assert len(set(worker.ids)) == 2 * 2  # two ids (twice its batch of 1) on each queue, its own
    assert conn.zrange("high_workers", 0, -1)[0].decode() in worker.ids[:2]
    assert conn.zrange("low_workers", 0, -1)[0].decode() in worker.ids[2:]
    wait_for(lambda: drained(conn, "high", "low"), what="releases on both queues")


def test_queues_named_twice_or_on_two_servers_are_refused(conn, redis_server):
    queue = Queue("a", conn)
    with pytest.raises(ValueError, match="named twice"):
        Worker([queue, Queue("a", conn)], ["tests.tasks"])
    elsewhere = redis.Redis(port=redis_server.port, db=1)
    with pytest.raises(ValueError, match="on one Redis"):
        Worker([queue, Queue("b", elsewhere)], ["tests.tasks"])
    Worker([queue, Queue("b", redis.Redis.from_url(redis_server.url))], ["tests.tasks"])  # another client is fine


def test_the_command_line_worker_serves_several_queues_and_the_sweeper_recovers_both(conn, redis_server):
    for name in ("high", "low"):
        Queue(name, conn).enqueue(PyTask(tasks.slow, [name, 30]))
    first = worker(redis_server.url, "--queue", "high", "--queue", "low", "--threads", "2")
    try:
        wait_for(lambda: conn.exists("started:high", "started:low") == 2, what="a task of each queue to start")
    finally:
        first.kill()
    status, output = finish(first)
    assert "online on queues 'high', 'low'" in output
    sweeper = spawn("delayed.sweeper", "--queue", "high", "--queue", "low", "--interval", "0.2",
                    redis_url=redis_server.url)
    try:  # each queue's task was held under that queue's own keep-alive keys, which lapse
        wait_for(lambda: conn.llen("high") == conn.llen("low") == 1,
                 what="the sweeper to requeue both queues' tasks")
    finally:
        sweeper.terminate()
        assert finish(sweeper)[0] == 0
    assert conn.hlen("high_processing") == conn.hlen("low_processing") == 0


def test_the_command_line_refuses_a_queue_named_twice(conn, redis_server):
    status, out, err = run("--queue", "a", "--queue", "b", "--queue", "a", "tests.tasks", module="delayed.worker",
                           url=redis_server.url)
    assert status == 2 and err.strip().count("\n") == 0
    assert "--queue a given twice" in err
    assert conn.dbsize() == 0  # it never went online
