"""Workers recover lost tasks themselves: every worker sweeps the queues it serves, under a lock that
keeps a queue to one sweep per interval across workers and sweepers; a sweeper told no queue sweeps
every one it finds; and `delayed stats` warns about a queue whose dead workers' tasks nothing sweeps."""
import json
import signal
import subprocess
import sys
import time

import pytest

from delayed import PyTask, Queue, Worker
from delayed.protocol.sweeper_ops import SweeperOps

from .conftest import ROOT, finish, read_until, results, spawn, stop, wait_for

DEAD_ID = "delayed-py-" + "d" * 32
"""A worker id of ours whose keep-alive key does not exist: a dead worker."""


def keep_alive_keys(conn):
    return set(conn.scan_iter("delayed-py-*"))


@pytest.mark.parametrize("burst", [False, True], ids=["plain", "burst"])
def test_a_worker_started_after_one_was_killed_runs_the_task_it_held_with_no_sweeper(conn, redis_server, burst):
    queue = Queue("t7c", conn)
    handle = queue.enqueue(PyTask("tests.tasks:slow_once", ["k", 300]), result_ttl=600)
    first = spawn("delayed.worker", "--queue", "t7c", "--keep-alive-timeout", "1", "tests.tasks",
                  redis_url=redis_server.url)
    wait_for(lambda: conn.exists("started:k"), what="the task to start")
    first.send_signal(signal.SIGKILL)
    finish(first)
    assert conn.hlen("t7c_processing") == 1 and handle.status() == "running"
    wait_for(lambda: not keep_alive_keys(conn), what="the killed worker's keep-alive to lapse")
    if burst:  # it sweeps before it decides its queue is empty, whatever its sweep interval
        status, output = finish(spawn("delayed.worker", "--queue", "t7c", "--burst", "tests.tasks",
                                      redis_url=redis_server.url), timeout=60)
        assert status == 0, output
    else:
        second = spawn("delayed.worker", "--queue", "t7c", "--sweep-interval", "0.2", "tests.tasks",
                       redis_url=redis_server.url)
        try:
            wait_for(lambda: handle.status() == "done", timeout=30, what="the lost task to run again")
        finally:
            [output] = stop(second)
    assert "queue 't7c': requeued lost tasks, pushed 1 notifications" in output
    assert results(conn) == [repr(("k", (), {}))]
    assert conn.hlen("t7c_processing") == 0 and handle.status() == "done"


def test_workers_and_a_sweeper_sweep_a_queue_at_most_once_per_interval_between_them(conn, redis_server):
    processes = []
    claims, sweeps = [], 0
    with conn.monitor() as monitor:
        processes += [spawn("delayed.worker", "--sweep-interval", "0.5", "tests.tasks", redis_url=redis_server.url)
                      for _ in range(3)]
        processes.append(spawn("delayed.sweeper", "--queue", "default", "--interval", "0.5",
                               redis_url=redis_server.url))
        deadline = time.monotonic() + 60
        try:
            while len(claims) < 6:  # the claim script writes each claim, by Redis's clock
                assert time.monotonic() < deadline, f"only {len(claims)} sweeps claimed in 60 s"
                command = monitor.next_command()["command"].split()
                if [part.lower() for part in command[:2]] == ["set", "default_swept"]:
                    claims.append(int(command[2].split(":")[0]))
                elif [part.lower() for part in command] == ["hkeys", "default_processing"]:  # a sweep's first
                    sweeps += 1
        finally:
            stop(*processes)
    assert all(later - earlier >= 500 for earlier, later in zip(claims, claims[1:])), claims
    assert sweeps <= len(claims)  # no sweep without a claim


def test_a_sweeper_told_no_queue_sweeps_queues_that_appear_after_it_started(conn, redis_server):
    sweeper = spawn("delayed.sweeper", "--interval", "0.2", redis_url=redis_server.url)
    try:
        read_until(sweeper, "sweeping every queue it finds (looking again at each sweep) every 0.2 s")
        conn.hset("late_processing", DEAD_ID, PyTask("tests.tasks:record", ["late"]).serialize())
        wait_for(lambda: conn.llen("late") == 1, what="the new queue's lost task requeued")
        assert conn.llen("late_noti") == 1 and conn.hlen("late_processing") == 0
    finally:
        [output] = stop(sweeper)
    assert "found queue 'late': sweeping it" in output
    assert "queue 'late': requeued lost tasks, pushed 1 notifications" in output


def stats(url, *args):
    process = subprocess.run([sys.executable, "-m", "delayed", "stats", "--redis-url", url, *args], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
    assert process.returncode == 0, process.stderr
    return process


def test_stats_warns_about_a_queue_holding_dead_workers_tasks_that_nothing_swept_for_two_intervals(conn,
                                                                                                  redis_server):
    queue = Queue("t7c", conn)
    conn.hset("t7c_processing", DEAD_ID, PyTask("tests.tasks:record", ["lost"]).serialize())
    live = "0123456789abcdef" * 2  # a go-delayed worker, alive: its task is not lost
    conn.set(live, "1", ex=60)
    conn.hset("t7c_processing", live, PyTask("tests.tasks:record", ["held"]).serialize())
    calm = "delayed-py-" + "c" * 32
    conn.set(calm, "1", ex=60)
    conn.hset("calm_processing", calm, b"x")  # no dead holder: never flagged
    warning = ("delayed: warning: queue 't7c': 1 task of dead workers waits for a sweep, and no sweep is recorded: "
               "start a worker of ours on it (workers sweep the queues they serve), or python -m delayed.sweeper")
    assert stats(redis_server.url).stderr.splitlines() == [warning]
    rows = json.loads(stats(redis_server.url, "--json").stdout)
    assert {row["queue"]: row["unswept_lapsed"] for row in rows} == {"calm": 0, "t7c": 1}

    assert SweeperOps(queue).claim_sweep(60)  # a sweep claimed it just now: its dead holder is not flagged
    assert stats(redis_server.url).stderr == ""
    assert SweeperOps(queue).claim_sweep(0.1, force=True)  # a sweep with a short interval...
    wait_for(lambda: stats(redis_server.url).stderr, what="two of its intervals to pass")  # ...then none
    assert "queue 't7c': 1 task of dead workers waits for a sweep" in stats(redis_server.url).stderr

    status, output = finish(spawn("delayed.worker", "--queue", "t7c", "--burst", "--sweep-interval", "60",
                                  "tests.tasks", redis_url=redis_server.url), timeout=60)
    assert status == 0, output
    assert stats(redis_server.url).stderr == ""
    assert [row["unswept_lapsed"] for row in json.loads(stats(redis_server.url, "--json").stdout)] == [0, 0]
    assert results(conn) == [repr(("lost", (), {}))]


def test_a_worker_with_sweeping_off_leaves_lost_tasks_even_in_burst(conn, redis_server):
    conn.hset("default_processing", DEAD_ID, PyTask("tests.tasks:record", ["lost"]).serialize())
    status, output = finish(spawn("delayed.worker", "--burst", "--sweep-interval", "0", "tests.tasks",
                                  redis_url=redis_server.url), timeout=60)
    assert status == 0, output
    assert "not sweeping it (sweep interval 0)" in output
    assert conn.hlen("default_processing") == 1 and results(conn) == []


def test_a_sweep_interval_that_is_not_0_or_a_number_of_seconds_is_refused(conn, redis_server):
    for bad in ("-1", "inf", "nan"):
        process = subprocess.run([sys.executable, "-m", "delayed.worker", "--redis-url", redis_server.url,
                                  "--sweep-interval", bad, "tests.tasks"], cwd=ROOT, capture_output=True, text=True,
                                 timeout=30)
        assert process.returncode == 2, process.stderr
        assert f"--sweep-interval: must be 0 or a positive number, got {bad}" in process.stderr
    for bad in (-1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="sweep_interval must be 0"):
            Worker(Queue("default", conn), ["tests.tasks"], sweep_interval=bad)
