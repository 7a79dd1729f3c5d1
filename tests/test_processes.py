"""Real worker, supervisor and sweeper processes, real signals, a real Redis restart."""
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Tuple

import pytest
import redis

from delayed import PyTask, Queue
from delayed.testing import RedisServer, free_port

from .conftest import ROOT, finish, read_until, results, spawn, tags, wait_for

KEEP_ALIVE = "1"  # seconds: a killed worker's task is recoverable after this


def worker(redis_url, *args):
    return spawn("delayed.worker", "--keep-alive-timeout", KEEP_ALIVE, *args, "tests.tasks", redis_url=redis_url)






def worker_keys(conn):
    """The main ids of live workers (each also holds ids with -1, -2, ... appended, for batches)."""
    return {key for key in conn.scan_iter("delayed-py-*") if b"-" not in key[len("delayed-py-"):]}


def all_worker_keys(conn):
    return set(conn.scan_iter("delayed-py-*"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_finishes_the_task_releases_it_and_exits_0(conn, redis_server, signum):
    Queue("default", conn).enqueue(PyTask("tests.tasks:slow", ["s", 1.0]))
    process = worker(redis_server.url)
    wait_for(lambda: conn.exists("started:s"), what="the task to start")
    process.send_signal(signum)
    status, output = finish(process)
    assert status == 0, output
    assert results(conn) == [repr(("s", (), {}))]
    assert conn.hlen("default_processing") == 0
    assert all_worker_keys(conn) == set()


@pytest.mark.parametrize("func, threads", [("async_slow", "1"), ("slow", "4"), ("async_slow", "4")])
def test_ctrl_c_stops_every_mode_gracefully(conn, redis_server, func, threads):
    # Only the worker's lifecycle takes the stop signals: no event loop or slot installs its own.
    Queue("default", conn).enqueue(PyTask(f"tests.tasks:{func}", ["s", 1.0]))
    process = worker(redis_server.url, "--threads", threads)
    wait_for(lambda: conn.exists("started:s"), what="the task to start")
    process.send_signal(signal.SIGINT)
    status, output = finish(process)
    assert status == 0, output
    assert "SIGINT received" in output and "Traceback" not in output
    assert results(conn) == [repr(("s", (), {}))]
    assert conn.hlen("default_processing") == 0
    assert all_worker_keys(conn) == set()


def test_a_second_signal_exits_at_once_leaving_the_task_for_the_sweeper(conn, redis_server):
    Queue("default", conn).enqueue(PyTask("tests.tasks:slow", ["s", 3600]))  # only the forced exit ends it
    process = worker(redis_server.url)
    wait_for(lambda: conn.exists("started:s"), what="the task to start")
    process.send_signal(signal.SIGTERM)
    read_until(process, "SIGTERM received")  # two signals sent at once may arrive as one
    process.send_signal(signal.SIGTERM)
    status, output = finish(process)
    assert status == 128 + signal.SIGTERM, output
    assert results(conn) == []
    assert conn.hlen("default_processing") == 1  # still held: a sweeper requeues it once the key expires


def stopped_abandoning(process, thread: str) -> Tuple[str, str]:
    """SIGTERM a command whose thread named thread (no daemon) runs on: it exits 0, naming the thread in
    one WARNING; its output and that line."""
    process.send_signal(signal.SIGTERM)
    status, output = finish(process, timeout=60)
    assert status == 0, output
    [line] = [line for line in output.splitlines() if "abandon" in line]
    assert " WARNING " in line and repr(thread) in line, output
    return output, line


@pytest.mark.parametrize("concurrency", ["1", "2"])
def test_a_stop_ends_the_process_though_a_task_left_a_thread_running(conn, redis_server, concurrency):
    # Python's exit, and a --concurrency child's after its worker, wait for every thread that is no
    # daemon: the worker went offline, then waited an hour for its task's thread (under systemd, a SIGKILL).
    Queue("default", conn).enqueue(PyTask("tests.tasks:leave_thread", ["a task"]))
    process = spawn("delayed.worker", "--concurrency", concurrency, "tests.tasks", redis_url=redis_server.url,
                    start_new_session=True)
    try:
        wait_for(lambda: results(conn) and not conn.hlen("default_processing"), what="the task done")
        output, line = stopped_abandoning(process, "left by a task")
    finally:
        kill_group(process)
    assert output.index(" offline") < output.index(line), output


def test_a_stop_ends_the_scheduler_though_its_schedule_left_a_thread_running(redis_server, tmp_path):
    schedule = tmp_path / "schedule.py"
    schedule.write_text("import threading\nimport time\n\nfrom delayed.scheduler import Periodic\n\n"
                        "threading.Thread(target=time.sleep, args=(3600,), name='left by the schedule').start()\n"
                        "SCHEDULE = [Periodic('tests.tasks:record', queue='periodic', every=60)]\n")
    process = spawn("delayed.scheduler", str(schedule), redis_url=redis_server.url, start_new_session=True)
    try:
        read_until(process, "scheduling")
        stopped_abandoning(process, "left by the schedule")
    finally:
        kill_group(process)


def test_a_task_whose_worker_was_killed_is_requeued_by_the_sweeper_and_run(conn, redis_server):
    Queue("default", conn).enqueue(PyTask("tests.tasks:slow", ["k", 0.5]))
    first = worker(redis_server.url)
    wait_for(lambda: conn.exists("started:k"), what="the task to start")
    first.kill()
    finish(first)
    assert conn.hlen("default_processing") == 1 and results(conn) == []
    second = worker(redis_server.url)
    sweeper = spawn("delayed.sweeper", "--interval", "0.2", redis_url=redis_server.url)
    try:
        wait_for(lambda: results(conn), what="the requeued task to run")
        assert results(conn) == [repr(("k", (), {}))]
        wait_for(lambda: conn.hlen("default_processing") == 0, what="release")
    finally:
        for process in (second, sweeper):
            process.terminate()
            assert finish(process)[0] == 0


def test_a_worker_killed_mid_batch_loses_nothing(conn, redis_server):
    tags = list(range(100)) + ["slow"] + list(range(100, 200))
    Queue("default", conn).enqueue_many(
        PyTask("tests.tasks:slow", ["slow", 5]) if tag == "slow" else PyTask("tests.tasks:record", [tag])
        for tag in tags)
    first = worker(redis_server.url)
    wait_for(lambda: conn.exists("started:slow"), what="the slow task to start")
    first.kill()
    finish(first)
    held = conn.hlen("default_processing")
    assert held >= 1
    second = worker(redis_server.url)
    sweeper = spawn("delayed.sweeper", "--interval", "0.2", redis_url=redis_server.url)
    try:
        expected = {repr((tag, (), {})) for tag in tags}
        wait_for(lambda: set(results(conn)) == expected, what="every task to run")
        wait_for(lambda: conn.hlen("default_processing") == 0, what="release")
    finally:
        for process in (second, sweeper):
            process.terminate()
            assert finish(process)[0] == 0
    duplicates = len(results(conn)) - len(expected)
    assert duplicates <= held  # only tasks the killed worker held can run twice


def test_a_task_that_kills_its_workers_is_quarantined_and_the_rest_run(conn, redis_server):
    queue = Queue("default", conn)
    queue.enqueue(PyTask("tests.tasks:kill_my_worker"))
    supervisor = worker(redis_server.url, "--concurrency", "2", "--batch", "1")
    sweeper = spawn("delayed.sweeper", "--interval", "0.2", "--max-crashes", "2", redis_url=redis_server.url)
    try:
        wait_for(lambda: queue.dead.count(), timeout=60, what="the poison task to be quarantined")
        queue.enqueue(PyTask("tests.tasks:record", ["after"]))
        wait_for(lambda: results(conn), what="the next task")
    finally:
        for process in (supervisor, sweeper):
            process.terminate()
            assert finish(process)[0] == 0
    [entry] = queue.dead.list()
    assert (entry["reason"], entry["func"]) == ("crash_loop", "tests.tasks:kill_my_worker")
    # its third holder's death: the two before were counted in it as the sweeper requeued it
    assert entry["task"] == PyTask("tests.tasks:kill_my_worker", options={"crashes": 2}).serialize()


def test_time_limits_fail_hung_tasks_and_the_worker_goes_on(conn, redis_server):
    queue = Queue("default", conn)
    queue.enqueue_many([
        PyTask("tests.tasks:stubborn", ["worker limit", 30]),                   # the worker's 0.5 s
        PyTask("tests.tasks:slow", ["own limit", 30], retry=1, time_limit=0.2),  # its own, retried once
        PyTask("tests.tasks:slow", ["long but allowed", 1], time_limit=5),      # its own beats the worker's
        PyTask("tests.tasks:record", ["after"]),
    ])
    process = worker(redis_server.url, "--time-limit", "0.5")
    try:
        wait_for(lambda: len(results(conn)) == 2, what="the tasks that fit their limits")
        wait_for(lambda: queue.dead.count() == 2, what="two dead letters")
    finally:
        process.terminate()
        assert finish(process)[0] == 0
    assert results(conn) == [repr(("long but allowed", (), {})), repr(("after", (), {}))]
    entries = queue.dead.list()
    assert [(entry["reason"], entry["func"]) for entry in entries] == [
        ("timed_out", "tests.tasks:stubborn"), ("timed_out", "tests.tasks:slow")]
    assert entries[0]["error"] == "TimeLimitExceeded: ran longer than its time limit of 0.5 s"
    assert PyTask.deserialize(entries[1]["task"]).retry == 0  # the retry ran and timed out too


def test_sweeper_sweeps_every_named_queue_and_stops_on_a_signal(conn, redis_server):
    for name in ("a", "b"):
        conn.rpush(name, PyTask("m:f").serialize())  # tasks without notifications
    sweeper = spawn("delayed.sweeper", "--queue", "a", "--queue", "b", "--interval", "0.1",
                    redis_url=redis_server.url)
    wait_for(lambda: conn.llen("a_noti") == conn.llen("b_noti") == 1, what="both queues swept")
    sweeper.send_signal(signal.SIGINT)
    status, output = finish(sweeper)
    assert status == 0, output
    assert ("sweeping 'a', 'b' every 0.1 s: requeuing dead workers' tasks, dead-lettering a task once workers "
            "died holding it more than 3 times; and moving due scheduled tasks into them every 0.5 s") in output


def test_concurrency_runs_supervised_workers_and_replaces_a_dead_one(conn, redis_server):
    supervisor = worker(redis_server.url, "--concurrency", "2")
    try:
        first = wait_for(lambda: len(worker_keys(conn)) == 2 and worker_keys(conn), what="two workers online")
        Queue("default", conn).enqueue_many([PyTask("tests.tasks:record", [i]) for i in range(20)])
        wait_for(lambda: len(results(conn)) == 20, what="20 tasks")
        children = subprocess.run(["pgrep", "-P", str(supervisor.pid)], capture_output=True, text=True)
        victim = int(children.stdout.split()[0])
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: len(worker_keys(conn) - first) == 1, what="a replacement worker")
    finally:
        supervisor.send_signal(signal.SIGTERM)
        status, output = finish(supervisor)
    assert status == 0, output
    assert "exited with -9; restarting" in output
    wait_for(lambda: len(worker_keys(conn)) <= 1, what="the live workers to go offline")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_whole_process_group_stops_busy_children_gracefully(conn, redis_server, signum):
    # As a terminal's Ctrl-C or systemd's stop does: the supervisor and every child get the signal,
    # and the supervisor forwards it too; each child still finishes its task.
    Queue("default", conn).enqueue_many([PyTask("tests.tasks:slow", [f"s{i}", 1.0]) for i in range(2)])
    supervisor = spawn("delayed.worker", "--keep-alive-timeout", KEEP_ALIVE, "--concurrency", "2", "tests.tasks",
                       redis_url=redis_server.url, start_new_session=True)
    wait_for(lambda: conn.exists("started:s0", "started:s1") == 2, what="both tasks to start")
    os.killpg(supervisor.pid, signum)
    status, output = finish(supervisor)
    assert status == 0, output
    assert sorted(results(conn)) == [repr(("s0", (), {})), repr(("s1", (), {}))]
    assert conn.hlen("default_processing") == 0


@pytest.mark.parametrize("to_group", [False, True], ids=["supervisor", "process group"])
def test_a_second_signal_kills_busy_children_and_exits_128_plus_signal(conn, redis_server, to_group):
    Queue("default", conn).enqueue_many([PyTask("tests.tasks:slow", [f"s{i}", 3600]) for i in range(2)])
    supervisor = spawn("delayed.worker", "--keep-alive-timeout", KEEP_ALIVE, "--concurrency", "2", "tests.tasks",
                       redis_url=redis_server.url, start_new_session=True)
    try:
        wait_for(lambda: conn.exists("started:s0", "started:s1") == 2, what="both tasks to start")
        send = (lambda: os.killpg(supervisor.pid, signal.SIGINT)) if to_group else (
            lambda: supervisor.send_signal(signal.SIGINT))
        send()  # a double Ctrl-C
        read_until(supervisor, "SIGINT received")  # two signals sent at once may arrive as one
        send()
        status, output = finish(supervisor)
    finally:
        kill_group(supervisor)
    assert status == 128 + signal.SIGINT, output
    assert "sending SIGKILL to 2 workers" in output
    assert results(conn) == []
    assert conn.hlen("default_processing") == 2  # still held: a sweeper requeues them


def supervised(redis_url, pid_dir, *args):
    """tests.supervised: a supervisor of two workers whose race windows last seconds."""
    return spawn("tests.supervised", "--pid-dir", str(pid_dir), *args, redis_url=redis_url,
                 start_new_session=True)


def child_pid(pid_dir, slot):
    path = pid_dir / f"{slot}.pid"
    return path.exists() and path.read_text() and int(path.read_text())


def alive(pid):
    """pid runs (neither gone nor a zombie waiting for its parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def kill_group(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()


def test_a_child_signalled_while_it_builds_its_worker_stops_itself_not_its_siblings(conn, redis_server, tmp_path):
    # The child used to run the supervisor's handler (inherited over fork) until its worker was built:
    # it swallowed the signal and sent SIGTERM to the siblings in its copy of the supervisor's table.
    supervisor = supervised(redis_server.url, tmp_path, "--slow-build", "1")
    try:
        wait_for(lambda: len(worker_keys(conn)) == 1, what="slot 0's worker online")
        first = child_pid(tmp_path, 0)
        second = wait_for(lambda: child_pid(tmp_path, 1), what="slot 1 building its worker")
        os.kill(second, signal.SIGTERM)
        seen = []
        for line in supervisor.stdout:  # the signalled child stops by itself, and is restarted
            seen.append(line)
            assert "worker process 0 exited" not in line, "".join(seen)  # it got its sibling's SIGTERM
            if "worker process 1 exited with 0; restarting" in line:
                break
        assert not alive(second) and alive(first)
        supervisor.send_signal(signal.SIGTERM)
        status, output = finish(supervisor)
        output = "".join(seen) + output
    finally:
        kill_group(supervisor)
    assert status == 0, output
    assert "worker process 0 exited" not in output


def test_a_signal_while_the_supervisor_forks_reaches_the_new_child_too(conn, redis_server, tmp_path):
    # A signal that came between a child's fork and its entry in the supervisor's table was
    # forwarded to the other children only: the supervisor waited for that child until a second signal.
    supervisor = supervised(redis_server.url, tmp_path, "--slow-fork", "1")
    try:
        wait_for(lambda: (tmp_path / "forked").exists(), what="the supervisor to fork slot 1")
        supervisor.send_signal(signal.SIGTERM)
        status, output = finish(supervisor)
    finally:
        kill_group(supervisor)
    assert status == 0, output
    assert "all workers stopped" in output


def test_unreachable_redis_is_one_line_and_a_nonzero_exit(redis_server):
    url = f"redis://:secret@127.0.0.1:{free_port()}/0"
    for module in ("delayed.worker", "delayed.sweeper"):
        status, output = finish(spawn(module, *(["tests.tasks"] if module == "delayed.worker" else []),
                                      redis_url=url))
        assert status == 1
        assert output.count("\n") == 1 and "cannot reach Redis at redis://:***@127.0.0.1" in output
        assert "secret" not in output and "Traceback" not in output


@contextlib.contextmanager
def dropping_the_first_connection(port: int):
    """A loopback proxy to the Redis on port that closes the first connection it accepts, as a CLIENT
    KILL or a restart would, and relays every later one; yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))

    def relay(source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = source.recv(65536)
                if not data:
                    break
                target.sendall(data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def serve() -> None:
        first = True
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if first:
                first = False
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", port))
            except OSError:
                client.close()
                continue
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=relay, args=(source, target), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.mark.parametrize("module", ["delayed.sweeper", "delayed.worker"])
def test_a_role_starts_though_redis_drops_its_first_connection(conn, redis_server, module):
    conn.rpush("a", PyTask("tests.tasks:record", ["dropped"]).serialize())  # no notification: the sweeper adds it
    with dropping_the_first_connection(redis_server.port) as port:
        args = ["--queue", "a", "--interval", "0.1"] if module == "delayed.sweeper" else ["--queue", "a", "tests.tasks"]
        process = spawn(module, *args, redis_url=f"redis://127.0.0.1:{port}/0")
        if module == "delayed.sweeper":
            wait_for(lambda: conn.llen("a_noti") == 1 or process.poll() is not None, what="the queue swept")
        else:
            conn.rpush("a_noti", "1")
            wait_for(lambda: tags(conn) == ["dropped"] or process.poll() is not None, what="the task run")
        process.send_signal(signal.SIGINT)
        status, output = finish(process)
    assert status == 0 and "cannot reach Redis" not in output, output


def test_an_unimportable_task_module_is_one_line_and_exit_2(redis_server):
    status, output = finish(spawn("delayed.worker", "no_such_tasks_module", redis_url=redis_server.url))
    assert status == 2
    assert output.strip() == "delayed.worker: cannot import task module: No module named 'no_such_tasks_module'"


@pytest.mark.parametrize("outage", [0, 2.5])  # a restart; one long enough for every thread to meet it
def test_a_worker_rides_out_a_redis_outage_and_its_process_says_so_once(tmp_path, outage):
    server = RedisServer(tmp_path).start()
    conn = redis.Redis.from_url(server.url)
    process = worker(server.url)
    try:
        wait_for(lambda: worker_keys(conn), what="the worker to go online")
        server.stop()
        time.sleep(outage)  # the claims, the due-task mover and the keep-alive all fail meanwhile
        server.start()
        Queue("default", conn).enqueue(PyTask("tests.tasks:record", ["after the outage"]))
        wait_for(lambda: conn.llen("results"), what="the task enqueued after the outage")
    finally:
        process.terminate()
        status, output = finish(process)
        server.stop()
    assert status == 0 and "Traceback" not in output, output
    said = [re.search(r"\[(\d+)\]: ", line).group(1) for line in output.splitlines() if "Redis error" in line]  # pids
    assert said and len(said) == len(set(said)), output
    assert output.count("Redis is back") == len(said), output


def test_module_entry_points_print_help(redis_server):
    for module in ("delayed.worker", "delayed.sweeper"):
        result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0 and "--redis-url" in result.stdout
        assert result.stderr == ""  # in particular no runpy double-import warning
