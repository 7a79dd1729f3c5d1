"""What the operating views show of go-delayed's real workers beside ours."""
from conftest import wait_for

from delayed.ops import admin
from delayed.queue import Queue
from delayed.task import GoTask


def test_stats_counts_a_go_delayed_worker_holding_a_task_as_workers_lists_it(procs, conn):
    """A go-delayed worker registers nowhere: it is seen while it holds a task and its keep-alive key
    lives, and `delayed stats` counts it as `delayed workers` lists it (and the exporter and the
    dashboard, which read the same rows)."""
    worker = procs.go_worker("gq", keep_alive_timeout="10s", keep_alive_duration="1s")
    Queue("gq", conn).enqueue(GoTask("main.Slow", ["held", 60_000]))
    wait_for(lambda: conn.exists("started:held"), what="the go-delayed worker to start the task")
    procs.py_worker("gq")  # ours, once the GoTask is taken (it would dead-letter one it claimed)
    listed = admin.workers(conn, ["gq"])
    assert sorted(row["go"] for row in listed) == [False, True]
    assert [row["worker"] for row in listed if row["go"]] == [worker.id]
    assert [row["workers"] for row in admin.stats(conn, ["gq"])] == [2]
