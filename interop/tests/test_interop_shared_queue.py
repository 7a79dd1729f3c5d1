"""Go and Python workers draining one queue at the same time.

go-delayed's worker BLPOPs a notification, then pops the queue in a second round trip; if
anything took that task in between, its dequeue script runs on an empty list, errors
("Failed to dequeue task"), and the worker sleeps 1 s, 2 s, 4 s ... up to a minute. Our batch
claims must leave a task for every notification still out there.
"""
import json
import time

from delayed.queue import Queue
from delayed.task import GoTask

from conftest import dequeue_errors, executions, wait_for

TASKS = 3000


def test_go_and_python_workers_share_a_queue_without_go_dequeue_errors(procs, conn):
    """GoTasks trickle into a queue two Go workers and a batching Python worker drain: each task
    is run by Go exactly once or dead-lettered by Python (reason go_task, the only thing it can
    do with a GoTask) exactly once, and go-delayed never finds the queue empty after a notification."""
    go_workers = [procs.go_worker("q") for _ in range(2)]
    procs.py_worker("q", "--batch", "32")
    queue = Queue("q", conn)
    for i in range(TASKS):
        queue.enqueue(GoTask("main.Count", f"t{i}"))
        if i % 10 == 0:
            time.sleep(0.005)  # a trickle keeps the queue near empty, where claims race
    wait_for(lambda: conn.llen("q") == 0 and conn.llen("q_noti") == 0, timeout=30, what="the queue to drain")
    time.sleep(0.5)

    ran = executions(conn)
    buried = [json.loads(r) for r in conn.lrange("q_dead", 0, -1)]
    assert {r["reason"] for r in buried} <= {"go_task"}
    buried_ids = [GoTask.deserialize(__import__("base64").b64decode(r["task"])).args for r in buried]
    assert sorted(list(ran) + buried_ids) == sorted(f"t{i}" for i in range(TASKS)), "lost or doubled tasks"
    assert set(ran.values()) <= {1}
    assert ran, "the Go workers ran nothing: the test shows nothing about them"
    for worker in go_workers:
        assert dequeue_errors(worker) == [], worker.err()
