"""Contracts, live (issue 21): the contract `delayed contract go` reads from a real go-delayed
worker's handlers (interop/cmd/contractworker), the typed module `delayed contract python` writes
from it, and a real go-delayed worker receiving exactly the Go values each typed call meant.

contractworker has one handler per parameter kind, each taking that kind's edge values at once
(so no previous task of the handler can leave a value behind in go-delayed's decode variables),
and recording what it received (%T and %#v) in the Redis list go_results.
"""
import ast
import datetime
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, go_program, go_results, py_results, wait_for

from delayed import ContractError
from delayed.contract import Contract
from delayed.queue import Queue
from interop import gocommands

CONTRACTWORKER = ROOT / "interop" / "cmd" / "contractworker"


def delayed_command(*words, cwd=ROOT):
    done = subprocess.run([sys.executable, "-m", "delayed", *map(str, words)], cwd=cwd, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def contract_file(go_bin, tmp_path_factory) -> Path:
    """The contract `delayed contract go` reads from contractworker's handlers."""
    directory = tmp_path_factory.mktemp("contract")
    delayed_command("contract", "go", CONTRACTWORKER, "-o", directory / "contract.json")
    return directory / "contract.json"


@pytest.fixture(scope="module")
def tasks(contract_file):
    """The module `delayed contract python` writes from contractworker's contract, imported."""
    directory = contract_file.parent
    delayed_command("contract", "python", contract_file, "-o", directory / "contract_tasks.py")
    spec = importlib.util.spec_from_file_location("contract_tasks", directory / "contract_tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_contractworker(procs, queue="q"):
    argv = [gocommands.path("contractworker"), "-redis", gocommands.redis_address(procs.redis_url), "-queue", queue,
            "-keep-alive-timeout", "1s", "-keep-alive-duration", "200ms", "-dequeue-timeout", "200ms"]
    return procs.start("contractworker", argv)


NAN, INF = math.nan, math.inf
POINT = {"X": -1, "Y": 2, "Label": "p"}

# (typed function, its args, what the Go handler received: [(%T, %#v) per parameter])
EVERY_KIND = [
    ("int8", (-128, 127), [("int8", "-128"), ("int8", "127")]),
    ("int16", (-2**15, 2**15 - 1), [("int16", "-32768"), ("int16", "32767")]),
    ("int32", (-2**31, 2**31 - 1), [("int32", "-2147483648"), ("int32", "2147483647")]),
    ("int64", (-2**63, 2**63 - 1), [("int64", "-9223372036854775808"), ("int64", "9223372036854775807")]),
    ("uint8", (0, 255), [("uint8", "0x0"), ("uint8", "0xff")]),
    ("uint16", (0, 2**16 - 1), [("uint16", "0x0"), ("uint16", "0xffff")]),
    ("uint32", (0, 2**32 - 1), [("uint32", "0x0"), ("uint32", "0xffffffff")]),
    ("uint64", (0, 2**64 - 1), [("uint64", "0x0"), ("uint64", "0xffffffffffffffff")]),
    ("float32", (NAN, INF, -INF, 1.5),
     [("float32", "NaN"), ("float32", "+Inf"), ("float32", "-Inf"), ("float32", "1.5")]),
    ("float64", (NAN, INF, -INF, 3),
     [("float64", "NaN"), ("float64", "+Inf"), ("float64", "-Inf"), ("float64", "3")]),
    ("string", ("", "héllo"), [("string", '""'), ("string", '"héllo"')]),
    ("bytes_", (b"", b"\x00\xff"), [("[]uint8", "[]byte{}"), ("[]uint8", "[]byte{0x0, 0xff}")]),
    ("bool_", (True, False), [("bool", "true"), ("bool", "false")]),
    ("slices", ([], ["a", ""], [[1], []]),
     [("[]int", "[]int{}"), ("[]string", '[]string{"a", ""}'), ("[][]int", "[][]int{[]int{1}, []int{}}")]),
    ("array", ([1, -2, 3],), [("[3]int", "[3]int{1, -2, 3}")]),
    ("maps", ({}, {"a": ["x"], "b": []}),
     [("map[string]int", "map[string]int{}"),
      ("map[string][]string", 'map[string][]string{"a":[]string{"x"}, "b":[]string{}}')]),
    ("struct", (POINT, [{"X": 3, "Y": 4, "Label": ""}]),
     [("main.Point", 'main.Point{X:-1, Y:2, Label:"p", note:""}'),
      ("[]main.Point", '[]main.Point{main.Point{X:3, Y:4, Label:"", note:""}}')]),
    ("pointers", (None, 7, POINT),
     [("*int", "(*int)(nil)"), ("int", "7"), ("main.Point", 'main.Point{X:-1, Y:2, Label:"p", note:""}')]),
    # into an interface{}, go-delayed's msgpack decodes a positive fixint as a uint8 (as goworker's MapAny shows)
    ("any_", (None, 5, "s"), [("<nil>", "<nil>"), ("uint8", "0x5"), ("string", '"s"')]),
    ("when", (datetime.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc),),
     [("time.Time", "time.Date(2026, time.January, 2, 3, 4, 5, 6000, time.UTC)")]),
    ("variadic", ("p", 1, -2), [("string", '"p"'), ("[]int", "[]int{1, -2}")]),
]


def test_every_parameter_kind_reaches_go_as_the_intended_go_value(procs, conn, tasks):
    queue = Queue("q", conn)
    for name, args, _ in EVERY_KIND:
        queue.enqueue(getattr(tasks, name)(*args))
    start_contractworker(procs)
    wait_for(lambda: len(go_results(conn)) >= len(EVERY_KIND), what="every contract task to run on Go")
    got = {r["func"]: [(a["type"], a["go"]) for a in r["args"]] for r in go_results(conn)}
    assert len(go_results(conn)) == len(EVERY_KIND)
    assert got == {name.rstrip("_").capitalize(): expected for name, _, expected in EVERY_KIND}  # bool_: Bool


# (typed function, its args or kwargs, what the ContractError says)
REFUSED = [
    ("int8", (-129, 0), "int8"),
    ("int8", (0, 128), "int8"),
    ("uint8", (-1, 0), "uint8"),
    ("uint64", (0, 2**64), "uint64"),
    ("int64", (2**63, 0), "int64"),
    ("int16", (True, 0), "int16"),
    ("int32", (1.5, 0), "int32"),
    ("string", ("", 3), "string"),
    ("bytes_", (b"", "text"), "[]byte"),
    ("bool_", (1, True), "bool"),
    ("array", ([1, 2],), "[3]int"),
    ("slices", ([], ["a", 1], []), "string"),
    ("maps", ({1: 2}, {}), "string"),
    ("struct", ({"X": 1, "Y": 2, "Label": "p", "Z": 0}, []), "Z"),
    ("struct", ({"X": 1, "Y": 2}, []), "Label"),
    ("struct", ({"X": 1, "Y": 2, "Label": "p", "note": ""}, []), "note"),
    ("variadic", ("p", 1, "x"), "rest"),
    ("when", (datetime.datetime(2026, 1, 2),), "t"),
]


@pytest.mark.parametrize("name, args, message", REFUSED)
def test_a_refused_call_raises_before_redis_sees_anything(conn, tasks, name, args, message):
    queue = Queue("q", conn)
    with pytest.raises(ContractError, match=re.escape(message)):
        queue.enqueue(getattr(tasks, name)(*args))
    assert conn.keys("*") == []


# what the typed functions would refuse as Python calls, given to the contract itself:
# (Go name, args, kwargs, what the ContractError says)
REFUSED_BY_THE_CONTRACT = [
    ("main.String", ("",), {}, "missing s"),
    ("main.String", ("", "a", "b"), {}, "takes 2 arguments, got 3"),
    ("main.String", ("",), {"t": "x"}, "no parameter named 't'"),
    ("main.Nope", (1,), {}, "main.Nope is not a handler"),
]


@pytest.mark.parametrize("go_name, args, kwargs, message", REFUSED_BY_THE_CONTRACT)
def test_a_call_the_contract_refuses_raises_before_redis_sees_anything(conn, contract_file, go_name, args, kwargs,
                                                                       message):
    queue = Queue("q", conn)
    with pytest.raises(ContractError, match=re.escape(message)):
        queue.enqueue(Contract.load(contract_file).task(go_name, *args, **kwargs))
    assert conn.keys("*") == []


# The other way round: `delayed contract gotasks` on a Python module of typed functions, a Go
# program enqueuing through the constructors it writes, and our worker running them.

TYPED_JOBS = '''\
from typing import Any, Dict, List, Optional

from tests.tasks import record


def add(a: int, b: int) -> None:
    record("add", a, b)


def send(to: str, body: bytes, *, cc: Optional[List[str]] = None, urgent: bool = False) -> None:
    record("send", to, body, cc=cc, urgent=urgent)


def many(prefix: str, *items: float, options: Dict[str, Any]) -> None:
    record("many", prefix, *items, options=options)


def nothing() -> None:
    record("nothing")


def maybe(n: Optional[int], m: Dict[int, float], flag: bool) -> None:
    record("maybe", n, m, flag)
'''

TYPED_PRODUCER = """package main

import (
	"flag"

	"github.com/delayed-py/delayed/interop/bin/typedproducer/jobs"
	"github.com/delayed-py/delayed/interop/internal/common"
	"github.com/yizhisec/go-delayed/delayed"
)

func main() {
	address := flag.String("redis", "127.0.0.1:6379", "Redis address, host:port")
	queueName := flag.String("queue", "q", "queue name")
	flag.Parse()
	queue := delayed.NewQueue(*queueName, common.Pool(*address))
	for _, task := range []*delayed.PyTask{
		jobs.Add(-1, 1<<62),
		jobs.Send("me", []byte{0, 255}, []string{"a", ""}, true),
		jobs.Send("you", []byte{}, nil, false),
		jobs.Many("p", map[string]interface{}{"k": "v", "n": 1}, 1.5, 2),
		jobs.Many("q", map[string]interface{}{}),
		jobs.Nothing(),
		jobs.Maybe(nil, map[int64]float64{3: 0.5, -1: 0}, false),
	} {
		if err := queue.Enqueue(task); err != nil {
			common.Fatalf("enqueue: %v", err)
		}
	}
	common.PrintJSON(map[string]interface{}{"enqueued": 7})
}
"""

# what tests.tasks.record saw on our worker: repr((tag, args, kwargs)), in enqueue order
TYPED_RECEIVED = [
    ("add", (-1, 1 << 62), {}),
    ("send", ("me", b"\x00\xff"), {"cc": ["a", ""], "urgent": True}),
    ("send", ("you", b""), {"cc": None, "urgent": False}),
    ("many", ("p", 1.5, 2.0), {"options": {"k": "v", "n": 1}}),
    ("many", ("q",), {"options": {}}),
    ("nothing", (), {}),
    ("maybe", (None, {3: 0.5, -1: 0.0}, False), {}),
]


def test_go_enqueues_through_the_gotasks_constructors_and_our_worker_runs_them(procs, conn, tmp_path):
    (tmp_path / "typed_jobs.py").write_text(TYPED_JOBS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]),
               DELAYED_TEST_REDIS_URL=procs.redis_url)
    directory = go_program("typedproducer", TYPED_PRODUCER)
    (directory / "jobs").mkdir()
    done = subprocess.run([sys.executable, "-m", "delayed", "contract", "gotasks", "typed_jobs", "--package", "jobs",
                           "-o", str(directory / "jobs" / "jobs.go")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    built = subprocess.run(["go", "build", "-o", str(directory / "typedproducer"), "./bin/typedproducer"],
                           cwd=gocommands.INTEROP, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(directory / "typedproducer"), "-redis", gocommands.redis_address(procs.redis_url),
                          "-queue", "q"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"enqueued": 7}

    worker = procs.start("pyworker", [sys.executable, "-m", "delayed.worker", "--redis-url", procs.redis_url,
                                      "--queue", "q", "--keep-alive-timeout", "1", "typed_jobs"], env=env)
    wait_for(lambda: len(py_results(conn)) >= len(TYPED_RECEIVED) or not worker.alive(),
             what="the Go-enqueued PyTasks to run on our worker")
    assert [ast.literal_eval(result) for result in py_results(conn)] == TYPED_RECEIVED, worker.err()  # a Go map has no order
