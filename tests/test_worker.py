"""The worker loop in-process, against a real Redis: running, retrying, dead-lettering, the allowlist."""
import ast
import datetime
import json
import logging
import os
import socket
import threading
import time

import msgpack
import pytest

from delayed import GoTask, PyTask, Worker
from delayed.ops import admin
from delayed.queue import Queue
from delayed.runtime.lifecycle import Lifecycle
from delayed.worker.allowlist import Allowlist
from delayed.worker.holding import Holding, Release

from . import tasks
from .conftest import ROOT, WAIT, results, wait_for


@pytest.fixture
def queue(conn):
    return Queue("q", conn, max_task_size=4096)


def dead(conn):
    return Queue("q", conn).dead.list()


def drained(conn):
    """Nothing waiting, nothing held."""
    return conn.llen("q") == 0 and conn.hlen("q_processing") == 0


def test_runs_tasks_and_releases_them(conn, queue, run_worker):
    queue.enqueue(PyTask(tasks.record, ["a", 1, [2]], {"k": b"v"}))
    queue.enqueue(PyTask("tests.tasks:async_record", ["b"]))
    run_worker()
    wait_for(lambda: len(results(conn)) == 2, what="two results")
    assert results(conn) == [repr(("a", (1, [2]), {"k": b"v"})), repr(("b", (), {}))]
    wait_for(lambda: drained(conn), what="release")
    assert dead(conn) == []


def test_worker_is_online_while_running_and_offline_after(conn, queue, run_worker):
    worker = run_worker()
    wait_for(lambda: worker.id and conn.exists(worker.id), what="keep-alive key")
    worker.stop()
    wait_for(lambda: not conn.exists(worker.id), what="keep-alive key deleted")


def test_a_worker_describes_itself_while_online_and_its_description_goes_with_it(conn, queue, run_worker):
    worker = run_worker()
    info = wait_for(lambda: worker.id and conn.exists(f"q_worker:{worker.id}") and f"q_worker:{worker.id}",
                    what="the worker's description")
    about = conn.hgetall(info)
    assert (about[b"host"].decode(), int(about[b"pid"]), json.loads(about[b"queues"])) == (
        socket.gethostname(), os.getpid(), ["q"])
    assert time.time() - 60 < float(about[b"started"]) <= time.time()
    low = conn.pttl(info)
    assert 0 < low <= 5000  # it lapses with the keep-alive keys (keep_alive_timeout 5 s)
    wait_for(lambda: conn.pttl(info) > low, what="a refresh of the keep-alive keys")  # each one extends it
    assert conn.hgetall(info) == about
    worker.stop()
    wait_for(lambda: not conn.exists(worker.id), what="the worker offline")
    assert not conn.exists(info)


def test_a_long_held_task_s_claim_is_noted_and_the_note_goes_before_its_id_claims_again(conn, queue):
    holding = Holding(queue, 1, Lifecycle("worker"))
    assert holding.go_online(["q"], time.time())
    info = f"q_worker:{holding.id}"
    queue.enqueue_many([PyTask("tests.tasks:record", [n]) for n in range(3)])
    [first] = holding.claim(1)
    holding.note_claims()
    assert not conn.hexists(info, first.worker_id)  # held under a second: nothing written
    wait_for(lambda: holding.note_claims() or conn.hexists(info, first.worker_id), what="the claim's note")
    before = time.time()
    [row] = admin.holders(conn, ["q"])
    assert row["worker"] == first.worker_id and row["running_for"] >= 1
    assert before - 60 < datetime.datetime.fromisoformat(row["claimed"]).timestamp() <= before
    holding.settle(first, Release())
    [second] = holding.claim(1)  # released with this round trip, its note deleted first
    assert second.worker_id != first.worker_id and conn.hkeys(info) == [b"host", b"pid", b"started", b"queues"]
    holding.settle(second, Release())
    [third] = holding.claim(1)
    assert third.worker_id == first.worker_id  # its id claims again, under no old note
    assert [row["claimed"] for row in admin.holders(conn, ["q"])] == [None]
    holding.settle(third, Release())
    holding.flush()
    holding.go_offline()
    assert not conn.exists(info)


def test_retry_reenqueues_until_it_succeeds(conn, queue, run_worker):
    queue.enqueue(PyTask(tasks.fail_until, ["twice", 2], retry=2))
    run_worker()
    wait_for(lambda: results(conn), what="the third call to succeed")
    assert conn.get("twice") == b"3"
    wait_for(lambda: drained(conn), what="release")
    assert dead(conn) == []


def test_retry_minus_one_retries_forever(conn, queue, run_worker):
    queue.enqueue(PyTask(tasks.fail_until, ["many", 3], retry=-1))
    run_worker()
    wait_for(lambda: results(conn), what="success after three failures")
    assert conn.get("many") == b"4"


def test_retry_minus_one_backs_off_instead_of_looping_hot(conn, queue, run_worker):
    task = PyTask(tasks.fail_stamped, ["hot"], retry=-1)
    queue.enqueue(task)
    run_worker()
    wait_for(lambda: conn.llen("runs:hot") >= 5, what="five runs")
    runs = [float(run) for run in conn.lrange("runs:hot", 0, 4)]
    gaps = [later - earlier for earlier, later in zip(runs, runs[1:])]
    assert all(gap >= 0.1 * 2 ** n for n, gap in enumerate(gaps)), gaps  # 0.1, 0.2, 0.4, 0.8 s (once 7,418 runs in 3 s)
    # still there, byte-identical to keakon's blob: waiting in the scheduled set, queued or running
    with conn.pipeline(transaction=True) as pipe:  # one snapshot: each move between the three is atomic
        pipe.zrange("q_scheduled", 0, -1).lrange("q", 0, -1).hvals("q_processing")
        members, queued, held = pipe.execute()
    assert [member[8:] for member in members] + queued + held == [task.serialize()]  # after 8 random bytes


def test_stop_while_redis_is_unreachable_stops_going_online(redis_server):
    from delayed.protocol.connection import connect

    worker = Worker(Queue("q", connect("redis://127.0.0.1:1/0")), ["tests.tasks"])
    thread = threading.Thread(target=worker.run)
    thread.start()
    wait_for(lambda: worker.holdings.failing, what="the worker to fail going online")
    worker.stop()
    thread.join(WAIT)
    assert not thread.is_alive(), "the worker spins in _go_online after stop()"


def test_exhausted_retries_land_in_dead_letters(conn, queue, run_worker):
    task = PyTask(tasks.always_fail, ["boom"], retry=1)
    queue.enqueue(task)
    run_worker()
    wait_for(lambda: dead(conn), what="a dead letter")
    assert conn.get("boom") == b"2"  # the first run and one retry
    [entry] = dead(conn)
    assert entry["reason"] == "failed"
    assert entry["error"] == "ValueError: boom always fails"
    assert "always_fail" in entry["traceback"]
    assert entry["task"] == task.with_retry(0).serialize()
    assert entry["func"] == "tests.tasks:always_fail"
    assert entry["queue"] == "q" and entry["worker"].startswith("delayed-py-")
    wait_for(lambda: drained(conn), what="release")


def test_a_type_error_inside_the_function_is_a_failure_and_retried(conn, queue, run_worker):
    queue.enqueue(PyTask(tasks.bad_call_inside, ["inside"], retry=1))
    run_worker()
    wait_for(lambda: dead(conn), what="a dead letter")
    assert conn.get("inside") == b"2"
    assert dead(conn)[0]["reason"] == "failed"


@pytest.mark.parametrize("blob, reason", [
    (b"\xc1\x00garbage", "malformed"),
    (msgpack.packb("tests.tasks:record"), "malformed"),
    (msgpack.packb(["tests.tasks:record", "not a list"]), "malformed"),
    (msgpack.packb(["tests.tasks:record", [], {"k": 1}, "x"]), "malformed"),
    (GoTask("main.Record", [1]).serialize(), "go_task"),
    (PyTask("os:system", ["touch /tmp/delayed-pwned"]).serialize(), "not_allowed"),
    (PyTask("tests.tasks:nonexistent").serialize(), "not_allowed"),
    (PyTask("tests.tasks:record").serialize(), "bad_arguments"),
    (PyTask("tests.tasks:fail_until", ["c", 1], {"unexpected": 1}).serialize(), "bad_arguments"),
    (PyTask("tests.tasks:slow", ["only one argument"]).serialize(), "bad_arguments"),
    (PyTask("tests.tasks:record", ["x" * 5000]).serialize(), "too_large"),
])
def test_bad_tasks_go_to_dead_letters_and_the_worker_goes_on(conn, queue, run_worker, blob, reason):
    conn.rpush("q", blob)
    conn.rpush("q_noti", 1)
    queue.enqueue(PyTask(tasks.record, ["after"]))
    run_worker()
    wait_for(lambda: results(conn), what="the next task to run")
    assert results(conn) == [repr(("after", (), {}))]
    [entry] = dead(conn)
    assert entry["reason"] == reason
    assert entry["task"] == blob
    assert entry["error"] and "\n" not in entry["error"]
    wait_for(lambda: drained(conn), what="release")


@pytest.mark.parametrize("func_path", [
    "os:system",
    "tests.tasks:system",               # imported into an allowed module, not defined there
    "tests.tasks:os",                   # a module imported by an allowed module
    "tests.tasks:_private",
    "tests.tasks:Thing",                # a class
    "tests.tasks:record.__globals__",
    "tests.tasks:conn.__class__",
    "tests:tasks",
    "builtins:eval",
    "tests.tasks",
])
def test_the_allowlist_cannot_be_escaped(conn, queue, run_worker, func_path):
    assert func_path not in Allowlist(["tests.tasks"])
    queue.enqueue(PyTask(func_path, ["x"]))
    run_worker()
    wait_for(lambda: dead(conn), what="a dead letter")
    assert dead(conn)[0]["reason"] == "not_allowed"
    assert results(conn) == []


def test_allowing_single_functions(conn, queue, run_worker):
    queue.enqueue_many([PyTask(tasks.always_fail, ["not allowed"]), PyTask(tasks.record, ["allowed"])])
    run_worker(allow=[tasks.record])
    wait_for(lambda: results(conn), what="the allowed task")
    wait_for(lambda: dead(conn), what="a dead letter")
    assert dead(conn)[0]["reason"] == "not_allowed"
    assert conn.get("not allowed") is None


def test_the_allowlist_lists_only_functions_defined_in_the_module():
    """The public functions tests/tasks.py defines, read from its source: not what it imports (system)."""
    source = ast.parse((ROOT / "tests" / "tasks.py").read_text())
    defined = [node.name for node in source.body
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_")]
    allowlist = Allowlist(["tests.tasks"])
    assert "record" in defined and "system" not in defined
    assert allowlist.paths() == sorted("tests.tasks:" + name for name in defined)


def test_a_worker_without_an_allowlist_is_refused_with_a_clear_error(queue):
    with pytest.raises(TypeError, match="Worker needs allow="):
        Worker(queue)


def test_a_workers_timing_is_its_own_and_keakons_queue_settings_do_not_reach_it(conn, run_worker):
    queue = Queue("q", conn, dequeue_timeout=30, keep_alive_timeout=600)  # keakon's, for its own dequeue()
    worker = Worker(queue, ["tests.tasks"], keep_alive_timeout=8)
    assert worker.keep_alive_interval == 2  # a quarter of its keep-alive timeout, unless given
    worker = run_worker(keep_alive_timeout=3, keep_alive_interval=1)
    wait_for(lambda: worker.id and conn.exists(worker.id), what="the worker online")
    assert 0 < conn.pttl(worker.id) <= 3000


@pytest.mark.parametrize("timing", [{"dequeue_timeout": 0}, {"dequeue_timeout": float("inf")},
                                    {"keep_alive_timeout": -1}, {"keep_alive_timeout": float("nan")}])
def test_a_worker_refuses_timing_that_is_not_a_positive_number_of_seconds(queue, timing):
    [name] = timing
    with pytest.raises(ValueError, match=f"{name} must be a positive number of seconds"):
        Worker(queue, ["tests.tasks"], **timing)


def test_keakon_setup_logger_shows_delayed_logs(queue, capsys):
    from delayed.logger import setup_logger

    setup_logger()
    try:
        Worker(queue, ["tests.tasks"]).execute(PyTask("os:system").serialize())
    finally:
        logging.getLogger("delayed").handlers = []
        logging.getLogger("delayed").setLevel(logging.NOTSET)
    assert "'os:system' is not an allowed task function" in capsys.readouterr().err


def test_a_busy_worker_claims_in_batches_and_runs_everything_once(conn, queue, run_worker):
    queue.enqueue_many([PyTask(tasks.record, [i]) for i in range(2000)])
    conn.config_resetstat()
    run_worker()
    wait_for(lambda: conn.llen("results") == 2000, what="2000 tasks")
    wait_for(lambda: drained(conn), what="release")
    assert sorted(results(conn)) == sorted(repr((i, (), {})) for i in range(2000))
    claims = int(conn.info("commandstats")["cmdstat_evalsha"]["calls"])
    assert claims < 2000 / 4  # far fewer round trips than tasks


def test_stopping_mid_batch_gives_unstarted_tasks_back_in_order(conn, queue, run_worker):
    before = [PyTask(tasks.record, [i]) for i in range(40)]
    after = [PyTask(tasks.record, [i]) for i in range(40, 60)]
    queue.enqueue_many(before + [PyTask(tasks.slow, ["slow", 0.5])] + after)
    worker = run_worker()
    wait_for(lambda: conn.exists("started:slow"), what="the slow task")
    worker.stop()
    wait_for(lambda: conn.exists(worker.id) == 0, what="the worker to go offline")
    assert results(conn)[:40] == [repr((i, (), {})) for i in range(40)]
    assert results(conn)[40:] == [repr(("slow", (), {}))]
    assert conn.lrange("q", 0, -1) == [task.serialize() for task in after]
    assert conn.llen("q_noti") == len(after)
    assert conn.hlen("q_processing") == 0


def test_a_worker_presumed_dead_does_not_retry_a_task_a_sweeper_requeued(conn, queue, run_worker, caplog):
    task = PyTask("tests.tasks:slow_then_fail", ["lapsed", 0.5], retry=3)
    queue.enqueue(task)
    worker = run_worker()
    wait_for(lambda: conn.exists("started:lapsed"), what="the task to start")
    conn.delete(*worker.ids)          # its keep-alive lapses (a long pause, a partition)...
    assert queue.requeue_lost() == 1  # ...and a sweeper requeues its task
    worker.stop()
    wait_for(lambda: "it no longer holds it" in caplog.text, what="the fenced retry")
    # one copy, the sweeper's (a crash counted in it); no retry added
    assert conn.lrange("q", 0, -1) == [task.with_options(crashes=1).serialize()]
    assert conn.hlen("q_processing") == 0 and not conn.exists("q_dead_letters")


def test_two_workers_on_one_queue_hold_their_own_ids_and_leave_the_queues_alone(conn, queue, run_worker):
    queue.enqueue_many([PyTask(tasks.record, [i]) for i in range(200)])
    first, second = run_worker(), run_worker()
    wait_for(lambda: first.id and second.id and conn.exists(first.id, second.id) == 2, what="both online")
    wait_for(lambda: conn.llen("results") == 200, what="200 tasks")
    assert first.id != second.id and not set(first.ids) & set(second.ids)
    assert queue.worker_id is None  # the producers' (and keakon's dequeue/release) id is not the workers'
    wait_for(lambda: drained(conn), what="release")
    assert sorted(results(conn)) == sorted(repr((i, (), {})) for i in range(200))


def test_no_claimed_task_waits_behind_a_slow_one_while_another_worker_could_run_it(conn, queue, run_worker):
    # The issue's scenario: 3,000 no-ops grow both workers' batches, then a slow task with 40 quick
    # ones behind it, which runs until every task has started: the slow task's batch-mates go back
    # to the queue for the other worker (kept behind it, they would never start, and it gives up).
    queue.enqueue_many([PyTask(tasks.stamp, [f"noop{i}"]) for i in range(3000)] +
                       [PyTask(tasks.stamp_until, ["slow", 3041])] +
                       [PyTask(tasks.stamp, [f"quick{i}"]) for i in range(40)])
    run_worker(), run_worker()
    wait_for(lambda: results(conn) or dead(conn), what="the slow task to see every task start")
    assert not dead(conn) and results(conn) == [repr(("slow", (), {}))]
    wait_for(lambda: drained(conn), what="release")
