"""A password given with --redis-url is in no process's command line (/proc/PID/cmdline, what `ps`
shows every user) once the process has started: not the worker's, its supervised children's, their
keep-alive helpers', the sweeper's, the scheduler's, the metrics exporter's or the dashboard's.
Real processes, a real redis-server that requires the password."""
import urllib.request
from pathlib import Path
from typing import Dict, List
from urllib.parse import quote

import pytest
import redis

from delayed import PyTask
from delayed.testing import RedisServer, free_port

from .conftest import read_until, results, spawn, stop, wait_for

PASSWORD = "pw@4f1c/9b in:no-cmdline"
TYPED = quote(PASSWORD, safe="")
"""The password as it is typed in a URL: percent-encoded."""
TOKEN = "dashboard-token-not-in-cmdline"


def parents() -> Dict[int, int]:
    """Every process's parent pid, from /proc/*/stat."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            found[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            pass
    return found


def tree(pid: int) -> List[int]:
    """pid and all its descendants."""
    family = parents()
    found = [pid]
    for member in found:
        found += [child for child, parent in family.items() if parent == member]
    return found


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


@pytest.fixture
def locked(tmp_path):
    """A redis-server that requires PASSWORD, and a client of it."""
    with RedisServer(tmp_path, ["--requirepass", PASSWORD]) as server:
        client = redis.Redis(port=server.port, password=PASSWORD)
        yield server, client
        client.close()


def test_no_process_shows_the_password_on_its_command_line(locked):
    server, conn = locked
    url = f"redis://:{TYPED}@127.0.0.1:{server.port}/0"
    metrics_port = free_port()
    processes = {
        "worker": spawn("delayed.worker", "--concurrency", "2", "--keep-alive-timeout", "2", "tests.tasks",
                        redis_url=url),
        "sweeper": spawn("delayed", "sweeper", "--interval", "0.2", redis_url=url),  # the URL before the command
        "scheduler": spawn("delayed.scheduler", "tests.schedule_fast", redis_url=url),
        "metrics": spawn("delayed.metrics", "--port", str(metrics_port), redis_url=url),
        "dashboard": spawn("delayed.dashboard", "--port", str(free_port()), "--token", TOKEN, redis_url=url),
    }
    try:
        read_until(processes["dashboard"], "delayed dashboard on")
        worker = processes["worker"].pid
        # the supervisor, its two workers, and a keep-alive helper forked by each as it went online
        wait_for(lambda: len(tree(worker)) == 5, what="two workers and their keep-alive helpers")
        wait_for(lambda: conn.llen("periodic"), what="the scheduler to enqueue a tick")
        wait_for(lambda: answers(f"http://127.0.0.1:{metrics_port}/metrics"), what="the metrics exporter")
        for name, process in processes.items():
            family = tree(process.pid)
            for pid in family:  # a process overwrites its password as it starts: one slow to start is waited for
                wait_for(lambda: f":{'*' * len(TYPED)}@".encode() in cmdline(pid), what=f"the {name} to start")
                shown = cmdline(pid)
                assert PASSWORD.encode() not in shown and TYPED.encode() not in shown, (name, pid, shown)
                assert TOKEN.encode() not in shown, (name, pid, shown)
                assert f":{'*' * len(TYPED)}@".encode() in shown, (name, pid, shown)  # the URL, password overwritten
        conn.rpush("default", PyTask("tests.tasks:record", ["after"]).serialize())  # no notification: the sweeper's
        wait_for(lambda: results(conn), what="the sweeper to notify and a worker to run the task")
    finally:
        outputs = stop(*processes.values())
    assert results(conn) == [repr(("after", (), {}))]
    assert not any(PASSWORD in output or TYPED in output for output in outputs)
