"""--log-format json on every command: each runs as a real process, and every line it writes on stderr
(its log lines, its one-line errors and warnings) parses as one JSON object with time (ISO 8601, UTC),
level, logger and message; a worker's lines about a task carry its id, queue and func."""
import datetime
import json
import os
import signal
import subprocess
import sys
from typing import Any, Callable, Dict, List

import pytest

from delayed import PyTask, Queue
from delayed.testing import RedisServer, free_port

from .conftest import ROOT, WAIT


def entries(stderr: str) -> List[Dict[str, Any]]:
    """Every line of stderr as the JSON object it must be."""
    parsed = []
    for line in stderr.splitlines():
        entry = json.loads(line)  # fails the test for a line that is not JSON
        assert isinstance(entry, dict) and {"time", "level", "logger", "message"} <= entry.keys(), line
        moment = datetime.datetime.fromisoformat(entry["time"])
        assert moment.utcoffset() == datetime.timedelta(0), line
        assert entry["level"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), line
        parsed.append(entry)
    return parsed


def command(module: str, *args: str, redis_url: str) -> List[str]:
    return [sys.executable, "-m", module, "--redis-url", redis_url, "--log-format", "json", *args]


def start(module: str, *args: str, redis_url: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), DELAYED_TEST_REDIS_URL=redis_url)
    return subprocess.Popen(command(module, *args, redis_url=redis_url), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run_to_end(module: str, *args: str, redis_url: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), DELAYED_TEST_REDIS_URL=redis_url)
    return subprocess.run(command(module, *args, redis_url=redis_url), cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=WAIT)


def until_logged(process: subprocess.Popen, wanted: Callable[[Dict[str, Any]], bool]) -> List[Dict[str, Any]]:
    """Read the process's stderr, line by line, until an entry wanted says yes to; then SIGTERM it, assert it
    exits 0, and return every entry it wrote."""
    lines = []
    assert process.stderr is not None
    for line in process.stderr:
        lines.append(line)
        if wanted(json.loads(line)):
            break
    else:
        pytest.fail(f"the process ended without the line wanted: {''.join(lines)}")
    process.send_signal(signal.SIGTERM)
    _, rest = process.communicate(timeout=WAIT)
    assert process.returncode == 0, "".join(lines) + rest
    return entries("".join(lines) + rest)


def saying(text: str) -> Callable[[Dict[str, Any]], bool]:
    return lambda entry: text in entry["message"]


@pytest.mark.parametrize("concurrency", ["1", "2"])
def test_a_worker_logs_json_lines_and_a_task_s_lines_name_its_id_queue_and_func(conn, redis_server, concurrency):
    queue = Queue("q", conn)
    handle = queue.enqueue(PyTask("tests.tasks:always_fail", ["json"]), result_ttl=60)
    queue.enqueue(PyTask("tests.tasks:record", ["ok"]))
    process = start("delayed.worker", "--queue", "q", "--log-tasks", "--concurrency", concurrency, "tests.tasks",
                    redis_url=redis_server.url)
    logged = until_logged(process, lambda entry: entry.get("func") == "tests.tasks:record")
    [failed] = [entry for entry in logged if entry["level"] == "ERROR"]
    assert (failed["logger"], failed["task"], failed["queue"], failed["func"], failed["reason"]) == (
        "delayed.worker", handle.id, "q", "tests.tasks:always_fail", "failed")
    assert failed["message"] == "task tests.tasks:always_fail failed; dead-lettered in q_dead_letters"
    assert "ValueError: json always fails" in failed["exception"]
    done = [entry for entry in logged if entry["logger"] == "delayed.worker.tasks" and entry["outcome"] == "done"]
    assert [(entry["task"], entry["queue"], entry["func"]) for entry in done] == [(None, "q", "tests.tasks:record")]
    assert any("online on queue 'q'" in entry["message"] for entry in logged)


def test_delayed_worker_takes_it_before_the_command_s_name(conn, redis_server):
    result = subprocess.run([sys.executable, "-m", "delayed", "--log-format", "json", "worker", "--burst", "tests.tasks",
                             "--redis-url", redis_server.url], cwd=ROOT, capture_output=True, text=True, timeout=WAIT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT), DELAYED_TEST_REDIS_URL=redis_server.url))
    assert result.returncode == 0, result.stderr
    assert any("burst done" in entry["message"] for entry in entries(result.stderr))


def test_the_sweeper_logs_json_lines(conn, redis_server):
    logged = until_logged(start("delayed.sweeper", "--interval", "0.2", redis_url=redis_server.url), saying("sweeping"))
    assert logged[0]["logger"] == "delayed.sweeper" and logged[-1]["message"] == "sweeper stopped"


def test_the_scheduler_logs_json_lines(conn, redis_server):
    logged = until_logged(start("delayed.scheduler", "tests.schedule_fast", redis_url=redis_server.url),
                          saying("enqueued"))
    assert any(entry["logger"] == "delayed.scheduler" and "tick" in entry["message"] for entry in logged)


def test_the_metrics_exporter_logs_json_lines(conn, redis_server):
    port = free_port()
    logged = until_logged(start("delayed.metrics", "--port", str(port), redis_url=redis_server.url),
                          saying(f"exporting queue metrics on http://127.0.0.1:{port}/metrics"))
    assert logged[-1]["message"] == "metrics exporter: SIGTERM received, stopping"


def test_the_dashboard_logs_json_lines(tmp_path):
    with RedisServer(tmp_path) as server:
        process = start("delayed.dashboard", "--port", str(free_port()), "--queue", "q", "--log-level", "DEBUG",
                        "--sample-every", "0.1", redis_url=server.url)  # a queue named: each sample reads Redis
        assert process.stdout is not None
        assert "delayed dashboard on" in process.stdout.readline()
        server.stop()  # its samples fail now, and it says so
        logged = until_logged(process, saying("sample failed"))
    assert any(entry["logger"] == "delayed.dashboard" for entry in logged)


def test_delayed_s_errors_and_warnings_are_json_lines(conn, redis_server):
    queue = Queue("q", conn)
    queue.enqueue_many([PyTask("os:system", ["true"])] * 2)
    assert run_to_end("delayed.worker", "--queue", "q", "--burst", "tests.tasks", redis_url=redis_server.url).returncode == 0
    listed = run_to_end("delayed", "dead", "list", "--limit", "1", redis_url=redis_server.url)
    [more] = entries(listed.stderr)
    assert listed.returncode == 0 and (more["level"], more["message"][:13]) == ("INFO", "more: --after")
    paused = run_to_end("delayed", "pause", "nosuch", redis_url=redis_server.url)
    [warning] = entries(paused.stderr)
    assert paused.returncode == 0 and warning["level"] == "WARNING" and "no queue named 'nosuch'" in warning["message"]
    missing = run_to_end("delayed", "task", "0" * 32, "--queue", "q", redis_url=redis_server.url)
    [error] = entries(missing.stderr)
    assert missing.returncode == 1 and (error["level"], error["logger"]) == ("ERROR", "delayed"), missing.stderr
    unreachable = run_to_end("delayed", "stats", redis_url=f"redis://127.0.0.1:{free_port()}")
    [error] = entries(unreachable.stderr)
    assert unreachable.returncode == 1 and error["message"].startswith("cannot reach Redis at")


def test_delayed_contract_s_error_is_a_json_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "delayed", "contract", "--log-format", "json", "python",
                             str(tmp_path / "missing.json"), "-o", str(tmp_path / "out.py")], capture_output=True,
                            text=True, timeout=WAIT)
    [error] = entries(result.stderr)
    assert result.returncode == 2 and (error["level"], error["logger"]) == ("ERROR", "delayed contract")
    assert error["message"].startswith("cannot read the contract")


def test_python_s_warnings_and_an_exception_that_ends_the_process_are_json_lines_too():
    code = ("import threading, warnings\n"
            "from delayed.logger import log_to_stderr\n"
            "log_to_stderr('INFO', 'json')\n"
            "warnings.warn('careful')\n"
            "thread = threading.Thread(target=lambda: 1 / 0, name='doomed')\n"
            "thread.start()\n"
            "thread.join()\n"
            "raise RuntimeError('boom')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=WAIT)
    warned, in_thread, uncaught = entries(result.stderr)
    assert result.returncode == 1
    assert (warned["level"], warned["logger"]) == ("WARNING", "py.warnings") and "careful" in warned["message"]
    assert in_thread["level"] == "CRITICAL" and "in thread doomed" in in_thread["message"]
    assert "ZeroDivisionError" in in_thread["exception"]
    assert uncaught["message"] == "uncaught RuntimeError: boom" and "Traceback" in uncaught["exception"]
