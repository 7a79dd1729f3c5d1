"""The manual's Go: every ```go block of README.md and docs/ builds, each fragment runs, and the
examples of docs/go.md do what the page says, against go-delayed's real worker and our workers,
Python's and Go's.

Blocks are read from the pages at test time (tests/docs_examples.py finds them), so an edit that
breaks an example breaks these tests. Each runs as it stands, with $DELAYED_REDIS_URL naming the
test's redis-server, so an example that ignores the variable reaches no Redis and fails. A fragment
(a block that is not `package main`) is wrapped in `func main()` importing a `delayed` package
(go-delayed's, or our module's where the test says so) and the FRAGMENT_IMPORTS it names, built in
interop/bin/ (gitignored, inside the interop module, so go.mod pins go-delayed and requires our
module from ../go) and run.
"""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List

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


def page_file(title: str) -> str:
    """The source of docs/go.md's file block title="title"."""
    [found] = [block for block in docs_examples.blocks(GO_PAGE) if block.title == title]
    return found.source


def go_shown_outputs(source: str) -> List[str]:
    """What a Go block's `fmt.Println(...) // TEXT` lines state they print, in order."""
    return re.findall(r"^\s*fmt\.Println\(.*\) // (.*)$", source, re.M)


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
FRAGMENT_IMPORTS = {"os": "os", "redis": "github.com/gomodule/redigo/redis", "context": "context", "fmt": "fmt",
                    "log": "log", "time": "time"}
"""The packages a fragment may use unimported (its wrapper imports those it names), by their names in Go code."""
GO_DELAYED = "github.com/yizhisec/go-delayed/delayed"
OURS = "github.com/delayed-py/delayed/go/v2/delayed"
"""The two `delayed` packages a block may import: go-delayed's, and our module's drop-in for it."""


def wrapped(fragment: str, package: str = GO_DELAYED) -> str:
    """A fragment as a program: in func main(), with the delayed package (go-delayed's, or OURS)
    imported, and each of FRAGMENT_IMPORTS the fragment names."""
    paths = [package, *[path for name, path in FRAGMENT_IMPORTS.items() if re.search(rf"\b{name}\.", fragment)]]
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


def start_tasks_worker(procs, redis_server, directory: Path, tasks_py: str):
    """`python -m delayed.worker --queue py tasks`, with tasks.py holding tasks_py, once online."""
    (directory / "tasks.py").write_text(tasks_py)
    env = dict(os.environ, PYTHONPATH=f"{directory}{os.pathsep}{ROOT}", DELAYED_TEST_REDIS_URL=redis_server.url)
    assert not (ROOT / "tasks.py").exists() and not (ROOT / "tasks").exists()  # cwd is ROOT: it must not shadow ours
    worker = procs.start("pyworker", [sys.executable, "-m", "delayed.worker", "--redis-url", redis_server.url,
                                      "--queue", "py", "--keep-alive-timeout", "1", "tasks"], env=env)
    wait_for(lambda: " online " in worker.err() or not worker.alive(), what="the python worker online")
    assert worker.alive(), worker.err()
    return worker


@pytest.mark.parametrize("package", [GO_DELAYED, OURS], ids=["go-delayed", "ours"])
def test_the_go_fragment_enqueues_pytasks_our_worker_runs(procs, conn, redis_server, tmp_path, package):
    """The page's Go fragment that enqueues PyTasks with Queue.Enqueue, wrapped and run on go-delayed's
    package and on ours ("alike", the page says); `python -m delayed.worker --queue py tasks` with a
    tasks.py defining add(a, b) and greet(name) then runs both calls with those arguments."""
    fragment = page_block("go", lambda source: 'NewPyTask("tasks:add"' in source and "queue.Enqueue(" in source)
    example = go_program("docs_enqueue", wrapped(fragment.source, package))
    run = subprocess.run(["go", "run", "./bin/docs_enqueue"], cwd=gocommands.INTEROP, capture_output=True,
                         text=True, timeout=300, env=pointed_at(redis_server))
    assert run.returncode == 0, f"{example / 'main.go'}:\n{run.stderr}"
    assert Queue("py", conn).len() == 2

    worker = start_tasks_worker(procs, redis_server, tmp_path, TASKS_PY)
    wait_for(lambda: conn.llen("docs_calls") + Queue("py", conn).dead.count() >= 2 or not worker.alive(),
             what="both PyTasks to run or be dead-lettered")
    calls = [item.decode() for item in conn.lrange("docs_calls", 0, -1)]
    dead = Queue("py", conn).dead.list()
    assert calls == ["('add', {'a': 1, 'b': 2})", "('greet', {'name': 'Go'})"], (dead, worker.err())
    assert dead == []


@pytest.mark.parametrize("package", [GO_DELAYED, OURS], ids=["go-delayed", "ours"])
def test_the_go_worker_program_runs_the_python_gotasks_and_stops_on_sighup(procs, conn, redis_server, monkeypatch,
                                                                            package):
    """The page's complete go-delayed worker, built as it stands and moved to our module by its import
    path alone, and started; the page's Python block then enqueues its GoTasks, and the worker prints
    each call with the values the block's comments promise, the same lines either way; SIGHUP stops it."""
    program = page_block("go", lambda source: source.startswith("package main") and f'"{GO_DELAYED}"' in source)
    example = go_program("docs_worker", program.source.replace(f'"{GO_DELAYED}"', f'"{package}"'))
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


def test_the_mixed_service_go_worker_returns_results_and_errors_to_the_python_block(procs, conn, redis_server,
                                                                                   monkeypatch):
    """A mixed service in five minutes: the page's Go worker (our module, handler Add), built and
    started; the page's Python block beside it gets Add's result and, for negative numbers, a
    TaskFailedError whose printed status and error are what the page shows; the failed call is then
    the dead letter `delayed dead list` shows, with the Go error; SIGTERM stops the worker."""
    program = page_block("go", lambda source: source.startswith("package main") and f'"{OURS}"' in source)
    example = go_program("docs_mixed_worker", program.source)
    built = subprocess.run(["go", "build", "-o", str(example / "worker"), "./bin/docs_mixed_worker"],
                           cwd=gocommands.INTEROP, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, f"{example / 'main.go'}:\n{built.stderr}"
    worker = procs.start("docs_mixed_worker", [str(example / "worker")], env=pointed_at(redis_server))
    wait_for(lambda: conn.zcard("go_workers") or not worker.alive(), what="the Go worker online")
    assert worker.alive(), worker.err()

    block = page_block("python", lambda source: 'GoTask("main.Add", [40, 2])' in source)
    outputs = docs_examples.OutputCheck(docs_examples.shown_outputs(block))
    monkeypatch.setenv("DELAYED_REDIS_URL", redis_server.url)
    exec(compile("\n" * (block.line - 1) + block.source, docs_examples.shown(block.page), "exec"), {"print": outputs})
    assert outputs.unseen() == []
    [letter] = Queue("go", conn).dead.list()
    assert (letter["reason"], letter["error"]) == ("failed", "Add takes no negative numbers, got -1 and 2")

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.err()


def test_the_go_fragment_gets_our_python_workers_result(procs, conn, redis_server, tmp_path):
    """The page's Go fragment calling tasks:add through our module's client (EnqueueContext with
    ResultTTL, then Result), wrapped and run beside `python -m delayed.worker --queue py tasks` on the
    page's tasks.py: it prints what its comment says, add's return value."""
    fragment = page_block("go", lambda source: 'NewPyTask("tasks:add"' in source and "EnqueueContext(" in source)
    example = go_program("docs_call_python", wrapped(fragment.source, OURS))
    start_tasks_worker(procs, redis_server, tmp_path, page_file("tasks.py"))
    run = subprocess.run(["go", "run", "./bin/docs_call_python"], cwd=gocommands.INTEROP, capture_output=True,
                         text=True, timeout=300, env=pointed_at(redis_server))
    assert run.returncode == 0, f"{example / 'main.go'}:\n{run.stderr}"
    shown = go_shown_outputs(fragment.source)
    assert shown and run.stdout.splitlines() == shown


def test_the_workflow_go_worker_runs_the_chain_and_the_callback_of_the_python_block(procs, conn, redis_server, tmp_path,
                                                                                 monkeypatch):
    """Workflows across languages: the page's Go worker (Label, a chain's step; Tally, a pass-mode
    group's callback), built and started on "go", and our Python worker on "py" with the page's tasks.py;
    the page's Python block then prints what its comments say: the chain's Python -> Go -> Python
    result, and Tally's lines, a StepFailed's for the member that raised."""
    program = page_block("go", lambda source: source.startswith("package main") and "func Tally(" in source)
    example = go_program("docs_workflow_worker", program.source)
    built = subprocess.run(["go", "build", "-o", str(example / "worker"), "./bin/docs_workflow_worker"],
                           cwd=gocommands.INTEROP, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, f"{example / 'main.go'}:\n{built.stderr}"
    worker = procs.start("docs_workflow_worker", [str(example / "worker")], env=pointed_at(redis_server))
    wait_for(lambda: conn.zcard("go_workers") or not worker.alive(), what="the Go worker online")
    assert worker.alive(), worker.err()
    start_tasks_worker(procs, redis_server, tmp_path, page_file("tasks.py"))

    block = page_block("python", lambda source: 'GoTask("main.Tally")' in source)
    outputs = docs_examples.OutputCheck(docs_examples.shown_outputs(block))
    monkeypatch.setenv("DELAYED_REDIS_URL", redis_server.url)
    exec(compile("\n" * (block.line - 1) + block.source, docs_examples.shown(block.page), "exec"), {"print": outputs})
    assert outputs.unseen() == []
    assert Queue("go", conn).dead.list() == []
