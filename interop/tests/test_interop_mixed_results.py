"""Results across languages in the mixed deployment: a Python producer reads what our Go worker's
handlers return (or the error they fail with), a Go service reads what our Python worker's functions
return through our Go module's client (interop/cmd/ourgoclient), and one Python producer feeds every
kind of worker on one Redis."""
import json
import uuid

import pytest
from conftest import OURGO, PY, STOCKGO, WAIT, executions, wait_for

from delayed import GoTask, PyTask, Queue, TaskFailedError


@pytest.mark.parametrize("task, expected", [
    (GoTask("main.Add", [40, 2]), 42),  # Add(ctx, a, b int) (int, error)
    (GoTask("main.Echo", -7), -7),  # Echo(v interface{}) (interface{}, error)
    (GoTask("main.Echo", "héllo"), "héllo"),
    (GoTask("main.Echo", [1, "a", [2.5, None]]), [1, "a", [2.5, None]]),
    (GoTask("main.Echo", {"k": [1, 2]}), {"k": [1, 2]}),
    (GoTask("main.MakePoint", [3, 4, "p"]), {"X": 3, "Y": 4, "Label": "p"}),  # a struct, as a dict
], ids=["int", "negative", "string", "list", "dict", "struct"])
def test_python_reads_our_go_handlers_result(mixed, task, expected):
    """queue.enqueue(GoTask, result_ttl=60).result() returns the Go handler's value, and the record
    says which Go worker ran it (go-delayed's worker writes no record: the wait would never end)."""
    handle = Queue(OURGO, mixed.conn).enqueue(task, result_ttl=60)
    assert handle.result(timeout=WAIT) == expected
    info = handle.info()
    assert (info.status, info.func, info.attempts) == ("done", task.func_path, 1)
    assert info.worker.startswith(mixed.our_go_worker.id)


def test_a_go_handlers_error_is_pythons_task_failed_error(mixed):
    """A Go handler that returns an error fails its task: Python's handle raises TaskFailedError with
    the Go error's text, and the record names the dead letter written for it."""
    tag = uuid.uuid4().hex
    handle = Queue(OURGO, mixed.conn).enqueue(GoTask("main.Fail", [tag, f"no luck for {tag}"]), result_ttl=60)
    with pytest.raises(TaskFailedError, match=f"no luck for {tag}") as failed:
        handle.result(timeout=WAIT)
    info = failed.value.info
    assert (info.status, info.error, info.attempts) == ("failed", f"no luck for {tag}", 1)
    assert mixed.conn.xrange(f"{OURGO}_dead_letters", info.letter, info.letter)
    assert executions(mixed.conn)[tag] == 1


def test_python_cancels_a_running_go_task_whose_handler_sees_err_cancelled(mixed):
    """handle.cancel() of a GoTask our Go worker runs cancels its handler's context, delayed.ErrCancelled its
    cause: the handler returns a value, and the task ends cancelled all the same, its result not kept."""
    tag = uuid.uuid4().hex
    handle = Queue(OURGO, mixed.conn).enqueue(GoTask("main.UntilCancelled", [tag, 7]), result_ttl=60)
    wait_for(lambda: mixed.conn.exists(f"started:{tag}") and mixed.conn.pubsub_numsub(f"{OURGO}_cancels")[0][1],
             what="the handler to start, its worker listening")
    outcome = handle.cancel()
    assert outcome.requested and outcome.worker.startswith(mixed.our_go_worker.id), outcome
    with pytest.raises(TaskFailedError, match="cancelled"):
        handle.result(timeout=WAIT)
    assert mixed.conn.get(f"cause:{tag}") == b"delayed: the task's cancel was requested"
    info = handle.info()
    assert (info.status, info.result, info.attempts) == ("cancelled", None, 1)


@pytest.mark.parametrize("args, expected", [
    ([40, 2], 42),
    (["py", "thon"], "python"),
    ([[1], [2, "x"]], [1, 2, "x"]),
], ids=["int", "string", "list"])
def test_go_client_reads_our_python_workers_result(mixed, mixed_procs, args, expected):
    """A Go service enqueues a tracked PyTask (EnqueueContext with ResultTTL) and waits with
    TaskHandle.Result: it gets tests.tasks.add's return value, run by our Python worker."""
    status, line = mixed_procs.our_go_client(PY, "-kind", "py", "-func", "tests.tasks:add", "-args", json.dumps(args))
    assert (status, line.get("result")) == (0, expected), line
    info = Queue(PY, mixed.conn).task_info(line["id"])  # the same record, read from Python
    assert (info.status, info.func) == ("done", "tests.tasks:add")


def test_a_python_exception_is_the_go_clients_task_failed_error(mixed, mixed_procs):
    """A Python function that raises fails its task: the Go side's Result returns a
    *TaskFailedError whose record holds the Python exception."""
    tag = uuid.uuid4().hex
    status, line = mixed_procs.our_go_client(PY, "-kind", "py", "-func", "tests.tasks:always_fail",
                                             "-args", json.dumps([tag]))
    assert (status, line["error_type"], line["status"]) == (2, "*delayed.TaskFailedError", "failed"), line
    assert "ValueError" in line["task_error"] and f"{tag} always fails" in line["task_error"]
    assert f"{tag} always fails" in line["error"]
    assert line["letter"]
    assert int(mixed.conn.get(tag)) == 1  # always_fail counts its calls under its tag: it ran once


def test_go_client_reads_our_go_workers_result(mixed, mixed_procs):
    """Go to Go through Redis: a tracked GoTask from the Go client, run by our Go worker."""
    status, line = mixed_procs.our_go_client(OURGO, "-kind", "go", "-func", "main.MakePoint", "-args", '[1, 2, "go"]')
    assert (status, line.get("result")) == (0, {"X": 1, "Y": 2, "Label": "go"}), line


def test_one_python_producer_feeds_every_worker_kind(mixed):
    """Each worker kind on the one Redis runs its own queue's tasks: our Python worker a PyTask, our
    Go worker a GoTask, go-delayed's worker a GoTask and one carrying options (which it ignores)."""
    tag = uuid.uuid4().hex
    sent = {
        f"{tag}-py": (PY, PyTask("tests.tasks:count", [f"{tag}-py"])),
        f"{tag}-ourgo": (OURGO, GoTask("main.Count", f"{tag}-ourgo")),
        f"{tag}-stockgo": (STOCKGO, GoTask("main.Count", f"{tag}-stockgo")),
        f"{tag}-stockgo-options": (STOCKGO, GoTask("main.Count", f"{tag}-stockgo-options", max_retries=2,
                                                   time_limit=30)),
    }
    for queue, task in sent.values():
        Queue(queue, mixed.conn).enqueue(task)
    wait_for(lambda: set(sent) <= set(executions(mixed.conn)), what="every worker kind to run its task")
    assert {task_id: executions(mixed.conn)[task_id] for task_id in sent} == dict.fromkeys(sent, 1)
