"""Operating the queues from the command line: discovery in a shared database, --json all the way
down, --watch through a Redis restart, password masking, task module errors, the `delayed` script."""
import json
import subprocess
import sys
import time

from delayed import GoTask, PyTask, Queue, admin
from delayed.dead_letter import record

from .conftest import ROOT


def run(*args, url="", cwd=ROOT, **options):
    """`python -m delayed ARGS` (with --redis-url url if given) from the worktree: (status, stdout, stderr)."""
    command = [sys.executable, "-m", "delayed", *args, *(["--redis-url", url] if url else [])]
    process = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=30, **options)
    return process.returncode, process.stdout, process.stderr


def test_queue_discovery_finds_ours_and_go_delayeds_and_ignores_other_programs_keys(conn, redis_server):
    Queue("ours", conn).enqueue(PyTask("tests.tasks:record", ["a"]))
    conn.rpush("go", GoTask("main.F", 1).serialize())  # a go-delayed queue: list, _noti, _processing
    conn.rpush("go_noti", "1")
    conn.hset("go_processing", "0123456789abcdef0123456789abcdef", GoTask("main.F", 2).serialize())
    conn.hset("batch_processing", "delayed-py-0123456789abcdef0123456789abcdef-3", b"x")
    Queue("later", conn).enqueue(PyTask("tests.tasks:record", ["b"]), delay=3600)
    conn.rpush("buried_dead", record(reason="failed", error="e", blob=b"x", queue="buried", worker=None))
    conn.set("cache_dead", "a string")                 # other programs' keys, wrong type or content
    conn.hset("order_processing", "status", "paid")
    conn.rpush("log_dead", "not a record")
    conn.zadd("jobs_scheduled", {"nightly": 1})
    conn.rpush("chat", "hello")
    conn.rpush("chat_noti", "x")
    conn.set("mail_noti", "1")
    assert admin.queue_names(conn) == ["batch", "buried", "go", "later", "ours"]
    status, out, err = run("stats", "--json", url=redis_server.url)
    assert status == 0, err
    assert [row["queue"] for row in json.loads(out)] == ["batch", "buried", "go", "later", "ours"]


def test_json_output_is_json_all_the_way_down(conn, redis_server):
    queue = Queue("q", conn)
    queue.enqueue(PyTask("tests.tasks:record", [b"\x00\xff", (1, 2)], {"k": None}, max_retries=2), delay=60)
    queue.enqueue(GoTask("main.F", [1, "a"]), delay=61)
    conn.zadd("q_scheduled", {b"12345678\xc1junk": time.time() + 62})
    status, out, err = run("scheduled", "list", "--queue", "q", "--json", url=redis_server.url)
    assert status == 0, err
    assert [row["task"] for row in json.loads(out)] == [
        {"func": "tests.tasks:record", "args": [{"base64": "AP8="}, [1, 2]], "kwargs": {"k": None}, "retry": 0,
         "options": {"max_retries": 2}},
        {"go": True, "func": "main.F", "payload": [1, "a"]},
        {"undecodable": 5},
    ]
    status, out, err = run("enqueue", "main.Add", "1", "[2]", "--go", "--queue", "go", "--json", url=redis_server.url)
    assert status == 0, err
    assert json.loads(out) == {"enqueued": {"go": True, "func": "main.Add", "payload": [1, [2]]}, "queue": "go"}
    status, out, err = run("enqueue", "tests.tasks:record", "x", "--json", url=redis_server.url)
    assert json.loads(out)["enqueued"] == {"func": "tests.tasks:record", "args": ["x"], "kwargs": {}, "retry": 0,
                                           "options": {}}
    status, out, err = run("scheduled", "list", "--queue", "q", url=redis_server.url)
    assert '{"go": true, "func": "main.F", "payload": [1, "a"]}' in out and "GoTask(" not in out
