"""Workflows stalled behind a step that a worker which does not track tasks took: `delayed stats`, a
workflow's own view (`delayed task`) and delayed.ops.stalls flag them, on real Redis state made as a stock
go-delayed worker makes it (its Dequeue: BLPOP the notification, then its dequeue script, which LPOPs
the blob and HSETs it into <queue>_processing under the worker's id), and flag nothing else; every
look is bounded, and says when it stopped short. interop/tests/test_interop_workflow_stall_flag.py does
it again with the real go-delayed worker."""
import json
import re

import pytest
import redis

from delayed import GoTask, PyTask, Queue, Step, Worker, chain, group
from delayed.ops import flows, stalls
from delayed.ops.dashboard.flow_graph import layout
from delayed.protocol.worker_ops import WorkerOps
from delayed.wire.keys import new_worker_id

from .test_operating import run

GO_WORKER = "0123456789abcdef0123456789abcdef"
GO_DEQUEUE = """local task = redis.call('lpop', KEYS[1])
if task == nil then
    return nil
end
redis.call('hset', KEYS[2], ARGV[1], task)
return task"""
"""go-delayed's dequeueScript (delayed/queue.go), as it runs it."""


def go_delayed_takes(conn: redis.Redis, queue: str, worker: str = GO_WORKER) -> bytes:
    """What a stock go-delayed worker's Dequeue does to take the task at the head of queue (it never
    releases it: the next Dequeue's HSET replaces it); and its keep-alive key."""
    conn.set(worker, "1", ex=60)
    assert conn.blpop([queue + "_noti"], timeout=1) is not None
    return conn.eval(GO_DEQUEUE, 2, queue, queue + "_processing", worker)


def stats(url: str, *args: str):
    """`delayed stats ARGS`: its stderr's warnings, and its JSON rows by queue."""
    status, _, err = run("stats", *args, url=url)
    assert status == 0, err
    status, out, _ = run("stats", "--json", *args, url=url)
    assert status == 0
    return [line for line in err.splitlines() if line.startswith("delayed: ")], {row["queue"]: row for row in json.loads(out)}


def test_stats_flags_a_workflow_whose_step_a_go_delayed_worker_holds_and_then_one_it_lost(conn, redis_server):
    go = Queue("go", conn)
    handle = go.enqueue(chain(GoTask("main.Resize", ["cat.png"]), PyTask("tests.tasks:record", ["after"])))
    step = handle.steps()[0].id
    warnings, rows = stats(redis_server.url)
    assert warnings == [] and rows["go"]["workflows_stalled"] == []  # pending, in its queue

    go_delayed_takes(conn, "go")  # it runs the step, and holds its blob until it takes another task
    assert handle.steps()[0].status() == "pending"  # the record never hears of it
    warnings, rows = stats(redis_server.url)
    assert warnings == [f"delayed: warning: queue 'go': workflow {handle.id} is stalled: its step {step} (main.Resize) "
                        f"still says pending, but is held by worker {GO_WORKER}, which does not track tasks (a stock "
                        "go-delayed worker?); nothing will report the step's end, so the steps after it wait: run "
                        "workflows' steps on workers of ours (Python, or the Go module's)"]
    assert rows["go"]["workflows_stalled"] == [{"workflow": handle.id, "step": step, "step_queue": "go",
                                                "func": "main.Resize", "status": "pending", "worker": GO_WORKER}]
    assert rows["go"]["workflows_checked"] == {"workflows": 1, "steps": 2, "unchecked": 0, "complete": True}

    go.enqueue(GoTask("main.Resize", ["dog.png"]))
    go_delayed_takes(conn, "go")  # its next task: the step's blob is nowhere now
    warnings, rows = stats(redis_server.url, "--queue", "go")
    assert len(warnings) == 1 and "in neither its queue, its scheduled set nor any worker's hands" in warnings[0]
    assert [row["worker"] for row in rows["go"]["workflows_stalled"]] == [None]

    status, out, err = run("task", handle.id, url=redis_server.url)
    assert status == 0 and re.search(rf"^1 +{step} +go +main.Resize +pending +stalled: nowhere$", out, re.M), out
    assert f"workflow {handle.id} is stalled" in err
    status, out, _ = run("task", handle.id, "--json", url=redis_server.url)
    assert [row["stalled"] for row in json.loads(out)["workflow"]["steps"]] == ["", None]


def test_steps_that_wait_where_they_should_or_run_on_our_workers_are_not_flagged(conn, redis_server):
    queue = Queue("calm", conn)
    waiting = [queue.enqueue(chain(PyTask("tests.tasks:add", [1, 1]), PyTask("tests.tasks:add", [2, 2]))),
               queue.enqueue(chain(PyTask("tests.tasks:add", [1, 1]), PyTask("tests.tasks:add", [2, 2])), delay=3600),
               queue.enqueue(chain(PyTask("tests.tasks:add", [1, 1]), PyTask("tests.tasks:add", [2, 2])), delay=3600)]
    nonce, blob = conn.hmget(f"calm_task:{waiting[2].steps()[0].id}", "nonce", "blob")
    conn.zadd("calm_scheduled", {nonce + blob: 1}, xx=True)  # come due
    assert queue.move_due() == 1  # due: in the queue, its record still says scheduled
    assert conn.hget(f"calm_task:{waiting[2].steps()[0].id}", "status") == b"scheduled"
    assert not stalls.scan(conn, ["calm"]).stalled["calm"]
    retrying = queue.enqueue(chain(PyTask("tests.tasks:always_fail", ["later"], max_retries=1, backoff=3600),
                                   PyTask("tests.tasks:add", [2, 2])))
    Worker(Queue("calm", conn), ["tests.tasks"], burst=True).run()  # runs what is due: all but the delayed one
    assert [handle.steps()[0].status() for handle in waiting] == ["done", "scheduled", "done"]
    assert retrying.steps()[0].status() == "retrying"
    running = queue.enqueue(chain(PyTask("tests.tasks:add", [3, 3]), PyTask("tests.tasks:add", [4, 4])))
    [(worker_id, _)] = WorkerOps(queue).claim_batch((), (new_worker_id(),)).tasks  # ours: its record says running
    assert running.steps()[0].info().worker == worker_id
    group_handle = queue.enqueue(group([PyTask("tests.tasks:add", [i, i]) for i in range(30)]))
    found = stalls.scan(conn, ["calm"])
    assert found.stalled == {"calm": []} and found.complete and found.unchecked == 0
    assert found.workflows == {"calm": 6} and found.steps == 3 * 2 + 30  # those that ended are not looked at
    warnings, rows = stats(redis_server.url)
    assert warnings == [] and rows["calm"]["workflows_stalled"] == []
    assert flows.view(conn, "calm", group_handle.id).stalled == {}


def test_a_step_beyond_the_depth_looked_through_is_unchecked_and_the_look_says_it_stopped_short(conn, monkeypatch):
    queue = Queue("deep", conn)
    queue.enqueue_many([PyTask("tests.tasks:add", [i, i]) for i in range(5)])
    handle = queue.enqueue(chain(PyTask("tests.tasks:add", [1, 1]), PyTask("tests.tasks:add", [2, 2])))
    monkeypatch.setattr(stalls, "DEPTH", 3)  # the step is 6th in its queue
    found = stalls.scan(conn, ["deep"])
    assert found.stalled == {"deep": []} and found.unchecked == 1 and not found.complete
    assert "3 tasks of a queue" in stalls.bounds(found) and "1 in a longer queue unchecked" in stalls.bounds(found)
    conn.lrem("deep", 1, conn.lrange("deep", -1, -1)[0])  # the step's blob gone: not found, but not told either
    assert stalls.scan(conn, ["deep"]).stalled == {"deep": []}
    conn.ltrim("deep", 0, 2)  # 3 tasks left: the whole queue is looked through, and the step is not there
    found = stalls.scan(conn, ["deep"])
    assert [step["step"] for step in found.stalled["deep"]] == [handle.steps()[0].id] and found.complete
    assert stalls.bounds(found) == ""


def test_the_look_of_the_queues_reads_at_most_flow_limit_workflows_and_step_budget_steps(conn, monkeypatch):
    queue = Queue("many", conn)
    for _ in range(3):
        queue.enqueue(chain(PyTask("tests.tasks:add", [1, 1]), PyTask("tests.tasks:add", [2, 2])))
    Queue("other", conn).enqueue(chain(PyTask("tests.tasks:add", [1, 1]), PyTask("tests.tasks:add", [2, 2])))
    assert stalls.scan(conn, ["many"]).complete
    monkeypatch.setattr(stalls, "FLOW_LIMIT", 2)
    found = stalls.scan(conn, ["many", "other"])
    assert sum(found.workflows.values()) == 2 and found.steps == 4 and not found.complete
    monkeypatch.setattr(stalls, "FLOW_LIMIT", 10)
    monkeypatch.setattr(stalls, "STEP_BUDGET", 5)
    found = stalls.scan(conn, ["many"])
    assert found.workflows == {"many": 3} and found.steps == 5 and not found.complete


@pytest.mark.parametrize("where", ["held", "lost"])
def test_a_workflow_s_own_view_marks_its_stalled_step_in_a_group_and_lists_it(conn, where):
    queue = Queue("go", conn)
    members = [PyTask("tests.tasks:add", [i, i]) for i in range(25)]
    members[17] = GoTask("main.Resize", ["cat.png"])
    handle = queue.enqueue(group(members, callback=Step(PyTask("tests.tasks:record", ["all"]), takes_result=False)))
    assert len(WorkerOps(queue).claim_batch((), [new_worker_id() for _ in range(17)]).tasks) == 17  # ours run them
    go_delayed_takes(conn, "go")
    if where == "lost":
        assert WorkerOps(queue).claim_batch((), (new_worker_id(),)).tasks  # ours took the 19th member
        conn.hset("go_processing", GO_WORKER, GoTask("main.Resize", ["dog.png"]).serialize())  # its next task
    shown = flows.view(conn, "go", handle.id)
    assert shown.stalled == {17: GO_WORKER if where == "held" else None}
    row = shown.as_dict()
    assert [step["step"] for step in row["steps"]] == [*range(1, 11), 18, 26]  # the first, the stalled, the final
    assert row["steps"][10]["stalled"] == (GO_WORKER if where == "held" else "")
    assert row["counts"] == ({"running": 17, "pending": 8, "waiting": 1} if where == "held" else
                             {"running": 18, "pending": 7, "waiting": 1})
    assert handle.status() == "running"
    assert [(node.steps, node.stalled) for node in layout(shown).nodes] == [(25, True), (1, False)]  # its group's


def test_on_a_cluster_stats_flags_stalled_workflows_on_every_primary_and_task_finds_them(cluster):
    from .test_cluster_roles import nodes_client, on_three_primaries

    client, names = nodes_client(cluster), on_three_primaries(cluster)
    handles = [Queue(name, client).enqueue(chain(GoTask("main.Resize", [name]), PyTask("tests.tasks:add", [1, 1])))
               for name in names]
    for name in names:
        go_delayed_takes(client, name)
    warnings, rows = stats(cluster.url)
    assert [[step["workflow"] for step in rows[name]["workflows_stalled"]] for name in names] == [
        [handle.id] for handle in handles]
    assert len(warnings) == 3
    status, out, _ = run("task", handles[1].id, url=cluster.url)
    assert status == 0 and out.startswith(f"workflow: {handles[1].id} of {names[1]}\n") and "stalled: held by" in out
