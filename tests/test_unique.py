"""Unique tasks: while one is queued or running, an identical one (or one with its key) is refused."""
import hashlib
import time

import pytest

from delayed import DuplicateTaskError, GoTask, PyTask, Queue
from delayed.protocol.worker_ops import WorkerOps

from .conftest import results, wait_for


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


def test_an_identical_task_is_refused_while_the_first_is_queued(conn, queue):
    queue.enqueue(PyTask("m:f", [1]), unique_for=60)
    with pytest.raises(DuplicateTaskError, match=r"q_unique:\w+ is held .* expires in (59|60)\.\d s"):
        queue.enqueue(PyTask("m:f", [1]), unique_for=60)
    queue.enqueue(PyTask("m:f", [2]), unique_for=60)  # other arguments: another task
    assert conn.llen("q") == conn.llen("q_noti") == 2


def test_a_shared_key_makes_different_tasks_duplicates(conn, queue):
    queue.enqueue(PyTask("m:f", [1]), unique_for=60, unique_key="report:2026-11")
    with pytest.raises(DuplicateTaskError):
        queue.enqueue(PyTask("m:g"), unique_for=60, unique_key="report:2026-11", delay=10)
    assert conn.llen("q") == 1 and not conn.exists("q_scheduled")
    assert conn.exists("q_unique:report:2026-11")


def test_the_lock_expires(conn, queue):
    queue.enqueue(PyTask("m:f"), unique_for=0.2)
    time.sleep(0.25)
    queue.enqueue(PyTask("m:f"), unique_for=0.2)
    assert conn.llen("q") == 2


def test_a_unique_delayed_task(conn, queue):
    queue.enqueue(PyTask("m:f"), unique_for=60, delay=30)
    with pytest.raises(DuplicateTaskError):
        queue.enqueue(PyTask("m:f"), unique_for=60)
    assert conn.zcard("q_scheduled") == 1 and not conn.exists("q")


def test_a_gotask_is_unique_by_its_call_or_its_key(conn, queue):
    """Its lock's identity is its go-delayed bytes' digest (or unique_key); the blob carries the lock's key
    and token in its third element for our Go worker to release."""
    queue.enqueue(GoTask("main.F", 1), unique_for=60)
    with pytest.raises(DuplicateTaskError):
        queue.enqueue(GoTask("main.F", 1), unique_for=60)
    queue.enqueue(GoTask("main.F", 2), unique_for=60)
    queue.enqueue(GoTask("main.G"), unique_for=60, unique_key="report")
    with pytest.raises(DuplicateTaskError):
        queue.enqueue(PyTask("m:f"), unique_for=60, unique_key="report")
    tasks = [GoTask.deserialize(blob) for blob in conn.lrange("q", 0, -1)]
    assert [task.args for task in tasks] == [1, 2, None]
    assert all(conn.get(f"q_unique:{task.options.unique_key}") == task.options.unique_token.encode() for task in tasks)
    assert tasks[2].options.unique_key == "report"


def test_headers_are_not_part_of_a_task_s_identity(conn, queue):
    """Two enqueues of one call carry different headers when a tracing middleware adds its traceparent:
    still duplicates, under the lock of the call without headers (the digest a Go producer takes too)."""
    queue.enqueue(PyTask("m:f", [1], headers={"traceparent": "00-aa-01"}), unique_for=60)
    with pytest.raises(DuplicateTaskError):
        queue.enqueue(PyTask("m:f", [1], headers={"traceparent": "00-bb-01"}), unique_for=60)
    with pytest.raises(DuplicateTaskError):
        queue.enqueue(PyTask("m:f", [1]), unique_for=60)
    assert conn.exists(f"q_unique:{hashlib.sha1(PyTask('m:f', [1]).serialize()).hexdigest()}")


def test_expiry_is_not_part_of_a_task_s_identity(conn, queue):
    """An expires counts from each enqueue, so two enqueues of one call carry different expires_at: still
    duplicates, under the lock of the call without it."""
    queue.enqueue(PyTask("m:f", [1]), unique_for=60, expires=30)
    with pytest.raises(DuplicateTaskError):
        queue.enqueue(PyTask("m:f", [1]), unique_for=60, expires=30)
    with pytest.raises(DuplicateTaskError):
        queue.enqueue(PyTask("m:f", [1]), unique_for=60)
    assert conn.exists(f"q_unique:{hashlib.sha1(PyTask('m:f', [1]).serialize()).hexdigest()}")


def test_the_lock_is_released_when_the_task_finishes(conn, queue, run_worker):
    queue.enqueue(PyTask("tests.tasks:record", ["once"]), unique_for=60)
    run_worker()
    wait_for(lambda: results(conn), what="the task")
    wait_for(lambda: not conn.keys("q_unique:*"), what="the lock released")
    queue.enqueue(PyTask("tests.tasks:record", ["once"]), unique_for=60)
    wait_for(lambda: len(results(conn)) == 2, what="the second run")


def test_the_lock_holds_through_retries_and_goes_with_the_dead_letter(conn, queue, run_worker):
    queue.enqueue(PyTask("tests.tasks:always_fail", ["u"], max_retries=2, backoff=0.3), unique_for=60)
    run_worker()
    wait_for(lambda: conn.get("u") == b"1", what="the first failure")
    with pytest.raises(DuplicateTaskError):  # waiting for its retry: still held
        queue.enqueue(PyTask("tests.tasks:always_fail", ["u"], max_retries=2, backoff=0.3), unique_for=60)
    wait_for(lambda: queue.dead.count(), what="the dead letter")
    wait_for(lambda: not conn.keys("q_unique:*"), what="the lock released")


def test_a_task_dead_lettered_before_its_call_releases_its_lock_too(conn, queue, run_worker):
    queue.enqueue(PyTask("tests.tasks:_private", ["x"]), unique_for=3600)  # not_allowed
    queue.enqueue(PyTask("tests.tasks:add", [1]), unique_for=3600)  # bad_arguments
    run_worker()
    wait_for(lambda: queue.dead.count() == 2, what="both dead letters")
    wait_for(lambda: not conn.keys("q_unique:*"), what="both locks released")


def test_a_stale_worker_does_not_release_a_newer_lock(conn, queue):
    queue.enqueue(PyTask("m:f"), unique_for=60)
    [(key, token)] = [(k.decode().split(":", 1)[1], v.decode()) for k in conn.keys("q_unique:*")
                      for v in [conn.get(k)]]
    conn.pexpire(f"q_unique:{key}", 1)
    wait_for(lambda: not conn.exists(f"q_unique:{key}"), what="the lock to expire")
    queue.enqueue(PyTask("m:f"), unique_for=60)  # the old lock expired; a new task holds a new one
    assert WorkerOps(queue).unlock([(key, token)]) == 0
    assert conn.exists(f"q_unique:{key}")
