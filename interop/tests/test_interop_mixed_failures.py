"""Failures of Go tasks in the mixed deployment, as an operator sees them: our Go worker retries a
failing handler as the task's options say, then dead-letters it in the stream `delayed dead list`
reads (a panic with its stack), `delayed dead requeue` puts it back; what it cannot run (an unknown
handler, a PyTask) is dead-lettered with the reason our Python worker gives."""
import json
import uuid
from typing import List

import pytest
from conftest import OURGO, PY, WAIT, Deployment, executions, wait_for

from delayed import GoTask, PyTask, Queue, TaskFailedError


def letters(mixed: Deployment, queue: str, tag: str) -> List[dict]:
    """`delayed dead list --queue QUEUE --json`: the letters whose task mentions tag, oldest first."""
    shown = json.loads(mixed.cli("dead", "list", "--queue", queue, "--json", "--limit", "10000"))
    return [letter for letter in shown if tag in json.dumps(letter["task"])]


def test_a_failing_go_task_is_retried_then_dead_lettered_and_requeued(mixed):
    """GoTask(max_retries=2, backoff=0) whose Go handler returns an error runs 3 times, then `delayed
    dead list` shows its one letter: reason failed, the Go error's text; `delayed dead requeue` puts it
    back in the queue, and it runs again."""
    tag = uuid.uuid4().hex
    Queue(OURGO, mixed.conn).enqueue(GoTask("main.Fail", [tag, f"{tag} keeps failing"], max_retries=2, backoff=0))
    [letter] = wait_for(lambda: letters(mixed, OURGO, tag), what="the task's dead letter")
    assert executions(mixed.conn)[tag] == 3  # the first run and 2 retries, all before the letter
    assert (letter["reason"], letter["func"], letter["error"]) == ("failed", "main.Fail", f"{tag} keeps failing")
    assert letter["worker"].startswith(mixed.our_go_worker.id)
    assert letter["task"]["payload"] == [tag, f"{tag} keeps failing"]
    assert letter["task"]["options"]["max_retries"] == 2

    assert mixed.cli("dead", "requeue", letter["id"], "--queue", OURGO).strip() == f"requeued 1 task into {OURGO}"
    wait_for(lambda: [again for again in letters(mixed, OURGO, tag) if again["id"] != letter["id"]],
             what="the requeued task to fail again")
    assert executions(mixed.conn)[tag] > 3
    assert letter["id"] not in [again["id"] for again in letters(mixed, OURGO, tag)]  # requeue took it out


def test_a_panicking_go_handlers_letter_holds_the_panics_stack(mixed):
    """A Go handler that panics fails its task like an error; the letter's error is the panic's value
    and its traceback the goroutine's stack, down to the handler."""
    tag = uuid.uuid4().hex
    Queue(OURGO, mixed.conn).enqueue(GoTask("main.Panic", [tag, f"{tag} blew up"]))
    [letter] = wait_for(lambda: letters(mixed, OURGO, tag), what="the task's dead letter")
    assert (letter["reason"], letter["error"]) == ("failed", f"panic: {tag} blew up")
    assert letter["traceback"].startswith(f"panic: {tag} blew up\n")
    assert "goroutine " in letter["traceback"] and "main.Panic(" in letter["traceback"]
    assert executions(mixed.conn)[tag] == 1
    assert f"panic: {tag} blew up" in mixed.cli("dead", "show", letter["id"], "--queue", OURGO)


@pytest.mark.parametrize("queue, make_task, reason, error", [
    (OURGO, lambda tag: GoTask("main.Unregistered", tag), "not_allowed",
     "no handler is registered for main.Unregistered"),
    (OURGO, lambda tag: PyTask("tests.tasks:record", [tag]), "py_task",
     "a PyTask for 'tests.tasks:record': only a Python worker can run it"),
    (PY, lambda tag: GoTask("main.Add", [tag, 1]), "go_task",  # the other way round: our Python worker
     "a GoTask for 'main.Add': only a Go worker can run it"),
], ids=["unknown-handler", "pytask-in-go-queue", "gotask-in-python-queue"])
def test_what_a_worker_cannot_run_is_dead_lettered_with_its_reason(mixed, queue, make_task, reason, error):
    """A task a worker cannot run is a dead letter `delayed dead list` shows with its reason, not a
    silent drop (go-delayed's worker logs an unknown handler at debug level and moves on); tracked,
    its handle raises TaskFailedError, status dead."""
    tag = uuid.uuid4().hex
    handle = Queue(queue, mixed.conn).enqueue(make_task(tag), result_ttl=60)
    with pytest.raises(TaskFailedError) as failed:
        handle.result(timeout=WAIT)
    assert failed.value.info.status == "dead"
    [letter] = letters(mixed, queue, tag)
    assert (letter["reason"], letter["error"]) == (reason, error)
    assert letter["id"] == failed.value.info.letter
