"""Periodic tasks: each tick enqueued exactly once however many scheduler replicas run, by Redis's
clock whatever the replicas' own; a bad entry refused as it is made, a failing one skipped alone."""
import logging
import re
import shutil
import signal
import time

import pytest
import redis

from delayed import GoTask, PyTask
from delayed.protocol.periodic import Claim, Ticks
from delayed.scheduler import Periodic, Scheduler
from delayed.scheduler.clock import ClockSkew
from delayed.wire.keys import QueueKeys

from .conftest import spawn, wait_for

ENTRY = "periodic:tests.tasks:record:1"  # tests/schedule_fast.py's one entry
TICK = re.compile(re.escape(ENTRY) + r": tick (\S+) enqueued")
FAST_CLOCK = re.compile(r"this host's clock is (\S+) s ahead of Redis's: ticks follow Redis's clock")
# What Debian's faketime wrapper preloads ($LIB is the dynamic linker's, not a shell's): preloaded with
# env, which execs, the replica is the process the test signals (faketime forks and would take the signal)
LIBFAKETIME = "LD_PRELOAD=/usr/$LIB/faketime/libfaketime.so.1"


@pytest.mark.parametrize("timing, problem", [
    (dict(), "give cron or every, not both or neither"),
    (dict(cron="* * * * *", every=1), "give cron or every, not both or neither"),
    (dict(cron="every day"), "not a cron expression: 'every day'"),
    (dict(cron="0 0 31 2 *"), "cron '0 0 31 2 *' never fires"),  # February 31st
    (dict(every=0), "every must be at least 1 s, got 0"),
    (dict(every=1e-9), "every must be at least 1 s, got 1e-09"),
    (dict(every=float("nan")), "every must be at least 1 s, got nan"),
    (dict(every=float("inf")), "every must be finite, got inf"),
    (dict(every=True), "every must be a number of seconds, got True"),
    (dict(every="10"), "every must be a number of seconds, got '10'"),
    (dict(every=1, grace=-1), "grace must be at least 0 s, got -1"),
    (dict(every=1, grace=float("nan")), "grace must be at least 0 s, got nan"),
    (dict(every=1, missed="sometimes"), "missed must be 'skip' or 'once', got 'sometimes'"),
])
def test_a_bad_entry_is_refused_as_it_is_made_naming_it(timing, problem):
    with pytest.raises(ValueError) as refused:
        Periodic("m:f", queue="q", **timing)
    assert str(refused.value) == f"Periodic 'q:m:f': {problem}"
    with pytest.raises(ValueError, match="^Periodic 'nightly': "):
        Periodic("m:f", name="nightly", **timing)


def test_good_entries_and_their_default_names():
    assert Periodic(GoTask("main.F"), every=60, queue="go").name == "go:main.F:60"
    assert Periodic("m:f", every=1, grace=0).name == "default:m:f:1"
    assert Periodic("m:f", cron="0 0 29 2 *").name == "default:m:f:0 0 29 2 *"  # leap days: rare, but it fires


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
    assert all(gap == 1 for gap in gaps), f"missed ticks: {gaps}"


def start_replicas(url, count):
    return [spawn("delayed.scheduler", "tests/schedule_fast.py", redis_url=url) for _ in range(count)]


def stop(processes):
    outputs = []
    for process in processes:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=10)
        outputs.append(output)
    return outputs


def test_three_replicas_over_eight_ticks(conn, redis_server):
    replicas = start_replicas(redis_server.url, 3)
    wait_for(lambda: conn.llen("periodic") >= 8, timeout=30, what="8 ticks")
    assert_each_tick_once_without_gaps(conn, stop(replicas), at_least=8)


def test_replicas_killed_mid_run(conn, redis_server):
    replicas = start_replicas(redis_server.url, 3)
    wait_for(lambda: conn.llen("periodic") >= 3, timeout=30, what="3 ticks")
    killed = []
    for process in replicas[:2]:
        process.kill()
        killed.append(process.communicate(timeout=10)[0])
    count = conn.llen("periodic")
    wait_for(lambda: conn.llen("periodic") >= count + 3, timeout=30, what="3 ticks from the survivor")
    replicas[:2] = start_replicas(redis_server.url, 2)
    wait_for(lambda: conn.llen("periodic") >= count + 6, timeout=30, what="3 more ticks from all three")
    outputs = killed + stop(replicas)
    assert_each_tick_once_without_gaps(conn, outputs, at_least=9)


def claimed_tick_and_redis_time(conn):
    """The last tick claimed and Redis's time, read at one instant (MULTI)."""
    with conn.pipeline(transaction=True) as pipe:
        pipe.hget("periodic_periodic", ENTRY)
        pipe.time()
        tick, (seconds, microseconds) = pipe.execute()
    return float(tick), seconds + microseconds / 1e6


def test_a_replica_with_a_fast_clock_neither_skips_nor_shifts_a_tick(conn, redis_server):
    if shutil.which("faketime") is None:
        pytest.skip("faketime is not on the PATH (Debian's faketime, which make test installs): "
                    "the scheduler replica with a fast clock did not run")
    replicas = start_replicas(redis_server.url, 2)
    replicas.append(spawn("delayed.scheduler", "tests/schedule_fast.py", redis_url=redis_server.url,
                          prefix=["env", LIBFAKETIME, "FAKETIME=+30s"]))  # its time.time(): 30 s ahead of Redis's
    try:
        for _ in range(8):  # right after each enqueue (one notification each), the tick is not ahead of Redis
            assert conn.blpop("periodic_noti", timeout=30), "no tick for 30 s"
            tick, now = claimed_tick_and_redis_time(conn)
            assert tick <= now, f"tick {tick} enqueued {tick - now:.1f} s early by Redis's clock"
    finally:
        outputs = stop(replicas)
    assert_each_tick_once_without_gaps(conn, outputs, at_least=8)
    assert "ahead of" not in outputs[0] + outputs[1]
    [offset] = FAST_CLOCK.findall(outputs[2])  # said once, however many rounds saw it
    assert float(offset) == pytest.approx(30, abs=0.5)  # measured across a round trip to Redis


def test_a_clock_off_is_said_once_as_it_goes_off_and_once_as_it_comes_back(caplog):
    caplog.set_level(logging.INFO, logger="skew")
    skew = ClockSkew(logging.getLogger("skew"))
    for offset in (0.3, -0.9, -30, -30.2, -29.8, -0.8, 0.6, -0.1, 0.2, 2.5, 2.5):  # Redis's time minus ours
        skew.saw(offset)
    assert [(record.levelname, record.getMessage()) for record in caplog.records] == [
        ("WARNING", "this host's clock is 30.0 s ahead of Redis's: ticks follow Redis's clock"),
        ("INFO", "this host's clock is back within 0.5 s of Redis's"),  # not at 0.8 or 0.6: no flapping at 1
        ("WARNING", "this host's clock is 2.5 s behind Redis's: ticks follow Redis's clock")]


def test_the_claim_refuses_a_tick_still_to_come_by_redis_s_clock(conn, caplog):
    keys = QueueKeys.of("q")
    future = conn.time()[0] + 3600.0
    assert Ticks(conn).claim(keys, "m:f", future, b"task", True) == Claim.EARLY
    assert not conn.exists("q", "q_noti", "q_periodic", "q_counts")
    entry = Periodic("m:f", every=60, queue="q")
    scheduler = Scheduler(conn, [entry])
    caplog.set_level(logging.WARNING, logger="delayed.scheduler")
    assert scheduler.tick(future + 1) == 0  # a caller's clock an hour fast: refused, and said
    early = entry.last_tick(future + 1)
    assert caplog.messages == [f"{entry.name}: tick {early!r} is still to come by Redis's clock: not claimed yet"]
    assert scheduler.tick() == 1 and conn.llen("q") == 1  # by Redis's clock, the current tick: not seen yet
    assert float(conn.hget("q_periodic", entry.name)) <= time.time() + 1


class Unserializable(PyTask):
    """A task whose blob cannot be made while .broken holds: an entry that fails as it runs."""

    broken = True

    def serialize(self) -> bytes:
        if self.broken:
            raise TypeError("no blob today")
        return super().serialize()


def test_an_entry_that_fails_as_it_runs_is_logged_once_and_skipped_while_the_others_go_on(conn, caplog):
    bad = Periodic(Unserializable("m:bad"), every=10, queue="q", name="bad")
    good = Periodic("m:good", every=10, queue="q", name="good")
    scheduler = Scheduler(conn, [bad, good])
    caplog.set_level(logging.INFO, logger="delayed.scheduler")
    assert [scheduler.tick(now) for now in (1000, 1005, 1010, 1020)] == [1, 0, 1, 1]
    assert conn.lrange("q", 0, -1) == [PyTask("m:good").serialize()] * 3
    failures = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert [record.getMessage() for record in failures] == [
        "bad: TypeError: no blob today; skipped until it works again, the other entries go on"]
    assert failures[0].exc_info  # the traceback, once
    Unserializable.broken = False
    try:
        assert scheduler.tick(1030) == 2  # bad's tick 1030 and good's
    finally:
        Unserializable.broken = True
    assert "bad: works again" in caplog.messages
    assert scheduler.tick(1040) == 1  # failing again: a new episode, said again
    assert len([record for record in caplog.records if record.levelno == logging.ERROR]) == 2


def test_a_redis_error_is_no_entry_s_failure_it_stops_the_round(conn):
    conn.set("q", "not a list")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        Scheduler(conn, [Periodic("m:f", every=10, queue="q")]).tick(1000)


def test_a_scheduler_process_runs_its_good_entries_beside_one_that_fails(conn, redis_server, tmp_path):
    schedule = tmp_path / "failing.py"
    schedule.write_text(
        "from delayed import PyTask\nfrom delayed.scheduler import Periodic\n\n\n"
        "class Unserializable(PyTask):\n    def serialize(self):\n        raise TypeError('no blob today')\n\n\n"
        "SCHEDULE = [Periodic(Unserializable('m:bad'), every=1, queue='periodic', name='bad'),\n"
        "            Periodic('tests.tasks:record', every=1, queue='periodic')]\n")
    process = spawn("delayed.scheduler", str(schedule), redis_url=redis_server.url)
    try:
        wait_for(lambda: conn.llen("periodic") >= 3, timeout=30, what="3 ticks of the good entry")
    finally:
        [output] = stop([process])
    assert process.returncode == 0, output
    assert output.count("bad: TypeError: no blob today; skipped until it works again") == 1, output
    assert output.count("Traceback") == 1, output


def test_a_bad_schedule_is_one_line(redis_server, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("SCHEDULE = 'nope'\n")
    never = tmp_path / "never.py"
    never.write_text("from delayed import Periodic\n\n"
                     "SCHEDULE = [Periodic('m:f', every=60), Periodic('m:f', cron='0 0 31 2 *')]\n")
    nan = tmp_path / "nan.py"
    nan.write_text("from delayed import Periodic\n\nSCHEDULE = [Periodic('m:f', every=float('nan'))]\n")
    for source, message in ((str(bad), "must define SCHEDULE"), ("no_such_schedule", "cannot load no_such_schedule"),
                            (str(never), "ValueError: Periodic 'default:m:f': cron '0 0 31 2 *' never fires"),
                            (str(nan), "ValueError: Periodic 'default:m:f': every must be at least 1 s, got nan")):
        process = spawn("delayed.scheduler", source, redis_url=redis_server.url)
        output, _ = process.communicate(timeout=10)
        assert process.returncode == 2 and output.count("\n") == 1 and message in output
