"""The lifecycle the long-running duties share: starting → online → draining → offline, stop
signals whose handlers only set a flag, exit 0 after a graceful stop and 128 + signal after a forced one."""
import functools
import logging
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from delayed import Queue, Worker
from delayed.ops.metrics.queues import Exporter
from delayed.protocol.connection import connect
from delayed.runtime.backoff import OutageBackoff
from delayed.runtime.lifecycle import DRAINING, OFFLINE, ONLINE, STARTING, Lifecycle
from delayed.scheduler import Periodic, Scheduler
from delayed.sweeper import Sweeper
from delayed.testing import free_port

from .conftest import WAIT, finish, read_until, spawn, wait_for


def test_the_handlers_only_set_a_flag_the_main_loop_does_the_work(caplog):
    lifecycle = Lifecycle("test")
    caplog.set_level(logging.INFO)
    before = signal.getsignal(signal.SIGTERM)
    with lifecycle.signals(watch=False):
        os.kill(os.getpid(), signal.SIGTERM)  # Python runs the handler before os.kill returns
        assert not lifecycle.stopping and caplog.records == []
        assert lifecycle.wait(5)
        assert [record.getMessage() for record in caplog.records] == [
            "test: SIGTERM received, stopping after the current task"]
    assert lifecycle.state == DRAINING and lifecycle.exit_status == 0
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize("make, says", [
    (lambda conn: Sweeper([Queue("default", conn)]), "sweeper: SIGTERM received, stopping after the current sweep"),
    (lambda conn: Scheduler(conn, []), "scheduler: SIGTERM received, stopping after the current tick"),
    (lambda conn: Exporter(conn, ["default"], 0), "metrics exporter: SIGTERM received, stopping"),
])
def test_a_stop_signal_s_line_says_what_each_duty_finishes_first(make, says, conn, caplog):
    """A worker finishes its task; a sweeper its sweep, a scheduler its tick; an exporter just stops."""
    caplog.set_level(logging.INFO)
    lifecycle = make(conn).lifecycle
    with lifecycle.signals(watch=False):
        os.kill(os.getpid(), signal.SIGTERM)
        assert lifecycle.wait(5)
    assert [record.getMessage() for record in caplog.records if "SIGTERM" in record.getMessage()] == [says]


def test_the_worker_goes_through_the_lifecycle_and_stops_outside_the_handler(conn, caplog):
    # run() in the main thread, as the command line runs it: the handler only sets a flag, the
    # lifecycle's watcher thread logs and stops the worker, and run() returns the exit status.
    caplog.set_level(logging.INFO)
    worker = Worker(Queue("default", conn), ["tests.tasks"], keep_alive_interval=1, dequeue_timeout=0.1)
    assert worker.lifecycle.state == STARTING
    before = signal.getsignal(signal.SIGHUP)
    seen = []

    def signal_once_online():
        wait_for(lambda: worker.lifecycle.state == ONLINE, what="online")
        seen.append(worker.lifecycle.state)
        os.kill(os.getpid(), signal.SIGHUP)

    threading.Thread(target=signal_once_online, daemon=True).start()
    assert worker.run() == 0
    assert seen == [ONLINE] and worker.lifecycle.state == OFFLINE
    [record] = [record for record in caplog.records if "SIGHUP" in record.getMessage()]
    assert record.getMessage() == "worker: SIGHUP received, stopping after the current task"
    assert record.threadName != threading.main_thread().name
    assert signal.getsignal(signal.SIGHUP) == before
    assert conn.keys("delayed-py-*") == []


@pytest.fixture
def hour_long_backoff(monkeypatch):
    """Every OutageBackoff the test builds waits an hour after a Redis error: only a stop ends it sooner."""
    monkeypatch.setattr(OutageBackoff, "__init__", functools.partialmethod(OutageBackoff.__init__,
                                                                           initial=3600, maximum=3600))


def test_a_worker_stopped_while_redis_is_away_returns_at_once_and_offline(hour_long_backoff):
    conn = connect(f"redis://127.0.0.1:{free_port()}/0")
    worker = Worker(Queue("default", conn), ["tests.tasks"])
    status = []
    thread = threading.Thread(target=lambda: status.append(worker.run()))
    thread.start()
    wait_for(lambda: worker.holdings.failing, what="the worker to see Redis gone")  # and wait an hour
    worker.stop()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert status == [0] and worker.lifecycle.state == OFFLINE


def test_a_stop_before_online_leaves_it_draining_and_callbacks_run_once():
    lifecycle = Lifecycle("test")
    calls = []
    lifecycle.on_stop(lambda: calls.append("early"))
    assert lifecycle.state == STARTING
    lifecycle.stop()
    lifecycle.stop()
    lifecycle.online()
    lifecycle.on_stop(lambda: calls.append("late"))
    assert lifecycle.state == DRAINING and calls == ["early", "late"]
    assert lifecycle.wait(None)


@pytest.mark.parametrize("duty", ["sweeper", "scheduler"])
def test_sweeper_and_scheduler_go_through_the_lifecycle(conn, duty):
    # the scheduler waits an hour between rounds: the stop must cut the wait short
    if duty == "sweeper":
        runner = Sweeper([Queue("default", conn)], interval=3600)
    else:
        runner = Scheduler(conn, [Periodic("tests.tasks:record", queue="periodic", every=3600)], poll=3600)
    assert runner.lifecycle.state == STARTING
    status = []
    thread = threading.Thread(target=lambda: status.append(runner.run()))
    thread.start()
    wait_for(lambda: runner.lifecycle.state == ONLINE, what="online")
    runner.stop()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert runner.lifecycle.state == OFFLINE and status == [0]


def test_a_stop_cuts_short_the_wait_for_an_unreachable_redis(hour_long_backoff):
    conn = connect(f"redis://127.0.0.1:{free_port()}/0")  # refused at once, and no retries inside redis-py
    sweeper = Sweeper([Queue("default", conn)], interval=0.1)
    thread = threading.Thread(target=sweeper.run)
    thread.start()
    wait_for(lambda: sweeper.outage.failing, what="the sweeper to see Redis gone")  # and wait an hour
    sweeper.stop()
    thread.join(WAIT)
    assert not thread.is_alive()


def _duty(name, redis_url):
    args = ["--interval", "0.1"] if name == "delayed.sweeper" else ["tests.schedule_fast"]
    return spawn(name, *args, redis_url=redis_url)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
@pytest.mark.parametrize("name", ["delayed.sweeper", "delayed.scheduler"])
def test_a_stop_signal_stops_sweeper_and_scheduler_with_status_0(conn, redis_server, name, signum):
    process = _duty(name, redis_server.url)
    read_until(process, "sweeping" if name == "delayed.sweeper" else "scheduling")
    time.sleep(0.3)
    process.send_signal(signum)
    status, output = finish(process)
    assert status == 0, output
    assert f"{signum.name} received" in output and "stopped" in output and "Traceback" not in output


def unread_by_redis(port):
    """Bytes sent to the Redis on port that it has not read, over every connection (/proc/net/tcp:
    the receive queues of the sockets it accepted)."""
    unread = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, _, _, queues = line.split()[1:5]
        if int(local.split(":")[1], 16) == port:
            unread += int(queues.split(":")[1], 16)
    return unread


@pytest.mark.parametrize("name", ["delayed.sweeper", "delayed.scheduler"])
def test_a_second_signal_exits_at_once_even_while_redis_does_not_answer(conn, redis_server, name):
    # Redis stopped (SIGSTOP), and the duty's client waits an hour for a reply: only the forced exit ends it
    process = _duty(name, redis_server.url + "?socket_timeout=3600")
    try:
        read_until(process, "sweeping" if name == "delayed.sweeper" else "scheduling")
        redis_server.process.send_signal(signal.SIGSTOP)
        wait_for(lambda: unread_by_redis(redis_server.port), what="the duty's next command, unanswered")
        process.send_signal(signal.SIGTERM)
        read_until(process, "SIGTERM received")
        process.send_signal(signal.SIGTERM)
        status, output = finish(process)
    finally:
        redis_server.process.send_signal(signal.SIGCONT)
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert status == 128 + signal.SIGTERM, output


STARTS = {
    "worker": ("delayed.worker", "tests.slow_import"),
    "supervisor": ("delayed.worker", "--concurrency", "2", "tests.slow_import"),
    "sweeper": ("delayed.sweeper",),
    "scheduler": ("delayed.scheduler", "tests.schedule_slow"),
}


@pytest.mark.parametrize("duty", ["worker", "supervisor", "scheduler"])
def test_a_stop_signal_while_importing_the_tasks_ends_the_start_with_status_0(redis_server, duty):
    # Before the duty's own handlers are in place, a stop signal used to get the default action (-15).
    module, *args = STARTS[duty]
    process = spawn(module, *args, redis_url=redis_server.url)
    try:
        read_until(process, "importing tests.slow_import")
        process.send_signal(signal.SIGTERM)
        status, output = finish(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert status == 0, output
    assert "SIGTERM received" in output and "Traceback" not in output and " online" not in output


@pytest.mark.parametrize("duty", ["worker", "supervisor", "sweeper", "scheduler"])
def test_a_stop_signal_while_connecting_ends_the_start_with_status_0(monkeypatch, duty):
    module, *args = STARTS[duty]
    monkeypatch.setenv("SLOW_IMPORT_SECONDS", "0")
    with socket.socket() as server:  # a "Redis" that accepts and never answers
        server.bind(("127.0.0.1", 0))
        server.listen()
        process = spawn(module, *args, redis_url=f"redis://127.0.0.1:{server.getsockname()[1]}/0")
        try:
            server.settimeout(WAIT)
            connection, _ = server.accept()  # it is connecting: PING sent, no reply yet
            with connection:
                process.send_signal(signal.SIGTERM)
                read_until(process, "SIGTERM received")
            status, output = finish(process)  # the PING fails: closed under it
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert status == 0, output
    assert "Traceback" not in output and "cannot reach Redis" not in output


def test_a_second_stop_signal_while_importing_the_tasks_exits_at_once(monkeypatch, redis_server):
    monkeypatch.setenv("SLOW_IMPORT_SECONDS", "3600")  # only the forced exit ends the import
    process = spawn(*STARTS["worker"], redis_url=redis_server.url)
    try:
        read_until(process, "importing tests.slow_import")
        process.send_signal(signal.SIGINT)
        read_until(process, "SIGINT received")
        process.send_signal(signal.SIGINT)
        status, output = finish(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert status == 128 + signal.SIGINT, output


def test_a_sweeper_that_counts_no_crashes_says_so_as_it_starts(conn, caplog):
    caplog.set_level(logging.INFO, "delayed.sweeper")
    Sweeper([Queue("q", conn)], interval=60, max_crashes=0).starting()
    assert caplog.messages == ["sweeping 'q' every 60 s: requeuing dead workers' tasks, counting no crashes "
                               "(max crashes 0); and moving due scheduled tasks into it every 0.5 s"]
