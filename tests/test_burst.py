"""--burst: a worker that finishes once its queues are empty (exit status 0)."""
import time

import pytest

from delayed import PyTask, Queue, Worker

from . import slowlog, tasks
from .conftest import finish, results
from .test_processes import worker


@pytest.mark.parametrize("threads", [1, 3])
def test_a_burst_worker_runs_every_task_due_then_returns_0_leaving_later_ones_scheduled(conn, threads):
    queue = Queue("q", conn)
    queue.enqueue_many(PyTask(tasks.record, [f"t{i}"]) for i in range(20))
    queue.enqueue(PyTask(tasks.fail_until, ["retried", 1], retry=1))
    queue.enqueue(PyTask(tasks.record, ["due"]), delay=0.2)
    queue.enqueue(PyTask(tasks.record, ["later"]), delay=3600)
    time.sleep(0.3)  # "due" is due, and still in the scheduled set
    with slowlog.every_command(conn):
        assert Worker(queue, ["tests.tasks"], threads=threads, burst=True, dequeue_timeout=5).run() == 0
        waits = [float(command[-1]) for command, _ in slowlog.sent(conn) if command[0] == b"BLPOP"]
    assert all(wait < 5 for wait in waits), waits  # no wait for a task as long as the 5 s dequeue timeout
    assert len(results(conn)) == 22 and {"'due'", "'retried'"} <= {r.split(",")[0][1:] for r in results(conn)}
    assert conn.llen("q") == conn.hlen("q_processing") == 0 and conn.zcard("q_scheduled") == 1


def test_the_command_line_burst_worker_exits_0_single_or_supervised(conn, redis_server):
    for concurrency in ("1", "2"):
        conn.delete("results")
        Queue("default", conn).enqueue_many(PyTask(tasks.record, [i]) for i in range(50))
        status, output = finish(worker(redis_server.url, "--burst", "--concurrency", concurrency))
        assert status == 0, output
        assert len(results(conn)) == 50 and "burst done" in output
        assert "restarting" not in output
