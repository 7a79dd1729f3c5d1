"""Limits per key across the languages: GoTasks a Python producer enqueued with a concurrency_limit or a
rate_limit, run by our Go worker (interop/bin/ourgoworker), which admits them through the same admit.lua
and keys as Python's workers; the limits read Python's `delayed stats` builds on sees what the Go
worker holds; go-delayed's own worker ignores limits.

Tasks are main.Slow(id, ms): it counts a start of id in the hash "starts", sleeps, then counts an
execution in "executions"."""
from conftest import executions, wait_for

from delayed import GoTask, Queue
from delayed.protocol.limits import all_limits
from delayed.wire.keys import QueueKeys

KEYS = QueueKeys.of("q")


def test_our_go_worker_holds_back_what_a_python_producer_s_limit_says_and_python_reads_it(procs, conn):
    ids = [f"t{i}" for i in range(4)]
    Queue("q", conn).enqueue_many(GoTask("main.Slow", [task_id, 300], concurrency_limit=1) for task_id in ids)
    procs.our_go_worker("q", "-concurrency", "4")
    wait_for(lambda: conn.llen(KEYS.limit_waiting("main.Slow")) == 3, what="three tasks held back for the slot")
    [limits] = all_limits(conn, "q")  # the key defaults to the GoTask's name, in either language
    assert (limits.key, limits.concurrency_limit, limits.running) == ("main.Slow", 1, 1)
    assert len(executions(conn, "starts")) == 1 and conn.llen("q") == 0
    wait_for(lambda: executions(conn) == {task_id: 1 for task_id in ids}, what="every task, one at a time")
    assert executions(conn, "starts") == {task_id: 1 for task_id in ids}
    wait_for(lambda: not conn.exists(KEYS.limit_holders, KEYS.limit_running("main.Slow")), what="the slot freed")


def test_a_rate_held_go_task_comes_back_once_and_runs(procs, conn):
    ids = [f"r{i}" for i in range(6)]
    Queue("q", conn).enqueue_many(GoTask("main.Slow", [task_id, 0], rate_limit="3/s", limit_key="api")
                                  for task_id in ids)
    procs.our_go_worker("q", "-concurrency", "2", "-log-level", "debug")
    wait_for(lambda: executions(conn) == {task_id: 1 for task_id in ids}, what="every task to run once")
    assert executions(conn, "starts") == {task_id: 1 for task_id in ids}


def test_go_delayed_s_own_worker_ignores_limits(procs, conn):
    """Its dequeue script knows nothing of them: it runs a limited task at once, takes no slot and holds
    nothing back, as the docs say."""
    Queue("q", conn).enqueue_many(GoTask("main.Count", f"g{i}", concurrency_limit=1, rate_limit="1/h")
                                  for i in range(3))
    procs.go_worker("q")
    wait_for(lambda: executions(conn) == {f"g{i}": 1 for i in range(3)}, what="go-delayed to run every task")
    assert not conn.exists(KEYS.limits, KEYS.limit_holders, KEYS.limit_waiting("main.Count"))
