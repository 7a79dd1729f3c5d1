"""README.md's "Working with Go" examples, run as they stand: its ```python block against a real
go-delayed worker, its ```go block compiled on go-delayed and run for our real worker.

Both blocks are read from README.md at test time, so an edit that breaks an example breaks
this test. The one change made to either is textual and checked to apply exactly once: the
Redis address (`redis.Redis()`, `"127.0.0.1:6379"`) becomes the test's redis-server.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from delayed.queue import Queue

from interop import gocommands

from conftest import ROOT, go_results, wait_for

HEADING = "## Working with Go"


def readme_block(language: str) -> str:
    """The first ```language fenced block after the "Working with Go" heading."""
    text = (ROOT / "README.md").read_text()
    assert HEADING in text, f"README.md has no {HEADING!r} section"
    block = re.search(rf"^```{language}\n(.*?)^```$", text[text.index(HEADING):], re.S | re.M)
    assert block, f"no ```{language} block after {HEADING!r} in README.md"
    return block.group(1)


def with_address(source: str, old: str, new: str) -> str:
    """source with its one occurrence of old replaced by new (fails if old is not there exactly once)."""
    assert source.count(old) == 1, f"the README block should contain {old!r} once:\n{source}"
    return source.replace(old, new)


def go_program(name: str, source: str):
    """interop/bin/name/main.go holding source, afresh (bin/ is gitignored, and inside the interop
    module, so go.mod pins go-delayed); its directory."""
    directory = gocommands.BIN / name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    (directory / "main.go").write_text(source)
    return directory


def received(records):
    """[(func, [(Go type %T, Go value %#v), ...]), ...]"""
    return [(r["func"], [(a["type"], a["go"]) for a in r["args"]]) for r in records]


# What each README comment promises the Go handler receives, in enqueue order.
PROMISED = [
    ("Several", [("int", "1"), ("string", '"a"'), ("float64", "2.5")]),
    ("Struct", [("main.Point", 'main.Point{X:1, Y:2, Label:"p"}')]),
    ("Variadic", [("string", '"p"'), ("[]int", "[]int{1, 2}")]),
    ("Float32", [("float32", "1.5")]),
    ("NoArg", []),
]
LATER = ("String", [("string", '"later"')])


def test_readme_python_block_runs_on_a_go_delayed_worker(procs, conn, redis_server):
    """The Python block, exec'd with `redis.Redis()` rewritten to `redis.Redis.from_url(<test
    server>)` (a text edit rather than a stand-in `redis` module: the block's own `import redis`
    would rebind one). A goworker on "go" runs every call with the Go types and values the
    block's comments state; our sweeper moves the delay=2 task in, and it runs no sooner."""
    source = with_address(readme_block("python"), "redis.Redis()", f"redis.Redis.from_url({redis_server.url!r})")
    worker = procs.go_worker("go")
    procs.py_sweeper("go")

    enqueued = time.time()  # before the delayed enqueue, so "now - enqueued" never understates its wait
    exec(compile(source, "README.md (python block)", "exec"), {})
    wait_for(lambda: len(go_results(conn)) >= len(PROMISED), what="the immediate tasks to run on Go")
    time.sleep(max(0.0, enqueued + 1.9 - time.time()))
    assert received(go_results(conn)) == PROMISED, worker.err()
    assert conn.zcard("go_scheduled") == 1

    wait_for(lambda: len(go_results(conn)) > len(PROMISED), timeout=5, what="the delayed task", interval=0.01)
    assert time.time() - enqueued >= 2
    assert received(go_results(conn)) == PROMISED + [LATER], worker.err()
    assert conn.xlen("go_dead_letters") == 0


TASKS_PY = '''"""The `tasks` module README's Go block enqueues for: each call records repr((name, its arguments))."""
import os

import redis

_conn = redis.Redis.from_url(os.environ["DELAYED_TEST_REDIS_URL"])


def add(a, b):
    _conn.rpush("readme_calls", repr(("add", {"a": a, "b": b})))


def greet(name):
    _conn.rpush("readme_calls", repr(("greet", {"name": name})))
'''

GO_MAIN = """package main

import "github.com/yizhisec/go-delayed/delayed"

func main() {
%s}
"""


def test_readme_go_block_enqueues_pytasks_our_worker_runs(procs, conn, redis_server, tmp_path):
    """The Go block, wrapped in `package main` + `func main()` with its "127.0.0.1:6379" rewritten
    to the test server, is built in interop/bin/readme_example/ (gitignored, inside the interop
    module so go.mod pins go-delayed) and run; `python -m delayed.worker --queue py tasks` with a
    tasks.py defining add(a, b) and greet(name) then runs both calls with those arguments."""
    if shutil.which("go") is None:
        pytest.skip("'go' is not on the PATH (make interop says so too)")
    source = with_address(readme_block("go"), '"127.0.0.1:6379"', f'"{gocommands.redis_address(procs.redis_url)}"')
    example = go_program("readme_example", GO_MAIN % "".join(f"\t{line}\n" for line in source.splitlines()))
    run = subprocess.run(["go", "run", "./bin/readme_example"], cwd=gocommands.INTEROP, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, f"{example / 'main.go'}:\n{run.stderr}"
    assert Queue("py", conn).len() == 2

    (tmp_path / "tasks.py").write_text(TASKS_PY)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}", DELAYED_TEST_REDIS_URL=redis_server.url)
    assert not (ROOT / "tasks.py").exists() and not (ROOT / "tasks").exists()  # cwd is ROOT: it must not shadow ours
    worker = procs.start("pyworker", [sys.executable, "-m", "delayed.worker", "--redis-url", redis_server.url,
                                      "--queue", "py", "--keep-alive-timeout", "1", "tasks"], env=env)
    wait_for(lambda: conn.llen("readme_calls") + Queue("py", conn).dead.count() >= 2 or not worker.alive(),
             what="both PyTasks to run or be dead-lettered")
    calls = [item.decode() for item in conn.lrange("readme_calls", 0, -1)]
    dead = Queue("py", conn).dead.list()
    assert calls == ["('add', {'a': 1, 'b': 2})", "('greet', {'name': 'Go'})"], (dead, worker.err())
    assert dead == []


def readme_program(language: str) -> str:
    """The ```language block after the "Working with Go" heading that is a whole program (package main)."""
    text = (ROOT / "README.md").read_text()
    blocks = [b for b in re.findall(rf"^```{language}\n(.*?)^```$", text[text.index(HEADING):], re.S | re.M)
              if b.startswith("package main")]
    assert len(blocks) == 1, f"README.md should have one complete {language} program after {HEADING!r}"
    return blocks[0]


def test_readme_go_worker_runs_the_python_block_s_gotasks_and_stops_on_sighup(procs, conn, redis_server):
    """The complete Go worker, its "127.0.0.1:6379" rewritten to the test server, is built in
    interop/bin/readme_worker/ and started; the README's Python block then enqueues its GoTasks, and
    the worker prints each call with the values the Python block's comments promise; SIGHUP stops it."""
    if shutil.which("go") is None:
        pytest.skip("'go' is not on the PATH (make interop says so too)")
    source = with_address(readme_program("go"), '"127.0.0.1:6379"', f'"{gocommands.redis_address(procs.redis_url)}"')
    example = go_program("readme_worker", source)
    built = subprocess.run(["go", "build", "-o", str(example / "worker"), "./bin/readme_worker"],
                           cwd=gocommands.INTEROP, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, f"{example / 'main.go'}:\n{built.stderr}"
    worker = procs.start("readme_worker", [str(example / "worker")])
    procs.py_sweeper("go")  # moves the delay=2 task in

    exec(compile(with_address(readme_block("python"), "redis.Redis()", f"redis.Redis.from_url({redis_server.url!r})"),
                 "README.md (python block)", "exec"), {})
    wait_for(lambda: worker.out().count("\n") >= 6 or not worker.alive(), timeout=10, what="six calls printed")
    assert worker.out().splitlines() == ["Several 1 a 2.5", "Struct {X:1 Y:2 Label:p}", "Variadic p [1 2]",
                                         "Float32 1.5", "NoArg", "String later"], worker.err()
    worker.signal(signal.SIGHUP)
    assert worker.wait() == 0, worker.err()
