"""Poison in the queues, in real processes: blobs and letters that once crashed a worker, the sweeper,
`delayed` and the dashboard now end as dead letters, and every process keeps running."""
import http.client
import json
import re
import subprocess
import sys

import msgpack

from delayed import PyTask, Queue
from delayed.wire.dead_letter import record
from delayed.wire.keys import new_worker_id

from .conftest import ROOT, finish, results, spawn, wait_for
from .test_dashboard import Dashboard

DEEP_MAP = b"\x81\xa1a" * 1000 + b"\xc0"
"""A 3 KB blob whose repr() raises RecursionError: once, it took down every worker that decoded it."""
POISON = [
    DEEP_MAP,
    b"\x92\xb2tests.tasks:record" + b"\x91" * 1000 + b"\xc0",  # arguments 1,000 deep
    msgpack.packb(["tests.tasks:always_fail", [msgpack.Timestamp(1_700_000_000, 5), msgpack.ExtType(7, b"ab")]]),
    b"\x92\xb7tests.tasks:always_fail\x91" + b"\x91" * 700 + b"\xa1x",  # an argument 700 deep
    b"\x92\xb2tests.tasks:record\x91\xd9\x02\xff\xfe",  # a string that is not UTF-8
]


def run(*argv: str, url: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "delayed", "--redis-url", url, *argv], cwd=ROOT,
                          capture_output=True, timeout=30)


def test_poison_blobs_end_as_dead_letters_and_every_process_keeps_running(conn, redis_server):
    queue = Queue("default", conn)
    supervisor = spawn("delayed.worker", "--concurrency", "2", "--batch", "4", "tests.tasks", redis_url=redis_server.url)
    sweeper = spawn("delayed.sweeper", "--interval", "0.2", "--max-crashes", "3", redis_url=redis_server.url)
    try:
        wait_for(lambda: conn.zcard("default_workers") == 2, what="both workers online")
        conn.rpush("default", *POISON)
        conn.rpush("default_noti", *[1] * len(POISON))
        conn.zadd("default_scheduled", {b"\0" * 8 + DEEP_MAP: 4_102_444_800})  # due in 2100: stays there
        queue.enqueue(PyTask("tests.tasks:record", ["after"]))
        wait_for(lambda: "('after', (), {})" in results(conn), what="the task after the poison")
        wait_for(lambda: queue.dead.count() == len(POISON), what="the poison dead-lettered")
        for argv in (["stats"], ["stats", "--json"], ["dead", "list"], ["dead", "list", "--json"],
                     ["scheduled", "list"], ["scheduled", "list", "--json"],
                     *(["dead", "show", letter["id"], *flag] for letter in queue.dead.list() for flag in ([], ["--json"]))):
            done = run(*argv, url=redis_server.url)
            assert done.returncode == 0 and not done.stderr, (argv, done.stderr)
            if "--json" in argv:
                json.loads(done.stdout)
        dashboard = Dashboard(redis_server.url)
        try:
            assert dashboard.get("/")[0] == 200
            assert dashboard.get("/dead?queue=default")[0] == 200
            for letter in queue.dead.list():
                assert dashboard.get(f"/dead/show?queue=default&id={letter['id']}")[0] == 200
        finally:
            dashboard.stop()
        assert supervisor.poll() is None and sweeper.poll() is None
    finally:
        supervisor.terminate()
        sweeper.terminate()
        outputs = [finish(supervisor), finish(sweeper)]
    for status, output in outputs:
        assert status == 0, output
    assert "exited with" not in outputs[0][1]  # no worker process died: none was restarted
    assert "Traceback" not in outputs[1][1]    # (the worker logs the tracebacks of the tasks that failed)
    reasons = sorted(letter["reason"] for letter in queue.dead.list())
    assert reasons == ["bad_arguments", "failed", "failed", "malformed", "malformed"]


def test_a_sweeper_dead_letters_a_poison_blob_a_worker_of_ours_died_holding_and_goes_on(conn, redis_server):
    """Before, describing such a blob raised in the sweeper, and every restart of it exited 1 within
    a second: no lost task of that queue was ever requeued again."""
    queue = Queue("default", conn)
    conn.hset("default_processing", new_worker_id(), DEEP_MAP)
    sweeper = spawn("delayed.sweeper", "--interval", "0.2", redis_url=redis_server.url)
    try:
        wait_for(lambda: queue.dead.count() == 1, what="the poison dead-lettered")
        conn.hset("default_processing", new_worker_id(), PyTask("tests.tasks:record", ["lost"]).serialize())
        wait_for(lambda: conn.llen("default") == 1, what="the next lost task requeued")
    finally:
        sweeper.terminate()
        status, output = finish(sweeper)
    assert status == 0 and "Traceback" not in output, output
    [letter] = queue.dead.list()
    assert letter["reason"] == "malformed" and letter["task"] == DEEP_MAP


def _peak_rss_mb(*argv: str) -> float:
    """The peak resident memory of `python -m delayed ARGV...`, run alone in a fresh process, in MB."""
    code = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True); "
            "assert done.returncode == 0, done.stderr; "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "delayed", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout) / 1024


def test_a_100_mb_letter_is_previewed_and_downloadable_not_rendered(conn, redis_server, tmp_path):
    blob = msgpack.packb(["tests.tasks:record", ["x" * 100_000_000]])
    letter_id = conn.xadd("default_dead_letters", record(reason="too_large", error="100 MB", blob=blob,
                                                         queue="default", worker=None,
                                                         func="tests.tasks:record")).decode()
    url = redis_server.url
    assert _peak_rss_mb("--redis-url", url, "dead", "list") < 150
    assert _peak_rss_mb("--redis-url", url, "dead", "show", letter_id) < 150
    shown = run("dead", "show", letter_id, "--json", url=url)
    task = json.loads(shown.stdout)["task"]
    assert task["func"] == "tests.tasks:record" and task["truncated"] and task["bytes"] == len(blob)
    with (tmp_path / "task.msgpack").open("wb") as out:
        assert subprocess.run([sys.executable, "-m", "delayed", "--redis-url", url, "dead", "show", letter_id, "--raw"],
                              cwd=ROOT, stdout=out, timeout=60).returncode == 0
    assert (tmp_path / "task.msgpack").read_bytes() == blob
    dashboard = Dashboard(url)
    try:
        status, page = dashboard.get(f"/dead/show?queue=default&id={letter_id}")
        assert status == 200 and len(page) < 1_000_000 and "Download the task" in page
        connection = http.client.HTTPConnection("127.0.0.1", dashboard.port, timeout=30)
        connection.request("GET", f"/dead/raw?queue=default&id={letter_id}")
        reply = connection.getresponse()
        assert reply.status == 200 and reply.headers["Content-Disposition"].startswith("attachment")
        assert reply.read() == blob
        connection.close()
    finally:
        dashboard.stop()


def test_a_100_mb_scheduled_task_is_previewed_not_read_whole(conn, redis_server):
    blob = msgpack.packb(["tests.tasks:record", ["x" * 100_000_000]])
    conn.zadd("default_scheduled", {b"\0" * 8 + blob: 4_102_444_800})
    url = redis_server.url
    assert _peak_rss_mb("--redis-url", url, "scheduled", "list") < 150
    shown = json.loads(run("scheduled", "list", "--json", url=url).stdout)
    assert shown == [{"due": "2100-01-01T00:00:00+00:00", "kind": "unknown", "attempt": None, "attempts": None,
                      "task": {"func": "tests.tasks:record", "truncated": True, "bytes": len(blob)}}]
    dashboard = Dashboard(url)
    try:
        for path in ("/", "/queue?queue=default&tab=scheduled"):
            status, page = dashboard.get(path)
            assert status == 200 and len(page) < 1_000_000 and f"the first 64 KiB of {len(blob)} bytes" in page
    finally:
        dashboard.stop()


def test_a_100_mb_held_task_is_previewed_not_read_whole(conn, redis_server):
    blob = msgpack.packb(["tests.tasks:record", ["x" * 100_000_000]])
    worker = "0123456789abcdef0123456789abcdef"  # a go-delayed worker's id, alive
    conn.hset("default_processing", worker, blob)
    conn.set(worker, 1, ex=600)
    dashboard = Dashboard(redis_server.url, "--queue", "default")  # no discovery: the holders' read alone
    try:
        for path in ("/", "/queue?queue=default&tab=processing"):
            status, page = dashboard.get(path)
            assert status == 200 and len(page) < 1_000_000 and f"the first 64 KiB of {len(blob)} bytes" in page
        with open(f"/proc/{dashboard.process.pid}/status") as status_file:
            peak = int(re.search(r"VmHWM:\s+(\d+) kB", status_file.read()).group(1)) / 1024
        assert peak < 150, f"the dashboard peaked at {peak:.0f} MB"
    finally:
        dashboard.stop()


def test_finding_the_queues_never_reads_a_held_task(conn, redis_server):
    """`delayed stats` (and the dashboard's overview) tell a queue's keys by a sample of each: a hash's
    field names, never its values, which are tasks of any size."""
    blob = msgpack.packb(["tests.tasks:record", ["x" * 100_000_000]])
    conn.hset("default_processing", "0123456789abcdef0123456789abcdef", blob)
    assert _peak_rss_mb("--redis-url", redis_server.url, "stats") < 150
    assert json.loads(run("stats", "--json", url=redis_server.url).stdout)[0]["processing"] == 1
