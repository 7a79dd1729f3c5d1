"""Go and Python workers draining one queue at the same time.

go-delayed's worker BLPOPs a notification, then pops the queue in a second round trip; if
anything took that task in between, its dequeue script runs on an empty list, errors
("Failed to dequeue task"), and the worker sleeps 1 s, 2 s, 4 s ... up to a minute. Our batch
claims must leave a task for every notification still out there.
"""
import time

from conftest import dequeue_errors, executions, wait_for

from delayed.queue import Queue
from delayed.task import GoTask

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
    wait_for(lambda: conn.llen("q") == 0 and conn.llen("q_noti") == 0, what="the queue to drain")
    time.sleep(0.5)

    ran = executions(conn)
    buried = queue.dead.list()
    assert {r["reason"] for r in buried} <= {"go_task"}
    buried_ids = [GoTask.deserialize(r["task"]).args for r in buried]
    assert sorted(list(ran) + buried_ids) == sorted(f"t{i}" for i in range(TASKS)), "lost or doubled tasks"
    assert set(ran.values()) <= {1}
    assert ran, "the Go workers ran nothing: the test shows nothing about them"
    for worker in go_workers:
        assert dequeue_errors(worker) == [], worker.err()


def test_our_sweeper_leaves_no_stray_notification_for_busy_go_workers(procs, conn):
    """A busy go-delayed worker spends a round trip of every task between its BLPOP and its
    dequeue, holding a notification whose task is still in the queue. go-delayed's sweep (and
    ours, before we changed it) took that for a missing notification and pushed one, which later
    woke a worker with no task behind it: its dequeue errored and it slept 1 s, 2 s, ... Our
    sweeper, sweeping all the time here, must push none while the queue moves."""
    go_workers = [procs.go_worker("q") for _ in range(2)]
    sweeper = procs.py_sweeper("q", interval="0.01")
    wait_for(lambda: "sweeping" in sweeper.err(), what="our sweeper to start")
    queue = Queue("q", conn)
    for start in range(0, TASKS, 100):  # in bursts, so the drain lasts a few hundred sweeps
        queue.enqueue_many(GoTask("main.Count", f"t{i}") for i in range(start, start + 100))
        time.sleep(0.02)
    wait_for(lambda: len(executions(conn)) == TASKS, what="the Go workers to run every task")
    time.sleep(1.5)  # a stray notification would be popped within the workers' 200 ms BLPOP
    assert conn.llen("q_noti") == 0 and conn.llen("q") == 0
    for worker in go_workers:
        assert dequeue_errors(worker) == [], worker.err()
