"""Periodic tasks: each tick enqueued exactly once however many scheduler replicas run."""
import re
import signal

import pytest

from delayed import GoTask, PyTask
from delayed.scheduler import Periodic, Scheduler

from .conftest import spawn, wait_for

TICK = re.compile(r"periodic:tests.tasks:record:0.2: tick (\S+) enqueued")


def test_an_entry_needs_exactly_one_valid_timing():
    for bad in (dict(), dict(cron="* * * * *", every=1), dict(cron="every day"), dict(every=0),
                dict(every=1, missed="sometimes")):
        with pytest.raises(ValueError):
            Periodic("m:f", **bad)
    assert Periodic(GoTask("main.F"), every=60, queue="go").name == "go:main.F:60"


def test_replicas_enqueue_each_tick_once(conn):
    entry = Periodic("m:f", every=10, queue="q")
    replicas = [Scheduler(conn, [entry]) for _ in range(3)]
    for now in (1000.5, 1001, 1009.9, 1010.2, 1020.0, 1025):
        assert sum(replica.tick(now) for replica in replicas) == (0 if now in (1001, 1009.9, 1025) else 1)
    assert conn.llen("q") == conn.llen("q_noti") == 3
    assert conn.lrange("q", 0, -1) == [PyTask("m:f").serialize()] * 3


def test_ticks_live_in_the_queue_s_own_hash_and_a_tick_an_older_version_claimed_is_not_enqueued_again(conn):
    entry = Periodic("m:f", every=10, queue="q")
    conn.hset("delayed_periodic", entry.name, "1000.0")  # the one hash versions before kept, for every queue
    assert Scheduler(conn, [entry]).tick(1005) == 0
    assert Scheduler(conn, [entry]).tick(1010) == 1
    assert float(conn.hget("q_periodic", entry.name)) == 1010 and conn.llen("q") == 1
    assert conn.hget("delayed_periodic", entry.name) == b"1000.0"  # left as it was


@pytest.mark.parametrize("missed, runs", [("skip", 0), ("once", 1)])
def test_a_tick_missed_while_every_replica_was_down(conn, missed, runs):
    entry = Periodic("m:f", cron="0 3 * * *", queue="q", missed=missed)  # daily at 03:00 UTC
    three_oclock = 1_767_236_400  # 2026-01-01 03:00 UTC
    assert Scheduler(conn, [entry]).tick(three_oclock + 600) == runs  # back at 03:10
    assert conn.llen("q") == runs
    assert Scheduler(conn, [entry]).tick(three_oclock + 601) == 0      # claimed either way


def ticks_enqueued(outputs):
    return [float(tick) for output in outputs for tick in TICK.findall(output)]


def assert_each_tick_once_without_gaps(conn, outputs, at_least):
    ticks = ticks_enqueued(outputs)
    assert len(ticks) == len(set(ticks)) == conn.llen("periodic"), "a tick enqueued twice"
    ticks.sort()
    assert len(ticks) >= at_least
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert all(gap == pytest.approx(0.2, abs=0.01) for gap in gaps), f"missed ticks: {gaps}"


def start_replicas(url, count):
    return [spawn("delayed.scheduler", "tests/schedule_fast.py", redis_url=url) for _ in range(count)]


def stop(processes):
    outputs = []
    for process in processes:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=10)
        outputs.append(output)
    return outputs


def test_three_replicas_over_thirty_ticks(conn, redis_server):
    replicas = start_replicas(redis_server.url, 3)
    wait_for(lambda: conn.llen("periodic") >= 32, timeout=20, what="32 ticks")
    assert_each_tick_once_without_gaps(conn, stop(replicas), at_least=32)


def test_replicas_killed_mid_run(conn, redis_server):
    replicas = start_replicas(redis_server.url, 3)
    wait_for(lambda: conn.llen("periodic") >= 10, timeout=20, what="10 ticks")
    killed = []
    for process in replicas[:2]:
        process.kill()
        killed.append(process.communicate(timeout=10)[0])
    count = conn.llen("periodic")
    wait_for(lambda: conn.llen("periodic") >= count + 15, timeout=20, what="15 ticks from the survivor")
    replicas[:2] = start_replicas(redis_server.url, 2)
    wait_for(lambda: conn.llen("periodic") >= count + 25, timeout=20, what="10 more ticks from all three")
    outputs = killed + stop(replicas)
    assert_each_tick_once_without_gaps(conn, outputs, at_least=30)


def test_a_bad_schedule_is_one_line(redis_server, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("SCHEDULE = 'nope'\n")
    for source, message in ((str(bad), "must define SCHEDULE"), ("no_such_schedule", "cannot load no_such_schedule")):
        process = spawn("delayed.scheduler", source, redis_url=redis_server.url)
        output, _ = process.communicate(timeout=10)
        assert process.returncode == 2 and output.count("\n") == 1 and message in output
