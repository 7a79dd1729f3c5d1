"""Kill a worker running tasks that share one concurrency slot at each of its Redis round trips (the
admission that takes the slot or holds a task back, and the releases that free it and wake the next),
just before it and just after it, then recover as the world does (tests/test_kill_points.py's recover):
every task runs, none more often than a kill between its run and its release allows, and no slot is left
held nor any task left waiting for one. Then each round trip's reply is lost instead: every task runs once."""
import pytest

from delayed.wire.keys import QueueKeys

from .killpoints import QUEUE, TASKS, completions
from .test_kill_points import MAX_ROUND_TRIPS, recover, run_child, set_up

ROLES = ["limited", "limited_threads"]
KEY = "tests.tasks:record"
"""The tasks' limit key: their function's path."""


def limit_keys_left(conn):
    """The limit keys of the queue still there once everything ran: none, or a slot leaked."""
    keys = QueueKeys.of(QUEUE)
    return [key for key in (keys.limit_holders, keys.limit_running(KEY), keys.limit_waiting(KEY)) if conn.exists(key)]


@pytest.mark.parametrize("role", ROLES)
def test_no_kill_point_loses_a_limited_task_runs_it_twice_or_leaks_its_slot(conn, redis_server, role):
    checked = []
    for kill_at in range(1, MAX_ROUND_TRIPS):
        for mode in ("before", "after"):
            set_up(conn, role)
            killed, said = run_child(role, redis_server.url, kill_at, mode)
            completed_at_kill = completions(conn, role)[0]
            held_at_kill = conn.hlen(QUEUE + "_processing")
            recover(conn, role)
            completed, extra = completions(conn, role)
            assert completed == len(TASKS[role]), f"{said}: {completed} tasks completed"
            assert extra <= (held_at_kill if completed_at_kill else 0), f"{said}: {extra} duplicates"
            assert limit_keys_left(conn) == [], said
            if not killed:
                assert 0 < int(said.split()[1]) < kill_at and len(checked) >= 4, said
                return
            checked.append(said)
    pytest.fail(f"the {role} scenario did not finish within {MAX_ROUND_TRIPS} round trips")


@pytest.mark.parametrize("role", ROLES)
def test_a_lost_reply_at_any_round_trip_runs_each_limited_task_once_and_leaks_no_slot(conn, redis_server, role):
    for lost_at in range(1, MAX_ROUND_TRIPS):
        set_up(conn, role)
        killed, said = run_child(role, redis_server.url, lost_at, "lose-reply")
        assert not killed
        if "LOST" not in said:
            assert lost_at > 1, "no round trip to lose a reply of"
            return
        recover(conn, role)
        assert completions(conn, role) == (len(TASKS[role]), 0), said
        assert limit_keys_left(conn) == [], said
    pytest.fail(f"the {role} scenario did not finish within {MAX_ROUND_TRIPS} round trips")
