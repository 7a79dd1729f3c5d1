"""Kill a worker, sweeper or producer between every pair of its Redis round trips.

For each role and each round trip k, a child process is killed with SIGKILL just before
round trip k, and again just after it; then the dead worker's keep-alive is let go, a
sweeper and a clean worker recover, and the task must have completed, exactly once unless
the kill fell between a completed run and its release (then at most twice).
Then each round trip's reply is lost instead (the command ran, the caller saw a dropped
connection) while the process lives on: the task must complete exactly once.
"""
import subprocess
import sys
import threading

import pytest

from delayed import Worker
from delayed.queue import Queue
from delayed.wire.keys import new_worker_id

from .conftest import ROOT, WAIT, wait_for
from .killpoints import QUEUE, TASKS, completions, done

MAX_ROUND_TRIPS = 40


def run_child(role, url, kill_at, mode):
    """Run the child; returns (killed, what it printed)."""
    process = subprocess.run([sys.executable, "-m", "tests.killpoints", role, url, str(kill_at), mode],
                             cwd=ROOT, capture_output=True, text=True, timeout=30,
                             env={"PYTHONPATH": str(ROOT), "DELAYED_TEST_REDIS_URL": url, "PATH": ""})
    killed = process.returncode == -9
    assert killed or process.returncode == 0, process.stdout + process.stderr
    return killed, process.stdout.strip()


def recover(conn, role):
    """What the world does after a crash: keep-alive keys expire, a sweeper sweeps (one that has
    seen the queue stand still, so it also tops up a notification lost with a killed worker),
    and a worker drains."""
    conn.delete(*conn.keys("delayed-py-*") or ["none"])
    queue = Queue(QUEUE, conn)
    queue.requeue_lost(notify_after=0)
    if role.startswith("producer") and not conn.llen(QUEUE):
        return
    worker = Worker(queue, ["tests.tasks"], keep_alive_interval=1, dequeue_timeout=0.05)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: done(conn, role), what=f"recovery of the {role} scenario")
    finally:
        worker.stop()
        thread.join(WAIT)


def set_up(conn, role):
    """The scenario's start; no script cached (those set_up runs aside), so each run of a role's child
    loads its scripts at the same round trips."""
    conn.flushall()
    conn.script_flush()
    if role == "sweeper":  # a task held by a worker that died
        conn.hset("q_processing", new_worker_id(), TASKS[role][0].serialize())
    elif not role.startswith("producer"):
        Queue(QUEUE, conn).enqueue_many(TASKS[role])


@pytest.mark.parametrize("role", ["worker", "threads", "retry", "bury", "sweeper", "producer", "producer_many"])
def test_no_kill_point_loses_a_task_or_runs_it_more_than_it_may(conn, redis_server, role):
    checked = []
    for kill_at in range(1, MAX_ROUND_TRIPS):
        for mode in ("before", "after"):
            set_up(conn, role)
            killed, said = run_child(role, redis_server.url, kill_at, mode)
            if not killed:
                # it counted its round trips, those of its queue's copies of its client too (idle claims vary)
                assert 0 < int(said.split()[1]) < kill_at, said
                assert len(checked) >= 2, "the scenario made too few round trips to test anything"
                recover(conn, role)
                assert completions(conn, role) == (len(TASKS[role]), 0)  # the call returned: exactly once
                return
            completed_at_kill = completions(conn, role)[0]
            held_at_kill = conn.hlen("q_processing")
            recover(conn, role)
            completed, extra = completions(conn, role)
            # a producer killed before its call returned promised nothing: at most once, atomically
            expected = {0, 1} if role.startswith("producer") else {len(TASKS[role])}
            assert completed in expected, f"{said}: {completed} tasks completed, expected {expected}"
            # a task finished but not yet released when its worker died runs again: the only duplicates
            allowed_extra = held_at_kill if completed_at_kill else 0
            assert extra <= allowed_extra, f"{said}: {extra} duplicates, at most {allowed_extra} allowed"
            checked.append(said)
    pytest.fail(f"the {role} scenario did not finish within {MAX_ROUND_TRIPS} round trips")


@pytest.mark.parametrize("role", ["worker", "threads", "retry", "bury", "sweeper", "producer", "producer_many"])
def test_a_lost_reply_at_any_round_trip_neither_loses_nor_repeats_a_task(conn, redis_server, role):
    for lost_at in range(1, MAX_ROUND_TRIPS):
        set_up(conn, role)
        killed, said = run_child(role, redis_server.url, lost_at, "lose-reply")
        assert not killed
        if "LOST" not in said:
            assert lost_at > 1, "no round trip to lose a reply of"
            return
        recover(conn, role)
        completed, extra = completions(conn, role)
        # a producer whose reply was lost cannot know whether the task landed: at most once
        expected = {0, 1} if role.startswith("producer") else {len(TASKS[role])}
        assert completed in expected and extra == 0, f"{said}: {completed} completed, {extra} extra"
    pytest.fail(f"the {role} scenario did not finish within {MAX_ROUND_TRIPS} round trips")
