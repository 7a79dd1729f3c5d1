"""Kill every process that moves a workflow at each of its Redis round trips (tests/killpoints.py's
flow_ roles), just before it and just after it, then recover as the world does, and check the workflow:

- a worker settling steps whose settle releases the next (a chain; a group's last member releasing its
  callback; a requeued dead step resuming its workflow): every step runs, its successor is released
  exactly once, and the only step that runs twice is one that had run and was still held when its
  worker died (the at-least-once rerun), and the workflow ends done;
- a worker burying a step that stops its workflow: one dead letter, the workflow failed naming the
  step, the step after it waiting, the failed step's record kept;
- a producer enqueueing a workflow: all of it (which then runs to its end) or nothing at all;
- a client cancelling a workflow: every unstarted step cancelled, or none.

Then each round trip's reply is lost instead (the process lives on): the same, with no step run twice.
"""
import collections
import threading

import pytest

from delayed import Queue, Worker
from delayed.queue import Queue as KeakonQueue
from delayed.wire.options import MAX_SECONDS
from delayed.wire.task import decode_task

from .conftest import WAIT, tags, wait_for
from .killpoints import FLOWS, QUEUE, flow_id
from .test_kill_points import run_child

MAX_ROUND_TRIPS = 60
STEPS = {"flow_chain": ["t0", "t1", "t2"], "flow_group": ["m0", "m1", "m2", "cb"],
         "flow_requeued": ["calls", "t1", "t2"], "flow_producer": ["t0", "t1", "t2"],
         "flow_cancel": ["m0", "m1", "m2", "cb"]}
"""What each role's steps record (tests.tasks.record's tag; fail_until records its counter's name)."""
ROLES = ["flow_chain", "flow_group", "flow_requeued", "flow_bury", "flow_producer", "flow_cancel"]


def set_up(conn, role):
    """The workflow before the child runs: enqueued (but for flow_producer, which enqueues it); for
    flow_requeued, its first step failed once and its dead letter requeued. No script is cached but
    those that put it there, so that each run of a role's child loads its scripts at the same round trips."""
    conn.flushall()
    conn.script_flush()
    if role == "flow_producer":
        return
    queue = Queue(QUEUE, conn)
    queue.enqueue(FLOWS[role](), result_ttl=60)
    if role == "flow_requeued":
        Worker(queue, ["tests.tasks"], burst=True).run(handle_signals=False)
        assert queue.workflow(flow_id(conn)).status() == "failed"
        assert queue.dead.requeue([letter["id"] for letter in queue.dead.list()]) == 1


def statuses(conn):
    """The workflow's status and its steps' statuses, in order; None if there is no workflow."""
    if not conn.keys(QUEUE + "_flow:*"):
        return None
    workflow = Queue(QUEUE, conn).workflow(flow_id(conn))
    return workflow.status(), [step.status() for step in workflow.steps()]


def recover(conn):
    """What the world does after a crash: keep-alive keys expire, a sweep requeues what a dead worker
    held (topping up a notification lost with it), and a worker runs until the workflow stands still."""
    conn.delete(*conn.keys("delayed-py-*") or ["none"])
    queue = KeakonQueue(QUEUE, conn)  # (with keakon's worker and sweeper calls)
    queue.requeue_lost(notify_after=0)
    worker = Worker(queue, ["tests.tasks"], keep_alive_interval=1, dequeue_timeout=0.05)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    thread.start()
    try:
        wait_for(lambda: (statuses(conn) or ("ended",))[0] != "running" and not conn.llen(QUEUE)
                 and not conn.hlen(QUEUE + "_processing"), what="the workflow to stand still")
    finally:
        worker.stop()
        thread.join(WAIT)


def check(conn, role, said, may_repeat, before):
    """The workflow after recovery. may_repeat: the steps that had run and were held by the killed
    worker (they run again); before: statuses() as the child left them."""
    runs = collections.Counter(tags(conn))
    after = statuses(conn)
    if role == "flow_bury":
        step = Queue(QUEUE, conn).workflow(flow_id(conn)).info()
        assert conn.xlen(QUEUE + "_dead_letters") == 1 and not runs, said
        assert 1 <= int(conn.get("calls")) <= 1 + ("calls" in may_repeat), said
        assert after == ("failed", ["failed", "waiting"]) and step.failed == (QUEUE, step.steps[0][1]), said
        assert step.error == "failed: ValueError: calls always fails", said
        assert conn.ttl(f"{QUEUE}_task:{step.steps[0][1]}") > MAX_SECONDS - 60, said  # kept until it runs again
        return
    if role == "flow_producer" and after is None:  # the call did not land: nothing at all was written
        assert conn.dbsize() == 0 and not runs, said
        return
    if role == "flow_cancel" and after[0] == "cancelled":  # all of it was cancelled, nothing ran
        assert before == after == ("cancelled", ["cancelled"] * 4) and not runs, said
        assert not conn.llen(QUEUE) and not conn.llen(QUEUE + "_noti"), said
        return
    if role == "flow_cancel":
        assert before == ("running", ["pending"] * 3 + ["waiting"]), said  # nothing of it was cancelled
    assert set(runs) == set(STEPS[role]), f"{said}: ran {runs}"
    repeated = {tag for tag, count in runs.items() if count > 1}
    assert repeated <= may_repeat and max(runs.values()) <= 2, f"{said}: ran {runs}, only {may_repeat} may repeat"
    assert after == ("done", ["done"] * len(STEPS[role])), f"{said}: {after}"
    info = Queue(QUEUE, conn).workflow(flow_id(conn)).info()
    assert (info.left, info.failed, info.error) == (0, None, None), said


def held_and_run(conn, role):
    """The steps the killed worker held that had run already (recorded, or for flow_bury counted its
    call): a sweep puts them back, and they run again."""
    held = {decode_task(blob).args[0] for blob in conn.hvals(QUEUE + "_processing")}
    return held & ({"calls"} if role == "flow_bury" and conn.get("calls") else set(tags(conn)))


@pytest.mark.parametrize("role", ROLES)
def test_no_kill_point_loses_a_step_or_releases_one_twice(conn, redis_server, role):
    checked = []
    for kill_at in range(1, MAX_ROUND_TRIPS):
        for mode in ("before", "after"):
            set_up(conn, role)
            killed, said = run_child(role, redis_server.url, kill_at, mode)
            may_repeat, before = held_and_run(conn, role), statuses(conn)
            recover(conn)
            check(conn, role, said, may_repeat if killed else set(), before)
            if not killed:
                # it counted its round trips, those of its queue's copies of its client too (idle claims vary)
                assert 0 < int(said.split()[1]) < kill_at and len(checked) >= 2, said
                if role in ("flow_producer", "flow_cancel"):  # the call returned: it did what it said
                    assert statuses(conn)[0] == ("done" if role == "flow_producer" else "cancelled"), said
                return
            checked.append(said)
    pytest.fail(f"the {role} scenario did not finish within {MAX_ROUND_TRIPS} round trips")


@pytest.mark.parametrize("role", ROLES)
def test_a_lost_reply_at_any_round_trip_neither_loses_a_step_nor_runs_one_twice(conn, redis_server, role):
    for lost_at in range(1, MAX_ROUND_TRIPS):
        set_up(conn, role)
        killed, said = run_child(role, redis_server.url, lost_at, "lose-reply")
        assert not killed
        before = statuses(conn)
        recover(conn)
        check(conn, role, said, set(), before)
        if "LOST" not in said:
            assert lost_at > 1, "no round trip to lose a reply of"
            return
    pytest.fail(f"the {role} scenario did not finish within {MAX_ROUND_TRIPS} round trips")
