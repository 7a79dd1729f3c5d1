"""Operating the queues from the command line: discovery in a shared database, --json all the way
down, --watch through a Redis restart, password masking, task module errors, the `delayed` script."""
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import redis

import delayed
from delayed import GoTask, PyTask, Queue
from delayed.ops import admin
from delayed.ops.cli import main
from delayed.protocol.redaction import redacted
from delayed.testing import RedisServer, free_port
from delayed.wire.dead_letter import record

from .conftest import ROOT, WAIT, results, spawn, wait_for


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
    conn.hset("upper_processing", "0123456789ABCDEF0123456789ABCDEF", b"x")
    Queue("later", conn).enqueue(PyTask("tests.tasks:record", ["b"]), delay=3600)
    conn.xadd("buried_dead_letters", record(reason="failed", error="e", blob=b"x", queue="buried", worker=None))
    conn.rpush("older_dead", json.dumps({"reason": "failed", "error": "e", "task": "eA=="}))  # as versions before
    conn.set("cache_dead", "a string")                 # other programs' keys, wrong type or content
    conn.hset("order_processing", "status", "paid")
    conn.rpush("log_dead", "not a record")
    conn.zadd("jobs_scheduled", {"nightly": 1})
    conn.rpush("chat", "hello")
    conn.rpush("chat_noti", "x")
    conn.set("mail_noti", "1")
    assert admin.queue_names(conn) == ["batch", "buried", "go", "later", "older", "ours", "upper"]
    status, out, err = run("stats", "--json", url=redis_server.url)
    assert status == 0, err
    assert [row["queue"] for row in json.loads(out)] == ["batch", "buried", "go", "later", "older", "ours", "upper"]


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
    assert json.loads(out) == {"enqueued": {"go": True, "func": "main.Add", "payload": [1, [2]]}, "queue": "go",
                               "id": None, "delay": None, "at": None}
    status, out, err = run("enqueue", "tests.tasks:record", "x", "--json", url=redis_server.url)
    assert json.loads(out)["enqueued"] == {"func": "tests.tasks:record", "args": ["x"], "kwargs": {}, "retry": 0,
                                           "options": {}}
    status, out, err = run("scheduled", "list", "--queue", "q", url=redis_server.url)
    assert re.search(r'main\.F \(Go\) +\[1, "a"\]', out) and "GoTask(" not in out


def worker_in(directory, *args, url="redis://127.0.0.1:1/0"):
    """`python -m delayed.worker ARGS` run in directory (its modules importable), delayed from the worktree."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "delayed.worker", "--redis-url", url, *args], cwd=directory,
                          env=env, capture_output=True, text=True, timeout=30)


def test_a_task_module_that_raises_as_it_imports_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "raising.py").write_text("raise RuntimeError('no config:\\n  set TASKS_URL')\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from . import broken\n")
    (tmp_path / "pkg" / "broken.py").write_text("def f(:\n")
    for module, message in (("raising", "raising raised RuntimeError: no config: set TASKS_URL"),
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
    assert process.stderr.startswith("delayed.worker: jobs defines no function to allow")
    assert process.stderr.rstrip().endswith("pass the modules that define them such as jobs.mail")
    (tmp_path / "empty_mod.py").write_text("")
    process = worker_in(tmp_path, "jobs", "empty_mod")
    assert process.returncode == 2 and process.stderr.startswith("delayed.worker: jobs empty_mod define no function")


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
        process.communicate(timeout=WAIT)
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


CONNECTING_COMMANDS = [  # every command line that connects to Redis, with the arguments it needs first
    "delayed.worker tests.tasks", "delayed.sweeper", "delayed.scheduler tests.schedule_fast",
    "delayed.metrics --port {port}", "delayed.dashboard --port {port}",
    "delayed stats", "delayed workers", "delayed dead list", "delayed dead show 1-0", "delayed dead requeue 1-0",
    "delayed dead delete 1-0", "delayed dead purge --queue q --yes", "delayed scheduled list",
    "delayed enqueue tests.tasks:record x", "delayed task abc", "delayed cancel abc", "delayed pause q",
    "delayed resume q",
]


@pytest.fixture(params=["cluster answering nothing", "sentinels answering nothing", "master the sentinels lack"])
def unreachable(request):
    """A redis+cluster:// or redis+sentinel:// URL (with a password) that reaches no Redis, and
    what the one-line reason must say."""
    if request.param == "cluster answering nothing":
        return f"redis+cluster://:hunter2@127.0.0.1:{free_port()}", "Redis Cluster cannot be connected"
    if request.param == "sentinels answering nothing":
        return f"redis+sentinel://:hunter2@127.0.0.1:{free_port()}/mymaster", "Connection refused"
    url = request.getfixturevalue("sentinel_servers").url.replace("://", "://:hunter2@")
    return url.replace("/mymaster", "/nosuchmaster"), "No such master with that name"


@pytest.mark.parametrize("command", CONNECTING_COMMANDS)
def test_an_unreachable_cluster_or_sentinel_is_one_line_and_exit_1(command, unreachable):
    url, reason = unreachable
    module, *words = command.format(port=free_port()).split()
    status, out, err = run(*words, url=url, module=module)
    assert status == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"{module}: cannot reach Redis at {redacted(url)}: ") and reason in err, err
    assert "hunter2" not in err and "<redis" not in err, err  # no password, no client's repr


def test_a_master_a_sentinel_sees_down_is_said_so(sentinel_servers):
    watching, *others = sentinel_servers.sentinel_ports
    sentinel = redis.Redis(port=watching, decode_responses=True)
    sentinel.execute_command("SENTINEL", "MONITOR", "ghost", "127.0.0.1", str(free_port()), "2")
    try:
        sentinel.execute_command("SENTINEL", "SET", "ghost", "down-after-milliseconds", "100")
        wait_for(lambda: "s_down" in sentinel.sentinel_master("ghost")["flags"], what="the ghost to be down")
        status, out, err = run("stats", url=sentinel_servers.url.replace("/mymaster", "/ghost"))
    finally:
        sentinel.execute_command("SENTINEL", "REMOVE", "ghost")
        sentinel.close()
    assert status == 1 and err.count("\n") == 1, err
    assert re.search(rf"no sentinel names a primary for 'ghost' \(127\.0\.0\.1:{watching}: sees it at 127\.0\.0\.1:"
                     r"\d+ as [\w,]*s_down", err), err
    assert f"127.0.0.1:{others[0]}: No such master with that name" in err, err


def test_a_wrong_password_is_masked_too(tmp_path):
    with RedisServer(tmp_path, ["--requirepass", "right"]) as server:
        status, _, err = run("stats", url=f"redis://:wr@ng:pw@127.0.0.1:{server.port}/0")
    assert status == 1 and "wr@ng" not in err and "ng:pw" not in err and "***" in err


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "soon"])
def test_watch_takes_only_a_positive_number_of_seconds(value):
    status, out, err = run("stats", "--watch", value, url="redis://127.0.0.1:1/0")
    assert status == 2 and out == "" and "Traceback" not in err
    assert err.splitlines()[-1].startswith("delayed stats: error: argument --watch: ")


def read_until(process, predicate):
    """Lines of process's output up to the first one predicate accepts, which is returned."""
    for line in process.stdout:
        if predicate(line):
            return line
    pytest.fail("the process ended first")


def rows(line):
    return json.loads(line) if line.startswith("[") else None


def test_stats_watch_shows_rates_and_rides_out_a_redis_restart(tmp_path):
    server = RedisServer(tmp_path).start()
    conn = redis.Redis.from_url(server.url)
    queue = Queue("q", conn)
    queue.enqueue_many(PyTask("tests.tasks:record", [i]) for i in range(10))
    watch = subprocess.Popen([sys.executable, "-m", "delayed", "stats", "--watch", "0.2", "--json", "--queue", "q",
                              "--redis-url", server.url], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        [first] = rows(read_until(watch, rows))
        assert first["pending"] == 10 and first["net_per_s"] is None and first["dead_per_s"] is None
        queue.enqueue_many(PyTask("tests.tasks:record", [i]) for i in range(1000))
        [filling] = rows(read_until(watch, lambda line: rows(line) and rows(line)[0]["pending"] == 1010))
        assert filling["net_per_s"] > 0 and filling["dead_per_s"] == 0
        server.stop()
        outage = read_until(watch, lambda line: "Redis" in line)
        assert "Redis error" in outage and "retrying" in outage
        server.start()
        queue.enqueue_many(PyTask("tests.tasks:record", [i]) for i in range(3))
        assert "Redis is back" in read_until(watch, lambda line: "Redis" in line)
        [back] = rows(read_until(watch, lambda line: rows(line) and rows(line)[0]["pending"] == 3))
        assert back["net_per_s"] is None  # no rate across the restart: Redis came back empty
        [draining] = rows(read_until(watch, rows))
        assert draining["net_per_s"] == 0
    finally:
        watch.send_signal(signal.SIGINT)
        rest, _ = watch.communicate(timeout=WAIT)
        server.stop()
    assert watch.returncode == 0, rest
    assert "Traceback" not in rest


def test_the_delayed_console_script_is_what_python_m_delayed_runs():
    [script] = [entry for entry in importlib.metadata.entry_points(group="console_scripts") if entry.name == "delayed"]
    assert script.load() is main
    assert "from .ops.cli import main" in (ROOT / "delayed" / "__main__.py").read_text()


def test_version(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0 and capsys.readouterr().out == f"delayed {delayed.__version__}\n"
    status, out, _ = run("--version")
    assert status == 0 and out == f"delayed {delayed.__version__}\n"
    status, out, err = run("--json")
    assert status == 2 and err.splitlines()[-1] == ("delayed: error: a COMMAND is needed, one of: stats, workers, "
                                                    "dead, scheduled, enqueue, task, cancel, pause, resume, worker, "
                                                    "sweeper, scheduler, metrics, dashboard, contract")


def test_global_options_go_before_or_after_the_command(conn, redis_server, capsys):
    Queue("q", conn).enqueue(PyTask("tests.tasks:record", ["a"]))
    assert main(["--redis-url", redis_server.url, "--json", "stats", "--queue", "q"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["pending"] == 1
    assert main(["stats", "--queue", "q", "--json", "--redis-url", redis_server.url]) == 0
    assert json.loads(capsys.readouterr().out)[0]["pending"] == 1
    assert main(["--redis-url", "redis://:pw@127.0.0.1:1/0", "sweeper"]) == 1  # the URL reached the sweeper
    assert capsys.readouterr().err.startswith("delayed.sweeper: cannot reach Redis at redis://:***@127.0.0.1:1/0")


def test_delayed_worker_sweeper_and_scheduler_run_as_their_own_modules_do(conn, redis_server, tmp_path):
    queue = Queue("default", conn)
    queue.enqueue(PyTask("tests.tasks:record", ["soon"]), delay=0.2)
    (tmp_path / "every_second.py").write_text(
        "from delayed.scheduler import Periodic\nSCHEDULE = [Periodic('tests.tasks:record', every=1, queue='ticks')]\n")
    sweeper = spawn("delayed", "sweeper", "--interval", "0.1", redis_url=redis_server.url)
    scheduler = spawn("delayed", "scheduler", str(tmp_path / "every_second.py"), redis_url=redis_server.url)
    try:
        wait_for(lambda: conn.llen("default") == 1, what="the sweeper to move the due task")
        wait_for(lambda: conn.llen("ticks"), what="the scheduler to enqueue a tick")
        worker = spawn("delayed", "worker", "--queue", "default", "tests.tasks", redis_url=redis_server.url)
        try:
            wait_for(lambda: results(conn), what="the worker to run the task")
        finally:
            worker.terminate()
            assert worker.wait(WAIT) == 0
    finally:
        for process in (sweeper, scheduler):
            process.terminate()
            assert process.wait(WAIT) == 0, process.communicate()[0]
    assert results(conn) == [repr(("soon", (), {}))]


def test_a_queue_name_that_is_another_programs_key_is_one_line(conn, redis_server):
    conn.set("cache", "a string")
    conn.set("cache_scheduled", "a string")
    for command in (["stats", "--queue", "cache"], ["scheduled", "list", "--queue", "cache"]):
        status, out, err = run(*command, url=redis_server.url)
        assert status == 1 and out == "" and err.count("\n") == 1, err
        assert err.startswith("delayed: Redis error: ") and "WRONGTYPE" in err and "Traceback" not in err
    assert conn.get("cache") == b"a string" and conn.get("cache_scheduled") == b"a string"


def test_help_does_not_show_the_password_in_delayed_redis_url():
    env = dict(os.environ, DELAYED_REDIS_URL="redis://:envsecret@127.0.0.1:1/0")
    for module, words in (("delayed", ["stats", "--help"]), ("delayed", ["--help"]), ("delayed.worker", ["--help"])):
        status, out, err = run(*words, module=module, env=env)
        assert status == 0 and "--redis-url" in out and "envsecret" not in out + err


@pytest.mark.parametrize("words, message", [
    (["enqueue", "", "x"], "'' is not MODULE:FUNC"),
    (["enqueue", "tasks.add", "x"], "'tasks.add' is not MODULE:FUNC"),
    (["enqueue", " ", "--go"], "a GoTask needs a Go func path"),
    (["enqueue", "tasks:add", "--kwargs", "[1]"], "--kwargs must be a JSON object"),
    (["enqueue", "tasks:add", "--delay", "inf"], "argument --delay: delay must be a finite number of seconds"),
    (["enqueue", "tasks:add", "--delay", "nan"], "argument --delay: delay must be a finite number of seconds"),
    (["enqueue", "tasks:add", "--delay", "-5"], "argument --delay: delay must be 0 or more seconds"),
    (["enqueue", "tasks:add", "--delay", "1e308"], "argument --delay: delay must be at most 316224000 seconds"),
    (["enqueue", "tasks:add", "--retry", "-2"], "argument --retry: retry must be from -1 (forever) to 2147483647"),
    (["enqueue", "tasks:add", "--retry", "1" + "0" * 20], "argument --retry: retry must be from -1 (forever) to"),
    (["enqueue", "tasks:add", "--retry", "1.5"], "argument --retry: retry cannot be '1.5'"),
    (["enqueue", "tasks:add", "--time-limit", "nan"], "argument --time-limit: time_limit must be a finite number"),
    (["enqueue", "tasks:add", "--unique-for", "-1"], "argument --unique-for: unique_for must be above 0 seconds"),
    (["enqueue", "tasks:add", "--max-retries", "-7"], "argument --max-retries: max_retries must be from 0 to"),
    (["enqueue", "tasks:add", "--backoff", "soon"], "argument --backoff: backoff must be seconds or a 'module:func'"),
    (["enqueue", "tasks:add", "--at", "tomorrow"], "argument --at: at cannot be 'tomorrow'"),
    (["enqueue", "tasks:add", "--delay", "5", "--at", "2026-01-01T00:00:00"], "give delay or at, not both"),
    (["enqueue", "tasks:add", "--unique-key", "k"], "unique_key needs unique_for"),
    (["scheduled", "list", "--limit", "0"], "argument --limit: must be a positive number"),
    (["enqueue", "tasks:add", "--result-ttl", "0"], "argument --result-ttl: result_ttl must be above 0 seconds"),
    (["enqueue", "main.Add", "--go", "--retry", "3"], "a GoTask has no retry"),
    (["enqueue", "main.Add", "--go", "--max-retries", "3", "--backoff", "tasks:curve"], "a GoTask's backoff is seconds"),
])
def test_bad_enqueue_input_is_one_line_exit_2_and_writes_nothing(conn, redis_server, words, message):
    conn.set("keep", "me")
    status, out, err = run(*words, url=redis_server.url)
    assert status == 2 and out == "" and "Traceback" not in err
    assert message in err.splitlines()[-1], err
    assert conn.keys() == [b"keep"]


def test_delayed_enqueue_go_writes_its_options_and_tracks_it(conn, redis_server):
    status, out, err = run("enqueue", "main.Add", "1", "2", "--go", "--max-retries", "3", "--time-limit", "30",
                           "--result-ttl", "60", "--json", url=redis_server.url)
    assert status == 0, err
    printed = json.loads(out)
    assert printed["enqueued"] == {"go": True, "func": "main.Add", "payload": [1, 2],
                                   "options": {"max_retries": 3, "time_limit": 30.0}}
    task = GoTask.deserialize(conn.lindex("default", 0))
    assert (task.options.max_retries, task.options.time_limit, task.options.id) == (3, 30.0, printed["id"])
    assert conn.hget(f"default_task:{printed['id']}", "status") == b"pending"


def test_a_task_too_large_is_one_line_exit_2_and_writes_nothing(conn, redis_server, capsys):
    assert main(["enqueue", "tasks:add", "x" * 2_000_000, "--redis-url", redis_server.url]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "max_task_size" in captured.err
    assert conn.keys() == []


def test_scheduled_list_shows_a_task_due_never(conn, redis_server):
    conn.zadd("default_scheduled", {b"12345678" + PyTask("tasks:add").serialize(): float("inf")})
    status, out, err = run("scheduled", "list", "--json", url=redis_server.url)
    assert status == 0, err
    assert json.loads(out)[0]["due"] == "inf"


def test_enqueue_result_ttl_tracks_the_task_and_says_its_id_and_its_delay(conn, redis_server, capsys):
    url = ["--redis-url", redis_server.url]
    assert main(["enqueue", "tests.tasks:add", "1", "2", "--queue", "q", "--result-ttl", "60", *url]) == 0
    out = capsys.readouterr().out
    task_id = re.fullmatch(r'enqueued \{.*\} into q; tracked as task ([0-9a-f]{32}) \(delayed task \1\)\n', out)[1]
    assert Queue("q", conn).task_info(task_id).status == "pending"
    assert main(["enqueue", "tests.tasks:add", "--delay", "300", "--result-ttl", "60", "--json", *url]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["delay"] == 300 and Queue("default", conn).task_info(shown["id"]).status == "scheduled"
    assert main(["enqueue", "tests.tasks:add", "--delay", "2.5", *url]) == 0
    assert capsys.readouterr().out.endswith(" into default, due in 2.5 s\n")
    assert main(["enqueue", "tests.tasks:add", "--json", *url]) == 0
    assert json.loads(capsys.readouterr().out)["id"] is None


@pytest.mark.parametrize("url", ["127.0.0.1:6501", "http://127.0.0.1:6501/0", "redis://127.0.0.1:notaport/0", ""])
@pytest.mark.parametrize("command", ["delayed stats", "delayed.worker tests.tasks", "delayed.sweeper",
                                     "delayed.scheduler tests.schedule_fast"])
def test_a_malformed_redis_url_is_a_usage_error_naming_every_scheme(command, url):
    module, *words = command.split()
    status, out, err = run(*words, "--redis-url", url, module=module)
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"{module}: not a valid Redis URL: "), err
    if "notaport" in url:
        assert "Port could not be cast to integer value as 'notaport'" in err
    else:
        assert err.endswith("a Redis URL starts with one of redis://, rediss://, unix://, redis+cluster://, "
                            "rediss+cluster://, redis+sentinel://\n"), err


@pytest.mark.parametrize("command", ["delayed task {id}", "delayed --json task {id}", "delayed stats", "delayed --help",
                                     "delayed dead list --help", "delayed.worker --help"])
def test_a_reader_that_goes_away_ends_the_command_quietly(conn, redis_server, command):
    """With status 141, as a shell says of a process SIGPIPE killed; --help with 0, or 141 when its
    text did not fit in one write (argparse swallows a failed write)."""
    task_id = Queue("q", conn).enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=60).id
    module, *words = command.format(id=task_id).split()
    process = subprocess.Popen([sys.executable, "-m", module, *words, "--redis-url", redis_server.url], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # as `| head -0` would: whatever the command writes goes nowhere
    err = process.stderr.read().decode()
    assert process.wait(30) in ((0, 141) if "--help" in words else (141,)) and err == "", err


@pytest.mark.parametrize("words", [
    ["stats", "--queue", ""], ["dead", "list", "--queue", ""], ["pause", ""], ["enqueue", "tests.tasks:add", "--queue",
    "a_noti"], ["resume", "q", "x_dead_letters"], ["task", "abc", "--queue", "x_processing"],
    ["workers", "--queue", "q", "--queue", "q_paused"],
])
def test_the_delayed_command_refuses_a_name_no_queue_can_have(conn, redis_server, words):
    status, out, err = run(*words, url=redis_server.url)
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("delayed: a queue's name cannot be empty" if "" in words else "delayed: queue name '"), err
    assert conn.keys() == []


@pytest.mark.parametrize("command", ["delayed.worker tests.tasks", "delayed.sweeper"])
def test_the_roles_refuse_a_name_no_queue_can_have(redis_server, command):
    module, *words = command.split()
    status, out, err = run(*words, "--queue", "default", "--queue", "default_scheduled", url=redis_server.url,
                           module=module)
    assert status == 2 and err.count("\n") == 1, err
    assert err == f"{module}: queue name 'default_scheduled' is a key of queue 'default' (its _scheduled key): " \
                  "the two queues would mix their keys; name it otherwise\n"


def test_pausing_a_queue_that_does_not_exist_warns_with_the_ones_that_do(conn, redis_server):
    Queue("default", conn).enqueue(PyTask("tests.tasks:record"))
    Queue("mail", conn).enqueue(PyTask("tests.tasks:record"))
    status, out, err = run("pause", "defualt", "mail", url=redis_server.url)
    assert status == 0 and out.startswith("paused defualt") and "paused mail" in out
    assert err == "delayed: warning: no queue named 'defualt' has keys now (queues found: default, mail); paused all " \
                  "the same\n"
    status, out, err = run("resume", "defualt", "mail", url=redis_server.url)  # it was paused: no typo
    assert status == 0 and err == "", err
    status, out, err = run("resume", "nosuch", url=redis_server.url)
    assert status == 0 and err.startswith("delayed: warning: no queue named 'nosuch' has keys now"), err


def test_stats_flags_a_gotask_no_go_worker_took_within_go_wait(conn, redis_server):
    from delayed.protocol.sweeper_ops import SweeperOps

    go, py = Queue("go", conn), Queue("py", conn)
    go.enqueue(GoTask("main.Resize", ["cat.png"]))
    py.enqueue(PyTask("tests.tasks:record", ["x"]))
    for queue in (go, py):
        SweeperOps(queue).sweep()  # our sweeper notes since when each head has stood there
    status, out, err = run("stats", "--go-wait", "3600", url=redis_server.url)
    assert status == 0 and "warning" not in err, err  # not yet an hour
    time.sleep(1.2)
    for queue in (go, py):
        SweeperOps(queue).sweep()  # the same heads: still noted as first seen
    status, out, err = run("stats", "--go-wait", "1", url=redis_server.url)
    assert status == 0 and err.count("\n") == 1, err
    assert re.search(r"queue 'go': GoTask main.Resize has waited \d+ s at its head, untaken", err), err
    status, out, _ = run("--json", "stats", "--go-wait", "1", url=redis_server.url)
    untaken = {row["queue"]: row["go_untaken"] for row in json.loads(out)}
    assert untaken["go"] >= 1.2 and untaken["py"] is None

    conn.lpop("go"), conn.lpop("go_noti")  # a go-delayed worker took it
    SweeperOps(go).sweep()
    assert not conn.exists("go_head_since")
    status, out, err = run("stats", "--go-wait", "1", url=redis_server.url)
    assert status == 0 and "warning" not in err, err
