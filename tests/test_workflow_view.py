"""`delayed task ID` for a workflow, or for one of its steps, and `delayed cancel ID` for a workflow: its
status, the step that stopped it and why, its steps in order with their functions, states and what each
waits on, summarised when there are many; every read bounded (delayed.ops.flows)."""
import json
import re

from delayed import PyTask, Queue, Step, Worker, chain, group
from delayed.ops import flows
from delayed.ops.dashboard.flow_graph import layout

from .test_operating import run


def failed_chain(conn):
    """On queue "jobs": add(1, 2), then always_fail, then record, with an on_success step; run until the
    second step fails (and stops the workflow: the steps after it wait)."""
    queue = Queue("jobs", conn)
    handle = queue.enqueue(chain(PyTask("tests.tasks:add", [1, 2]), PyTask("tests.tasks:always_fail", ["step 2"]),
                                 PyTask("tests.tasks:record", ["never"])),
                           on_success=PyTask("tests.tasks:record", ["handled"]))
    Worker(queue, ["tests.tasks"], burst=True).run()
    return handle


def test_a_workflow_s_id_shows_its_status_the_step_that_stopped_it_and_every_step(conn, redis_server):
    handle = failed_chain(conn)
    ids = [step.id for step in handle.steps()]
    status, out, err = run("task", handle.id, url=redis_server.url)
    assert status == 0 and err == "", err
    lines = out.splitlines()
    assert lines[:3] == [f"workflow: {handle.id} of jobs", "status: failed", "steps: 4, 3 left: waiting 2, done 1, failed 1"]
    assert f"stopped_by: step 2, {ids[1]} (tests.tasks:always_fail): failed: ValueError: step 2 always fails" in lines
    table = lines[lines.index(next(line for line in lines if line.startswith("STEP"))):]
    assert [line.split()[:5] for line in table] == [
        ["STEP", "ID", "QUEUE", "FUNC", "STATUS"], ["1", ids[0], "jobs", "tests.tasks:add", "done"],
        ["2", ids[1], "jobs", "tests.tasks:always_fail", "failed"], ["3", ids[2], "jobs", "tests.tasks:record", "waiting"],
        ["4", ids[3], "jobs", "tests.tasks:record", "waiting"]]
    assert table[2].split(None, 6)[5:] == ["1", "ValueError: step 2 always fails"]
    assert table[3].split(None, 6)[5:] == ["2", "waits for 1"]
    assert table[4].split(None, 5)[5] == "3      waits for 1"

    status, out, _ = run("task", handle.id, "--json", "--queue", "jobs", url=redis_server.url)
    shown = json.loads(out)["workflow"]
    assert (shown["status"], shown["total"], shown["left"], shown["counts"]) == (
        "failed", 4, 3, {"waiting": 2, "done": 1, "failed": 1})
    assert shown["stopped_by"]["id"] == ids[1] and shown["error"] == "failed: ValueError: step 2 always fails"
    assert [step["after"] for step in shown["steps"]] == [
        [], [{"from": 1, "to": 1, "when": "succeeded"}], [{"from": 2, "to": 2, "when": "succeeded"}],
        [{"from": 3, "to": 3, "when": "succeeded"}]]
    assert shown["listed_all"] and shown["read"] == 4


def test_a_step_s_id_shows_the_task_then_its_workflow_with_the_step_marked(conn, redis_server):
    handle = failed_chain(conn)
    step = handle.steps()[1].id
    status, out, _ = run("task", step, url=redis_server.url)
    assert status == 0 and out.startswith(f"id: {step}\nstatus: failed\nfunc: tests.tasks:always_fail\n"), out
    assert f"\nstep 2 of workflow {handle.id}:\nworkflow: {handle.id} of jobs\n" in out
    assert re.search(rf"^2 +{step} +jobs +tests.tasks:always_fail +failed +1 +this task; ValueError", out, re.M), out
    status, out, _ = run("task", step, "--json", url=redis_server.url)
    shown = json.loads(out)
    assert shown["status"] == "failed" and shown["workflow"]["id"] == handle.id
    assert [row["current"] for row in shown["workflow"]["steps"]] == [False, True, False, False]
    plain = Queue("jobs", conn).enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=60)  # no workflow
    status, out, _ = run("task", plain.id, "--json", url=redis_server.url)
    assert "workflow" not in json.loads(out)


def test_a_large_workflow_is_summarised_its_failed_and_final_steps_listed_and_all_steps_on_demand(conn, redis_server):
    queue = Queue("big", conn)
    members = [PyTask("tests.tasks:add", [i, i]) for i in range(40)]
    members[24] = members[31] = PyTask("tests.tasks:always_fail", ["member"])
    handle = queue.enqueue(group(members, callback=PyTask("tests.tasks:record", ["all"]), on_member_failure="pass"))
    Worker(queue, ["tests.tasks"], burst=True).run()
    assert handle.status() == "done"
    status, out, _ = run("task", handle.id, url=redis_server.url)
    assert status == 0 and "steps: 41, 0 left: done 39, failed 2\n" in out
    listed = [int(line.split()[0]) for line in out.splitlines() if re.match(r"\d+ ", line)]
    assert listed == [*range(1, 11), 25, 32, 41]
    assert ("(13 of 41 steps listed: the first, the final ones, and those that failed, stopped it or stalled; "
            "--all-steps lists every one)") in out
    assert re.search(r"^41 +\w+ +big +tests.tasks:record +done +1-40 \(ended\)$", out, re.M), out
    status, out, _ = run("task", handle.id, "--all-steps", url=redis_server.url)
    assert [int(line.split()[0]) for line in out.splitlines() if re.match(r"\d+ ", line)] == list(range(1, 42))


def test_a_group_of_100000_prints_a_summary_and_draws_one_node_for_its_members(conn, redis_server):
    queue = Queue("huge", conn)
    handle = queue.enqueue(group([PyTask("tests.tasks:add", [i, i]) for i in range(100_000)],
                                 callback=Step(PyTask("tests.tasks:record", ["all"]), takes_result=False)))
    status, out, _ = run("task", handle.id, url=redis_server.url)
    assert status == 0 and len(out.splitlines()) < 25, out
    assert "steps: 100001, 100001 left: pending 100000, waiting 1\n" in out
    assert f"(looked for stalled steps among the first {flows.stalls.VIEW_STEP_LIMIT};" in out
    shown = flows.view(conn, "huge", handle.id)
    assert shown.listed == [*range(10), 100_000]
    graph = layout(shown)
    assert [(node.steps, node.counts, node.task_id is None) for node in graph.nodes] == [
        (100_000, [("pending", 100_000)], True), (1, [], False)]
    assert [edge.when for edge in graph.edges] == ["succeeded"]


def test_a_view_reads_at_most_read_limit_steps_and_says_so(conn, monkeypatch):
    handle = Queue("q", conn).enqueue(group([PyTask("tests.tasks:add", [i, i]) for i in range(30)],
                                            callback=PyTask("tests.tasks:record", ["all"])))
    monkeypatch.setattr(flows, "READ_LIMIT", 12)
    row = flows.view(conn, "q", handle.id).as_dict()
    assert (row["read"], row["counts"], row["total"]) == (12, {"pending": 12}, 31)
    assert [step["step"] for step in row["steps"]] == list(range(1, 11))  # the final step was not read
    every = flows.view(conn, "q", handle.id, every_step=True)
    assert every.listed == list(range(12)) and not every.as_dict()["listed_all"]
    assert len(layout(every).nodes) == 1  # 12 members in one column: one node


def test_cancel_takes_a_workflow_s_id_and_ids_are_found_or_refused_clearly(conn, redis_server):
    queue = Queue("jobs", conn)
    handle = queue.enqueue(chain(PyTask("tests.tasks:add", [1, 2]), PyTask("tests.tasks:add", [3, 4])))
    status, out, err = run("cancel", handle.id, url=redis_server.url)
    assert status == 0 and out.startswith(f"cancelled workflow {handle.id} (running): "), err
    assert handle.status() == "cancelled" and [step.status() for step in handle.steps()] == ["cancelled"] * 2
    status, _, err = run("cancel", handle.id, url=redis_server.url)
    assert status == 1 and err == f"delayed: workflow {handle.id} already ended (cancelled)\n"

    status, _, err = run("task", "0" * 32, url=redis_server.url)
    assert status == 1 and err.startswith(f"delayed: no record of task {'0' * 32} on any queue: never tracked")
    assert err.endswith("; nor a workflow of that id\n")
    status, _, err = run("task", handle.id, "--queue", "other", url=redis_server.url)
    assert status == 1 and err.startswith(f"delayed: no record of task {handle.id} in other: never tracked")
    conn.hset(f"other_task:{handle.id}", "status", "done")  # the same id, a task's, on another queue
    status, _, err = run("task", handle.id, url=redis_server.url)
    assert status == 2 and err == f"delayed: {handle.id} names several (task in other, workflow in jobs): name the " \
                                  "queue with --queue\n"
    status, out, _ = run("task", handle.id, "--queue", "jobs", url=redis_server.url)
    assert status == 0 and out.startswith(f"workflow: {handle.id} of jobs\nstatus: cancelled\n")
