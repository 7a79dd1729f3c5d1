"""Operating the queues from the command line: discovery in a shared database, --json all the way
down, --watch through a Redis restart, password masking, task module errors, the `delayed` script."""
import json
import os
import subprocess
import sys
import time

import pytest

from delayed import GoTask, PyTask, Queue, admin
from delayed.dead_letter import record
from delayed.testing import RedisServer, free_port

from .conftest import ROOT


def run(*args, url="", module="delayed", cwd=ROOT, **options):
    """`python -m module ARGS` (with --redis-url url if given) from the worktree: (status, stdout, stderr)."""
    command = [sys.executable, "-m", module, *args, *(["--redis-url", url] if url else [])]
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


def worker_in(directory, *args, url="redis://127.0.0.1:1/0"):
    """`python -m delayed.worker ARGS` run in directory (its modules importable), delayed from the worktree."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "delayed.worker", "--redis-url", url, *args], cwd=directory,
                          env=env, capture_output=True, text=True, timeout=30)


def test_a_task_module_that_raises_as_it_imports_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "raising.py").write_text("raise RuntimeError('no config')\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from . import broken\n")
    (tmp_path / "pkg" / "broken.py").write_text("def f(:\n")
    for module, message in (("raising", "raising raised RuntimeError: no config"),
                            ("pkg", "pkg raised SyntaxError: invalid syntax")):
        process = worker_in(tmp_path, module)
        assert process.returncode == 2 and process.stdout == ""
        assert process.stderr.count("\n") == 1 and "Traceback" not in process.stderr
        assert process.stderr.startswith(f"delayed.worker: cannot import task module: {message}")


def test_a_worker_with_nothing_to_allow_refuses_to_start_saying_what_to_pass(tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "__init__.py").write_text("from .mail import send\n")
    (tmp_path / "jobs" / "mail.py").write_text("def send(to):\n    pass\n")
    process = worker_in(tmp_path, "jobs")
    assert process.returncode == 2 and process.stderr.count("\n") == 1
    assert process.stderr.startswith("delayed.worker: jobs define no function to allow")
    assert process.stderr.rstrip().endswith("pass the modules that define them such as jobs.mail")


def test_debug_logging_lists_the_allowed_functions(tmp_path, redis_server):
    (tmp_path / "jobs.py").write_text("def send(to):\n    pass\n\ndef _private():\n    pass\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen([sys.executable, "-m", "delayed.worker", "--redis-url", redis_server.url,
                                "--log-level", "DEBUG", "jobs"], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = next(line for line in process.stdout if "allowed functions" in line or "online" in line)
    finally:
        process.terminate()
        process.communicate(timeout=15)
    assert line.rstrip().endswith("allowed functions: jobs:send")


@pytest.mark.parametrize("url, secrets", [
    ("redis://user:p@ss:word@127.0.0.1:{port}/0", ["p@ss", "ss:word"]),
    ("redis://127.0.0.1:{port}/0?password=hunter2", ["hunter2"]),
    ("rediss://:s3cret@127.0.0.1:{port}/0", ["s3cret"]),
    ("redis://:pa%40ss@127.0.0.1:{port}/0", ["pa%40ss", "pa@ss"]),
    ("redis://:pa:ss@127.0.0.1:notaport/0", ["pa:ss"]),
    ("redis://:se:cret@[::1/0", ["se:cret"]),
    ("redis://:ab12/cd34@127.0.0.1:{port}/0", ["ab12", "cd34"]),
])
def test_no_message_shows_the_redis_password(url, secrets):
    url = url.format(port=free_port())
    for module, argument in (("delayed", "stats"), ("delayed.worker", "tests.tasks")):
        status, out, err = run(argument, url=url, module=module)
        assert status in (1, 2) and out == "" and err.count("\n") == 1, err
        assert err.startswith("delayed") and "***" in err and not any(secret in err for secret in secrets), err


def test_a_wrong_password_is_masked_too(tmp_path):
    with RedisServer(tmp_path, ["--requirepass", "right"]) as server:
        status, _, err = run("stats", url=f"redis://:wr@ng:pw@127.0.0.1:{server.port}/0")
    assert status == 1 and "wr@ng" not in err and "ng:pw" not in err and "***" in err
