"""A workflow whose GoTask step a stock go-delayed worker (interop/bin/goworker) took: the worker runs
the step but never reports its end (it writes no record), so the steps after it wait; `delayed stats`
flags the workflow, first while the worker holds the step's blob, then once it took another task and
the blob is nowhere. (tests/test_stalled_workflows.py makes the same state by hand, without Go.)"""
import json
import subprocess
import sys

from conftest import ROOT, WAIT, executions, wait_for

from delayed import GoTask, PyTask, Queue, chain


def stats(url: str):
    """`delayed stats --queue q`: its warnings on stderr, and queue q's stalled steps (--json)."""
    def run(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "delayed", "stats", "--queue", "q", *args, "--redis-url", url],
                              cwd=ROOT, capture_output=True, text=True, timeout=WAIT)
        assert done.returncode == 0, done.stderr
        return done

    [row] = json.loads(run("--json").stdout)
    return [line for line in run().stderr.splitlines() if "stalled" in line], row["workflows_stalled"]


def test_stats_flags_a_workflow_stalled_behind_a_step_a_stock_go_delayed_worker_ran(procs, conn):
    worker = procs.go_worker("q")
    queue = Queue("q", conn)
    handle = queue.enqueue(chain(GoTask("main.Count", "step 1"), PyTask("tests.tasks:record", ["step 2"])))
    first, second = handle.steps()
    wait_for(lambda: executions(conn).get("step 1") == 1, what="go-delayed's worker to run the step")
    warnings, stalled = stats(procs.redis_url)
    assert stalled == [{"workflow": handle.id, "step": first.id, "step_queue": "q", "func": "main.Count",
                        "status": "pending", "worker": worker.id}]
    assert len(warnings) == 1 and f"held by worker {worker.id}" in warnings[0]
    assert (first.status(), second.status(), handle.status()) == ("pending", "waiting", "running")

    queue.enqueue(GoTask("main.Count", "next"))
    wait_for(lambda: executions(conn).get("next") == 1, what="go-delayed's worker to take its next task")
    warnings, stalled = stats(procs.redis_url)
    assert [(step["step"], step["worker"]) for step in stalled] == [(first.id, None)]
    assert len(warnings) == 1 and "in neither its queue, its scheduled set nor any worker's hands" in warnings[0]
    assert (first.status(), second.status(), handle.status()) == ("pending", "waiting", "running")
