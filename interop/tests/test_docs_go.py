"""The manual's Go: every ```go block of README.md and docs/ builds on go-delayed, each fragment runs,
and the examples of docs/go.md do what the page says, against go-delayed's real worker and ours.

Blocks are read from the pages at test time (tests/docs_examples.py finds them), so an edit that
breaks an example breaks these tests. Each runs as it stands, with $DELAYED_REDIS_URL naming the
test's redis-server, so an example that ignores the variable reaches no Redis and fails. A fragment
(a block that is not `package main`) is wrapped in `func main()` importing go-delayed's `delayed`
package and the FRAGMENT_IMPORTS it names, built in interop/bin/ (gitignored, inside the interop
module, so go.mod pins go-delayed) and run.
"""
import os
import re
import signal
import subprocess
import sys
import time
from typing import Callable

import pytest
from conftest import ROOT, go_program, go_results, wait_for

from delayed.queue import Queue
from interop import gocommands
from tests import docs_examples

GO_PAGE = ROOT / "docs" / "go.md"
GO_BLOCKS = [block for page in docs_examples.pages() for block in docs_examples.blocks(page)
             if block.language == "go"]
RUN = [block for block in GO_BLOCKS if block.skip_reason is None and not block.title]
SKIPPED = [block for block in GO_BLOCKS if block.skip_reason is not None]


def page_block(language: str, holding: Callable[[str], bool]) -> docs_examples.Block:
    """The first ```language block of docs/go.md whose source holding() accepts."""
    found = [block for block in docs_examples.blocks(GO_PAGE) if block.language == language and holding(block.source)]
    assert found, f"docs/go.md has no such {language} block: the test that runs it needs it"
    return found[0]


def python_gotasks() -> str:
    """The page's Python block of GoTasks for go-delayed's worker."""
    return page_block("python", lambda source: 'GoTask("main.Several"' in source).source


def pointed_at(redis_server) -> dict:
    """The environment a page's example runs in: this process's, with $DELAYED_REDIS_URL naming redis_server."""
    return dict(os.environ, DELAYED_REDIS_URL=redis_server.url)


def received(records):
    """[(func, [(Go type %T, Go value %#v), ...]), ...]"""
    return [(r["func"], [(a["type"], a["go"]) for a in r["args"]]) for r in records]


# What each comment of the page's Python block promises the Go handler receives, in enqueue order.
PROMISED = [
    ("Several", [("int", "1"), ("string", '"a"'), ("float64", "2.5")]),
    ("Struct", [("main.Point", 'main.Point{X:1, Y:2, Label:"p"}')]),
    ("Variadic", [("string", '"p"'), ("[]int", "[]int{1, 2}")]),
    ("Float32", [("float32", "1.5")]),
    ("NoArg", []),
]
LATER = ("String", [("string", '"later"')])


def test_the_python_gotasks_run_on_go_delayed_s_worker_as_their_comments_say(procs, conn, redis_server, monkeypatch):
    """The page's Python block of GoTasks, run: a goworker on "go" runs every call with the Go types
    and values the block's comments state; our sweeper moves the delay=2 task in, and it runs no sooner."""
    monkeypatch.setenv("DELAYED_REDIS_URL", redis_server.url)
    source = python_gotasks()
    worker = procs.go_worker("go")
    procs.py_sweeper("go")

    enqueued = time.time()  # before the delayed enqueue, so "now - enqueued" never understates its wait
    exec(compile(source, "docs/go.md (python block)", "exec"), {})
    wait_for(lambda: len(go_results(conn)) >= len(PROMISED), what="the immediate tasks to run on Go")
    assert received(go_results(conn))[:len(PROMISED)] == PROMISED, worker.err()

    wait_for(lambda: len(go_results(conn)) > len(PROMISED), what="the delayed task", interval=0.01)
    assert time.time() - enqueued >= 2  # seen at once (interval 0.01): run no sooner than due
    assert received(go_results(conn)) == PROMISED + [LATER], worker.err()
    assert conn.xlen("go_dead_letters") == 0


TASKS_PY = '''"""The `tasks` module the page's Go fragment enqueues for: each call records repr((name, its arguments))."""
import os

import redis

_conn = redis.Redis.from_url(os.environ["DELAYED_TEST_REDIS_URL"])


def add(a, b):
    _conn.rpush("docs_calls", repr(("add", {"a": a, "b": b})))


def greet(name):
    _conn.rpush("docs_calls", repr(("greet", {"name": name})))
'''

GO_MAIN = """package main

import (
%s)

func main() {
%s}
"""
FRAGMENT_IMPORTS = {"os": "os", "redis": "github.com/gomodule/redigo/redis"}
"""The packages a fragment may use unimported (its wrapper imports those it names), by their names in Go code."""


def wrapped(fragment: str) -> str:
    """A fragment as a program: in func main(), with go-delayed's delayed package imported, and each
    of FRAGMENT_IMPORTS the fragment names."""
    paths = ["github.com/yizhisec/go-delayed/delayed",
             *[path for name, path in FRAGMENT_IMPORTS.items() if re.search(rf"\b{name}\.", fragment)]]
    return GO_MAIN % ("".join(f'\t"{path}"\n' for path in paths),
                      "".join(f"\t{line}\n" for line in fragment.splitlines()))


@pytest.mark.parametrize("block", RUN, ids=lambda block: block.where)
def test_every_go_block_builds_and_every_fragment_runs(block, go_bin, redis_server):
    """A `package main` block builds as it stands; a fragment builds wrapped, and runs to exit 0."""
    program = block.source.startswith("package main")
    name = "docs_" + re.sub(r"\W", "_", block.where)
    directory = go_program(name, block.source if program else wrapped(block.source))
    built = subprocess.run(["go", "build", "-o", str(directory / "program"), f"./bin/{name}"],
                           cwd=gocommands.INTEROP, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, f"{block.where} ({directory / 'main.go'}):\n{built.stderr}"
    if not program:
        run = subprocess.run([str(directory / "program")], capture_output=True, text=True, timeout=60,
                             env=pointed_at(redis_server))
        assert run.returncode == 0, f"{block.where}:\n{run.stdout}{run.stderr}"


@pytest.mark.parametrize("block", SKIPPED, ids=lambda block: block.where)
def test_a_go_block_marked_skip(block):
    pytest.skip(f"{block.where}: {block.skip_reason}")


def test_the_go_fragment_enqueues_pytasks_our_worker_runs(procs, conn, redis_server, tmp_path):
    """The page's Go fragment that enqueues PyTasks, wrapped and run; `python -m delayed.worker --queue
    py tasks` with a tasks.py defining add(a, b) and greet(name) then runs both calls with those arguments."""
    fragment = page_block("go", lambda source: 'NewPyTask("tasks:add"' in source and not source.startswith("package"))
    example = go_program("docs_enqueue", wrapped(fragment.source))
    run = subprocess.run(["go", "run", "./bin/docs_enqueue"], cwd=gocommands.INTEROP, capture_output=True,
                         text=True, timeout=300, env=pointed_at(redis_server))
    assert run.returncode == 0, f"{example / 'main.go'}:\n{run.stderr}"
    assert Queue("py", conn).len() == 2

    (tmp_path / "tasks.py").write_text(TASKS_PY)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}", DELAYED_TEST_REDIS_URL=redis_server.url)
    assert not (ROOT / "tasks.py").exists() and not (ROOT / "tasks").exists()  # cwd is ROOT: it must not shadow ours
    worker = procs.start("pyworker", [sys.executable, "-m", "delayed.worker", "--redis-url", redis_server.url,
                                      "--queue", "py", "--keep-alive-timeout", "1", "tasks"], env=env)
    wait_for(lambda: conn.llen("docs_calls") + Queue("py", conn).dead.count() >= 2 or not worker.alive(),
             what="both PyTasks to run or be dead-lettered")
    calls = [item.decode() for item in conn.lrange("docs_calls", 0, -1)]
    dead = Queue("py", conn).dead.list()
    assert calls == ["('add', {'a': 1, 'b': 2})", "('greet', {'name': 'Go'})"], (dead, worker.err())
    assert dead == []


def test_the_go_worker_program_runs_the_python_gotasks_and_stops_on_sighup(procs, conn, redis_server, monkeypatch):
    """The page's complete go-delayed worker, built and started; the page's Python block then enqueues
    its GoTasks, and the worker prints each call with the values the block's comments promise;
    SIGHUP stops it."""
    program = page_block("go", lambda source: source.startswith("package main") and "RegisterHandlers" in source)
    example = go_program("docs_worker", program.source)
    built = subprocess.run(["go", "build", "-o", str(example / "worker"), "./bin/docs_worker"],
                           cwd=gocommands.INTEROP, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, f"{example / 'main.go'}:\n{built.stderr}"
    worker = procs.start("docs_worker", [str(example / "worker")], env=pointed_at(redis_server))
    procs.py_sweeper("go")  # moves the delay=2 task in

    monkeypatch.setenv("DELAYED_REDIS_URL", redis_server.url)
    exec(compile(python_gotasks(), "docs/go.md (python block)", "exec"), {})
    wait_for(lambda: worker.out().count("\n") >= 6 or not worker.alive(), what="six calls printed")
    assert worker.out().splitlines() == ["Several 1 a 2.5", "Struct {X:1 Y:2 Label:p}", "Variadic p [1 2]",
                                         "Float32 1.5", "NoArg", "String later"], worker.err()
    worker.signal(signal.SIGHUP)
    assert worker.wait() == 0, worker.err()
