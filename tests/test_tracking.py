"""Tracked tasks (result_ttl): handles, records through every status, results, cancel, the task log;
an untracked task costs and changes nothing."""
import asyncio
import json
import logging
import os
import signal
import time

import msgpack
import pytest
import redis.asyncio

from delayed import AsyncQueue, DuplicateTaskError, GoTask, PyTask, Queue, Worker, delayed
from delayed.errors import TaskFailedError, TaskNotFoundError
from delayed.protocol.handles import AsyncTaskHandle, TaskHandle
from delayed.protocol.sweeper_ops import SweeperOps
from delayed.protocol.worker_ops import WorkerOps
from delayed.runtime.lifecycle import Lifecycle
from delayed.wire.options import TaskOptions
from delayed.wire.task import decode_task
from delayed.wire.tracking import Tracked, pack_result
from delayed.worker.holding import Claim, Holding

from . import slowlog
from .conftest import WAIT, results, spawn, wait_for


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


def record_of(conn, handle):
    return {key.decode(): value for key, value in conn.hgetall(f"q_task:{handle.id}").items()}


# Untracked: today's blob, no marker, no record, None returned


def test_an_untracked_task_keeps_today_s_blob_and_returns_none(conn, queue):
    task = PyTask("tests.tasks:add", [1, 2])
    assert queue.enqueue(task) is None
    assert queue.enqueue(task, delay=60) is None
    assert queue.enqueue_many([task]) == 1
    assert conn.lrange("q", 0, -1) == [task.serialize()] * 2
    assert sorted(conn.keys("*")) == [b"q", b"q_counts", b"q_noti", b"q_scheduled"]


def test_an_untracked_task_through_a_worker_writes_no_record(conn, queue, run_worker):
    queue.enqueue(PyTask("tests.tasks:record", ["plain"]))
    run_worker()
    wait_for(lambda: results(conn), what="the task")
    assert not conn.keys("q_task:*") and not conn.exists("q_tracked")


# The record through its statuses


def test_a_tracked_task_is_pending_then_done_with_its_result(conn, queue, run_worker):
    before = time.time()
    handle = queue.enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=60)
    assert isinstance(handle, TaskHandle) and len(handle.id) == 32
    assert decode_task(conn.lindex("q", 0)).options == TaskOptions(id=handle.id)
    assert conn.exists("q_tracked")
    info = handle.info()
    assert (info.status, info.func, info.attempts, info.expires_in) == ("pending", "tests.tasks:add", 0, None)
    assert before <= info.enqueued_at <= time.time()
    run_worker()
    assert handle.result(timeout=WAIT) == 3
    before = time.time()
    info = queue.task(handle.id).info()
    read = time.time()
    assert (info.status, info.result, info.attempts, info.note, info.error) == ("done", 3, 1, None, None)
    assert info.worker.startswith("delayed-py-") and info.started_at <= info.finished_at
    assert 0 <= info.seconds <= info.finished_at - info.started_at + 0.002  # the run, in seconds
    assert before - 0.5 <= info.finished_at + 60 - info.expires_in <= read + 0.5  # expires 60 s after the end
    blob = PyTask("tests.tasks:add", [1, 2], options={"id": handle.id}).serialize()
    assert conn.hget(f"q_task:{handle.id}", "blob") == blob  # kept until the record expires: its arguments


def test_result_waits_and_times_out(conn, queue):
    handle = queue.enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=60)
    started = time.monotonic()
    with slowlog.every_command(conn):
        with pytest.raises(TimeoutError, match=f"task {handle.id} still pending after 0.2 s"):
            handle.result(timeout=0.2)
        reads = sum(command[0] == b"HGETALL" for command, _ in slowlog.sent(conn))
    assert time.monotonic() - started >= 0.2
    assert 1 < reads <= 7, reads  # at once, then after 5, 10, 20, 40, 80 ms and at 0.2 s: no busy polling


def test_a_running_task_says_so_with_its_worker(conn, queue, run_worker):
    handle = queue.enqueue(PyTask("tests.tasks:slow", ["t", 1.0]), result_ttl=60)
    worker = run_worker()
    wait_for(lambda: conn.exists("started:t"), what="the task to start")
    info = handle.info()
    assert info.status == "running" and info.worker in worker.ids and info.started_at <= time.time()
    assert handle.result(timeout=WAIT) is None


def test_an_unserialisable_result_is_kept_as_its_repr_with_a_note(queue, run_worker):
    handle = queue.enqueue(PyTask("tests.tasks:returns_unserialisable", ["k"]), result_ttl=60)
    after = queue.enqueue(PyTask("tests.tasks:add", [2, 2]), result_ttl=60)
    run_worker()
    assert after.result(timeout=WAIT) == 4  # the worker went on
    info = handle.info()
    assert info.status == "done" and info.result.startswith("{'k': <object object at ")
    assert info.note.startswith("not serialisable with msgpack (TypeError: ") and info.note.endswith("its repr")


def test_pack_result_bounds_the_size_and_survives_a_failing_repr():
    class Bad:
        def __repr__(self):
            raise RuntimeError("no")

    assert pack_result([1, "a"], 100) == (msgpack.packb([1, "a"]), "")
    data, note = pack_result("x" * 200, 100)
    assert msgpack.unpackb(data) is None and note == "202 bytes, over the queue's max_task_size of 100: not stored"
    data, note = pack_result(Bad(), 100)
    assert msgpack.unpackb(data) == "<Bad whose repr raised RuntimeError>"


def test_a_retried_task_says_retrying_with_its_error_then_failed_with_its_letter(conn, queue, run_worker):
    handle = queue.enqueue(PyTask("tests.tasks:always_fail", ["f"], retry=1), result_ttl=60)
    claim = Claim("delayed-py-" + "0" * 32, WorkerOps(queue).claim("delayed-py-" + "0" * 32, timeout=1),
                  Holding(queue, 1, Lifecycle("worker")))
    assert handle.status() == "running"  # claimed by dequeue.lua, as an idle worker claims
    assert Worker(queue, ["tests.tasks"]).execute(claim.blob).apply(WorkerOps(queue), claim)
    info = handle.info()
    assert (info.status, info.error, info.attempts) == ("retrying", "ValueError: f always fails", 1)
    assert info.due <= time.time() and info.worker is None
    run_worker()
    with pytest.raises(TaskFailedError, match=f"task {handle.id} \\(tests.tasks:always_fail\\) failed: ValueError"):
        handle.result(timeout=WAIT)
    before = time.time()
    info = handle.info()
    read = time.time()
    assert (info.status, info.attempts) == ("failed", 2)
    assert info.letter == queue.dead.list()[0]["id"]
    assert before - 0.5 <= info.finished_at + 60 - info.expires_in <= read + 0.5  # expires 60 s after the end


def test_a_task_retried_with_backoff_says_when_it_runs_next(queue, run_worker):
    before = time.time()
    handle = queue.enqueue(PyTask("tests.tasks:always_fail", ["b"], max_retries=1, backoff=60), result_ttl=60)
    run_worker()
    wait_for(lambda: handle.status() == "retrying", what="the first failure")
    info = handle.info()
    assert before + 60 <= info.due <= time.time() + 60 and info.error == "ValueError: b always fails"
    assert queue.cancel(handle.id)  # waiting in the scheduled set: cancelled there
    assert handle.status() == "cancelled"


def test_a_task_no_worker_may_run_is_dead(queue, run_worker):
    handle = queue.enqueue(PyTask("tests.tasks:_private", ["x"]), result_ttl=60)
    run_worker()
    with pytest.raises(TaskFailedError, match="dead: "):
        handle.result(timeout=WAIT)
    assert handle.info().error == "'tests.tasks:_private' is not an allowed task function"


def test_a_scheduled_task_is_scheduled_then_pending_once_due(conn, queue):
    before = time.time()
    handle = queue.enqueue(PyTask("tests.tasks:add", [1, 2]), delay=0.3, result_ttl=60)
    later = queue.enqueue(PyTask("tests.tasks:add", [3, 4]), delay=3600, result_ttl=60)
    info = later.info()
    assert info.status == "scheduled" and before + 3600 <= info.due
    assert before + 0.3 <= handle.info().due
    time.sleep(0.35)
    assert handle.status() == "pending"  # due: moving due tasks would take it (not running here)
    assert later.status() == "scheduled"


def test_threads_and_coroutines_keep_their_results(queue, run_worker):
    handles = queue.enqueue_many([PyTask("tests.tasks:add", [i, 1]) for i in range(4)]
                                 + [PyTask("tests.tasks:async_add", [10, 1])], result_ttl=60)
    run_worker(threads=3)
    assert [handle.result(timeout=WAIT) for handle in handles] == [1, 2, 3, 4, 11]


def test_a_coroutine_run_by_a_one_slot_worker_keeps_its_result(queue, run_worker):
    handle = queue.enqueue(PyTask("tests.tasks:async_add", [1, 1]), result_ttl=60)
    run_worker()
    assert handle.result(timeout=WAIT) == 2


def test_the_record_expires_result_ttl_after_the_end(queue, run_worker):
    handle = queue.enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=1)
    run_worker()
    assert handle.result(timeout=WAIT) == 3
    assert 0 < queue.conn.pttl(f"q_task:{handle.id}") <= 1000
    wait_for(lambda: queue.conn.exists(f"q_task:{handle.id}") == 0, what="the record to expire")
    with pytest.raises(TaskNotFoundError, match=f"no record of task {handle.id} in q"):
        handle.status()


def test_bad_result_ttls_are_refused(queue):
    for ttl, error in ((0, ValueError), (-1, ValueError), (float("inf"), ValueError), (float("nan"), ValueError),
                       (10 ** 20, ValueError), ("60", TypeError)):
        with pytest.raises(error, match="^result_ttl must be"):
            queue.enqueue(PyTask("m:f"), result_ttl=ttl)
    assert not queue.conn.keys("*")


# Tracked GoTasks: our Go worker writes their records; Python enqueues, reads and settles what it can


def test_a_tracked_gotask_has_its_record_and_carries_its_id_last(conn, queue):
    handle = queue.enqueue(GoTask("main.Add", [1, 2], max_retries=2), result_ttl=60)
    [blob] = conn.lrange("q", 0, -1)
    assert blob[:1] == b"\x93" and blob.endswith(b"\xa2id\xd9\x20" + handle.id.encode())
    task = decode_task(blob)
    assert isinstance(task, GoTask) and (task.args, task.options.max_retries, task.options.id) == ([1, 2], 2, handle.id)
    info = handle.info()
    assert (info.status, info.func, info.attempts) == ("pending", "main.Add", 0)
    assert record_of(conn, handle)["blob"] == blob and conn.exists("q_tracked")


def test_a_unique_tracked_gotask_locks_its_call(conn, queue):
    handle = queue.enqueue(GoTask("main.Add", [1, 2]), unique_for=60, result_ttl=60)
    with pytest.raises(DuplicateTaskError):  # the lock is the untracked call's digest
        queue.enqueue(GoTask("main.Add", [1, 2]), unique_for=60)
    queue.enqueue(GoTask("main.Add", [1, 3]), unique_for=60)
    task = decode_task(conn.lindex("q", 0))
    assert task.options.id == handle.id and conn.get(f"q_unique:{task.options.unique_key}") == \
        task.options.unique_token.encode()


def test_our_python_worker_dead_letters_a_tracked_gotask_and_its_record_says_so(conn, queue, run_worker):
    handle = queue.enqueue(GoTask("main.Add", [1, 2], max_retries=3), unique_for=60, result_ttl=60)
    run_worker()
    wait_for(lambda: handle.status() == "dead", what="the GoTask dead-lettered")
    info = handle.info()
    [letter] = queue.dead.list()
    assert (letter["reason"], letter["func"], info.letter) == ("go_task", "main.Add", letter["id"])
    assert info.error == letter["error"] and "only a Go worker can run it" in info.error
    # a dead-lettered task's lock is released, whatever its kind (by the worker, right after the letter)
    wait_for(lambda: not conn.keys("q_unique:*"), what="the dead-lettered GoTask's lock released")


def test_a_tracked_gotask_in_a_crash_loop_ends_dead(conn, queue):
    handle = queue.enqueue(GoTask("main.Slow", ["k"]), result_ttl=60)
    for crash in range(2):
        assert WorkerOps(queue).claim_batch((), ("delayed-py-" + "1" * 32,)).tasks
        assert handle.status() == "running"
        assert SweeperOps(queue).sweep(max_crashes=1).notified == (1 if crash == 0 else 0)
        if crash == 0:
            assert handle.info().status == "pending" and decode_task(conn.lindex("q", 0)).options.crashes == 1
    info = handle.info()
    assert (info.status, info.error) == ("dead", "its workers died running it 2 times")


def test_unique_and_tracked(conn, queue, run_worker):
    handle = queue.enqueue(PyTask("tests.tasks:add", [1, 2]), unique_for=60, result_ttl=60)
    with pytest.raises(DuplicateTaskError):  # the lock is the untracked task's digest: the id does not count
        queue.enqueue(PyTask("tests.tasks:add", [1, 2]), unique_for=60, result_ttl=60)
    run_worker()
    assert handle.result(timeout=WAIT) == 3
    wait_for(lambda: not conn.keys("q_unique:*"), what="the lock released")


def test_the_decorator_tracks_with_result_ttl(conn, queue, run_worker):
    from tests import tasks

    tracked = delayed(queue)(result_ttl=60)(tasks.add)
    handle = tracked.delay(20, 22)
    assert isinstance(handle, TaskHandle)
    run_worker()
    assert handle.result(timeout=WAIT) == 42


def test_async_queue_handles(conn, redis_server, run_worker, queue):
    async def produce():
        client = redis.asyncio.Redis.from_url(redis_server.url)
        try:
            async_queue = AsyncQueue("q", client)
            handle = await async_queue.enqueue(PyTask("tests.tasks:add", [2, 3]), result_ttl=60)
            waiting = await async_queue.enqueue(PyTask("tests.tasks:add", [0, 0]), delay=60, result_ttl=60)
            assert isinstance(handle, AsyncTaskHandle) and await handle.status() == "pending"
            assert await waiting.cancel()
            run_worker()
            return await handle.result(timeout=WAIT), await async_queue.task(waiting.id).status()
        finally:
            await client.aclose()

    assert asyncio.run(produce()) == (5, "cancelled")


# A worker killed while it runs a tracked task


def test_a_sweep_puts_a_killed_worker_s_tracked_task_back_to_pending(conn, redis_server, queue, run_worker):
    handle = queue.enqueue(PyTask("tests.tasks:slow", ["k", 0.5]), result_ttl=60)
    process = spawn("delayed.worker", "--queue", "q", "--keep-alive-timeout", "0.5", "tests.tasks",
                    redis_url=redis_server.url)
    try:
        wait_for(lambda: conn.exists("started:k"), what="the task to start")
        assert handle.status() == "running"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.communicate()
    wait_for(lambda: SweeperOps(queue).sweep().notified, what="a sweep to requeue it")
    info = handle.info()
    assert (info.status, info.worker, info.attempts) == ("pending", None, 1)
    run_worker()
    assert handle.result(timeout=WAIT) is None
    assert handle.info().attempts == 2


def test_a_crash_loop_dead_letters_a_tracked_task_as_dead(conn, queue):
    handle = queue.enqueue(PyTask("tests.tasks:slow", ["k", 0.5]), result_ttl=60)
    for crash in range(2):
        assert WorkerOps(queue).claim_batch((), ("delayed-py-" + "1" * 32,)).tasks  # held under an id whose key never existed
        assert handle.status() == "running"
        assert SweeperOps(queue).sweep(max_crashes=1).notified == (1 if crash == 0 else 0)
    info = handle.info()
    assert (info.status, info.error) == ("dead", "its workers died running it 2 times")


def test_a_task_given_back_unstarted_is_pending_and_not_counted(queue):
    handle = queue.enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=60)
    held = WorkerOps(queue).claim_batch((), ("delayed-py-" + "2" * 32,)).tasks
    assert handle.info().attempts == 1
    assert WorkerOps(queue).give_back(held) == 1
    info = handle.info()
    assert (info.status, info.attempts, info.worker) == ("pending", 0, None)


# Cancel, with go-delayed's dequeue in mind: BLPOP a notification, then pop the queue's head


def test_cancel_removes_a_pending_task_and_one_notification(conn, queue):
    first, second = queue.enqueue_many([PyTask("m:f", [1]), PyTask("m:f", [2])], result_ttl=60)
    result = queue.cancel(second.id)
    assert result and result.status == "pending" and result.reason == f"cancelled task {second.id} (pending) in q"
    assert conn.llen("q") == conn.llen("q_noti") == 1
    assert decode_task(conn.lindex("q", 0)).options.id == first.id
    before = time.time()
    info = second.info()
    read = time.time()
    assert info.status == "cancelled"
    assert before - 0.5 <= info.finished_at + 60 - info.expires_in <= read + 0.5  # expires 60 s after the end
    again = second.cancel()
    assert not again and again.reason == f"task {second.id} already ended (cancelled)"


def test_a_task_a_worker_is_taking_stays_for_it_and_its_cancel_is_requested(conn, queue):
    head, behind = queue.enqueue_many([PyTask("m:f", [1]), PyTask("m:f", [2])], result_ttl=60)
    assert conn.blpop("q_noti", 1)  # a worker between its BLPOP and its pop: it takes the head
    taking = queue.cancel(head.id)
    assert taking and taking.requested and not taking.cancelled and taking.worker is None
    assert taking.reason == f"cancel requested: task {head.id} is being taken by a worker; it ends cancelled"
    assert queue.cancel(behind.id)
    assert conn.llen("q") == 1 and conn.llen("q_noti") == 0
    ops, worker_id = WorkerOps(queue), "delayed-py-" + "4" * 32
    assert decode_task(ops.take_head(worker_id)).options.id == head.id  # the worker's pop finds its task
    assert head.status() == "running"
    ops.claim_batch([worker_id], (), tracked={worker_id: Tracked(head.id, result=msgpack.packb(1))})
    info = head.info()
    assert (info.status, info.result) == ("cancelled", None) and info.cancel_requested_at is not None


def test_cancel_a_scheduled_task_even_once_moved_into_the_queue(conn, queue):
    later = queue.enqueue(PyTask("m:f"), delay=60, result_ttl=60)
    due = queue.enqueue(PyTask("m:g"), delay=0.05, result_ttl=60)
    assert later.cancel() and conn.zcard("q_scheduled") == 1
    time.sleep(0.1)
    assert queue.move_due() == 1
    assert due.cancel() and conn.llen("q") == conn.llen("q_noti") == 0


def test_a_running_task_s_cancel_is_requested_and_it_ends_cancelled_without_its_result(conn, queue, run_worker):
    handle = queue.enqueue(PyTask("tests.tasks:slow", ["r", 0.5]), result_ttl=60)
    worker = run_worker()
    wait_for(lambda: conn.exists("started:r"), what="the task to start")
    running = queue.cancel(handle.id)
    assert running and running.requested and running.worker in worker.ids and running.status == "running"
    assert running.reason == f"cancel requested: task {handle.id} is running on worker {running.worker}; it ends cancelled"
    with pytest.raises(TaskFailedError, match=f"task {handle.id} \\(tests.tasks:slow\\) cancelled"):
        handle.result(timeout=WAIT)
    assert results(conn) == [repr(("r", (), {}))]  # a plain function that ignores it runs to its end
    assert conn.hget("q_counts", "done") is None  # and counts in neither done nor dead


def test_cancel_of_an_unknown_id(queue):
    with pytest.raises(TaskNotFoundError):
        queue.cancel("0" * 32)


def test_a_cancelled_task_never_reaches_a_worker(conn, queue, run_worker):
    handles = queue.enqueue_many([PyTask("tests.tasks:record", [i]) for i in range(5)], result_ttl=60)
    assert queue.cancel(handles[2].id)
    run_worker()
    wait_for(lambda: len(results(conn)) == 4, what="the other four")
    time.sleep(0.1)
    assert results(conn) == [repr((i, (), {})) for i in (0, 1, 3, 4)]


# The task log


def test_log_tasks_writes_one_line_per_finished_task(queue, run_worker, caplog):
    caplog.set_level(logging.INFO, logger="delayed.worker.tasks")
    handle = queue.enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=60)
    queue.enqueue(PyTask("tests.tasks:always_fail", ["x"]))
    run_worker(log_tasks=True)
    handle.result(timeout=WAIT)
    wait_for(lambda: len([r for r in caplog.records if r.name == "delayed.worker.tasks"]) == 2, what="two lines")
    lines = sorted(r.getMessage() for r in caplog.records if r.name == "delayed.worker.tasks")
    assert lines[0].startswith("task - tests.tasks:always_fail failed in ")
    assert lines[1].startswith(f"task {handle.id} tests.tasks:add done in ") and lines[1].endswith(" ms")


def test_no_task_log_by_default(queue, run_worker, caplog):
    caplog.set_level(logging.INFO, logger="delayed.worker.tasks")
    handle = queue.enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=60)
    run_worker()
    handle.result(timeout=WAIT)
    assert not [r for r in caplog.records if r.name == "delayed.worker.tasks"]


# The command line: `delayed task ID` and `delayed cancel ID`


def test_delayed_task_shows_a_tracked_task(conn, redis_server, queue, run_worker, capsys):
    from delayed.ops.cli import main

    handle = queue.enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=60)
    run_worker()
    handle.result(timeout=WAIT)
    assert main(["task", handle.id, "--queue", "q", "--redis-url", redis_server.url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [f"id: {handle.id}", "status: done", "func: tests.tasks:add"]
    assert "result: 3" in lines and any(line.startswith("finished_at: 20") for line in lines)
    assert main(["--json", "task", handle.id, "--queue", "q", "--redis-url", redis_server.url]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["status"], shown["result"], shown["attempts"]) == ("done", 3, 1)
    assert main(["task", "f" * 32, "--queue", "q", "--redis-url", redis_server.url]) == 1
    assert capsys.readouterr().err.startswith(f"delayed: no record of task {'f' * 32} in q: never tracked")


def test_delayed_task_and_cancel_find_the_queue_that_tracks_the_task(conn, redis_server, queue, capsys):
    from delayed.ops.cli import main

    shown, cancelled = queue.enqueue_many([PyTask("m:f", [1]), PyTask("m:f", [2])], result_ttl=60)
    conn.set("other_task:" + shown.id, "not a record")  # another program's key of that name: not a record
    url = ["--redis-url", redis_server.url]
    assert main(["task", shown.id, *url]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [f"id: {shown.id}", "status: pending"]
    assert main(["cancel", cancelled.id, *url]) == 0
    assert capsys.readouterr().out == f"cancelled task {cancelled.id} (pending) in q\n"
    assert main(["task", shown.id, "--queue", "default", *url]) == 1  # --queue narrows the search
    assert capsys.readouterr().err.startswith(f"delayed: no record of task {shown.id} in default: ")
    for pattern in ("*", shown.id[:5] + "*", "[0-9a-f]" + shown.id[1:]):  # an id is matched as it is, not as a glob
        assert main(["task", pattern, *url]) == 1
        assert capsys.readouterr().err.startswith(f"delayed: no record of task {pattern} on any queue: never tracked")


def test_delayed_cancel(conn, redis_server, queue, capsys):
    from delayed.ops.cli import main

    waiting, running = queue.enqueue_many([PyTask("m:f", [1]), PyTask("m:f", [2])], result_ttl=60)
    assert main(["cancel", waiting.id, "--queue", "q", "--redis-url", redis_server.url]) == 0
    assert capsys.readouterr().out == f"cancelled task {waiting.id} (pending) in q\n"
    worker_id = "delayed-py-" + "3" * 32
    WorkerOps(queue).claim_batch((), (worker_id,))
    assert main(["cancel", running.id, "--queue", "q", "--redis-url", redis_server.url]) == 0
    requested = f"cancel requested: task {running.id} is running on worker {worker_id}; it ends cancelled"
    assert capsys.readouterr().out == requested + "\n"
    assert main(["cancel", running.id, "--queue", "q", "--json", "--redis-url", redis_server.url]) == 0  # asked again
    assert json.loads(capsys.readouterr().out) == {"cancelled": False, "requested": True, "worker": worker_id,
                                                   "status": "running", "reason": requested}
    WorkerOps(queue).claim_batch((worker_id,), (), tracked={worker_id: Tracked(running.id)})
    assert main(["cancel", running.id, "--queue", "q", "--json", "--redis-url", redis_server.url]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"cancelled": False, "requested": False, "worker": None, "status": "cancelled",
                               "reason": f"task {running.id} already ended (cancelled)"}
    assert err == f"delayed: task {running.id} already ended (cancelled)\n"
    with pytest.raises(SystemExit) as usage:
        main(["cancel", "--redis-url", redis_server.url])  # no ID
    assert usage.value.code == 2


def test_the_worker_s_log_tasks_flag(conn, redis_server):
    handle = Queue("default", conn).enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=60)
    process = spawn("delayed.worker", "--log-tasks", "tests.tasks", redis_url=redis_server.url)
    try:
        assert handle.result(timeout=WAIT) == 3
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=WAIT)[0]
    assert f"INFO delayed.worker.tasks[{process.pid}]: task {handle.id} tests.tasks:add done in " in output


def test_a_worker_killed_at_any_round_trip_leaves_no_record_running_once_recovered(conn, redis_server):
    from .killpoints import TASKS
    from .test_kill_points import MAX_ROUND_TRIPS, recover, run_child

    for kill_at in range(1, MAX_ROUND_TRIPS):
        for mode in ("before", "after"):
            conn.flushall()
            handles = Queue("q", conn).enqueue_many(TASKS["worker"], result_ttl=60)
            killed, said = run_child("worker", redis_server.url, kill_at, mode)
            recover(conn, "worker")  # keep-alive keys gone, a sweep, a clean worker that stops
            assert [handle.status() for handle in handles] == ["done"] * len(handles), said
            if not killed:
                assert kill_at > 5, said  # the scenario's round trips were each killed at, before and after
                return
    pytest.fail(f"the scenario did not finish within {MAX_ROUND_TRIPS} round trips")


def test_the_id_ends_the_blob_whatever_options_come_after_it(conn, queue):
    handle = queue.enqueue(PyTask("m:f", [b"\x00\xff" * 100, None], {"x": 2 ** 63}, max_retries=3), result_ttl=60)
    blob = conn.lindex("q", 0)
    assert blob.endswith(b"\xa2id\xd9\x20" + handle.id.encode())
    retried = decode_task(blob).with_options(attempt=1)  # a retry adds its attempt, and the id stays last
    assert list(msgpack.unpackb(retried.serialize())[4]) == ["max_retries", "attempt", "id"]
    assert retried.serialize().endswith(handle.id.encode()) and decode_task(retried.serialize()) == retried
    WorkerOps(queue).claim_batch((), ("delayed-py-" + "4" * 32,))
    assert handle.status() == "running"  # bytes arguments too (Redis's cmsgpack cannot read msgpack bin)


def test_a_tracked_id_must_be_32_hex_digits():
    with pytest.raises(ValueError, match="id must be 32 hex digits, got 'mine'"):
        PyTask("m:f", options={"id": "mine"})
