"""Python -> Go: GoTasks our Queue enqueues, run by a real go-delayed worker (interop/bin/goworker).

Each handler records the Go type (%T) and Go value (%#v) it received, so these tests pin which
Python values reach which Go parameter types, and what go-delayed does with the ones that do not fit.
"""
import msgpack
import pytest
from conftest import go_results, wait_for

from delayed import DuplicateTaskError
from delayed.queue import Queue
from delayed.task import Float32, GoTask

SENTINEL = GoTask("main.String", "sentinel")


def run_on_go(procs, conn, *tasks):
    """Enqueue tasks then a sentinel on a fresh goworker; return (records before the sentinel, worker)."""
    worker = procs.go_worker("q")
    queue = Queue("q", conn)
    for task in tasks:
        queue.enqueue(task)
    queue.enqueue(SENTINEL)
    wait_for(lambda: any(r["func"] == "String" and r["args"][0]["json"] == "sentinel" for r in go_results(conn)),
             what="the sentinel task to run on the Go worker")
    return go_results(conn)[:-1], worker


def received(records):
    """[(func, [(Go type, Go value), ...]), ...]"""
    return [(r["func"], [(a["type"], a["go"]) for a in r["args"]]) for r in records]


# (handler, GoTask args, what the Go handler received: [(%T, %#v) per parameter])
EVERY_KIND = [
    ("Int", 5, [("int", "5")]),
    ("Int", -7, [("int", "-7")]),
    ("Int8", -128, [("int8", "-128")]),
    ("Int16", 32767, [("int16", "32767")]),
    ("Int32", -2**31, [("int32", "-2147483648")]),
    ("Int64", 2**63 - 1, [("int64", "9223372036854775807")]),
    ("Uint", 7, [("uint", "0x7")]),
    ("Uint8", 255, [("uint8", "0xff")]),
    ("Uint16", 65535, [("uint16", "0xffff")]),
    ("Uint32", 2**32 - 1, [("uint32", "0xffffffff")]),
    ("Uint64", 2**64 - 1, [("uint64", "0xffffffffffffffff")]),
    ("Float64", 2.5, [("float64", "2.5")]),
    ("Float64", 3, [("float64", "3")]),
    ("String", "héllo", [("string", '"héllo"')]),
    ("Bytes", b"\x00\x01\xff", [("[]uint8", "[]byte{0x0, 0x1, 0xff}")]),
    ("Bool", True, [("bool", "true")]),
    ("Ints", [1, 2, 3], [("[]int", "[]int{1, 2, 3}")]),
    ("Ints", [], [("[]int", "[]int{}")]),
    ("Strings", ["a", "b"], [("[]string", '[]string{"a", "b"}')]),
    ("Nested", [[1], [2, 3], []], [("[][]int", "[][]int{[]int{1}, []int{2, 3}, []int{}}")]),
    ("MapInt", {"a": 1, "b": -2}, [("map[string]int", 'map[string]int{"a":1, "b":-2}')]),
    ("MapAny", {"a": 1, "b": "x", "c": [1, -2], "d": None},
     [("map[string]interface {}",
       'map[string]interface {}{"a":0x1, "b":"x", "c":[]interface {}{0x1, -2}, "d":interface {}(nil)}')]),
    ("Struct", [1, 2, "p"], [("main.Point", 'main.Point{X:1, Y:2, Label:"p"}')]),
    ("StructPtr", [3, 4, "q"], [("*main.Point", '&main.Point{X:3, Y:4, Label:"q"}')]),
    ("Several", [1, "a", 2.5], [("int", "1"), ("string", '"a"'), ("float64", "2.5")]),
    ("Variadic", ["p", [1, 2]], [("string", '"p"'), ("[]int", "[]int{1, 2}")]),
    ("VariadicOnly", [1, 2, 3], [("[]int", "[]int{1, 2, 3}")]),
    ("NoArg", None, []),
    ("Any", [1, "a", -1, 1.5], [("[]interface {}", '[]interface {}{0x1, "a", -1, 1.5}')]),
    ("Any", 300, [("uint16", "0x12c")]),
    ("Any", {"k": 1}, [("map[interface {}]interface {}", 'map[interface {}]interface {}{"k":0x1}')]),
]


@pytest.mark.parametrize("func, args, expected", EVERY_KIND,
                         ids=[f"{f}-{a!r}"[:40] for f, a, _ in EVERY_KIND])
def test_every_argument_kind_reaches_its_go_handler(procs, conn, func, args, expected):
    """A GoTask runs once in the Go handler, which receives the value with the Go type of its parameter."""
    records, worker = run_on_go(procs, conn, GoTask("main." + func, args))
    assert received(records) == [(func, expected)], worker.err()


def test_float32_parameter_receives_our_float32(procs, conn):
    """Float32(1.5) is written as msgpack float32, which go-delayed accepts for a float32 parameter."""
    records, worker = run_on_go(procs, conn, GoTask("main.Float32", Float32(1.5)))
    assert received(records) == [("Float32", [("float32", "1.5")])], worker.err()


def test_float32_struct_field_receives_our_float32(procs, conn):
    """A struct with a float32 field, sent as the list of its fields with the float32 wrapped."""
    records, worker = run_on_go(procs, conn, GoTask("main.Float32Struct", ["r", Float32(0.25)]))
    assert received(records) == [("Float32Struct", [("main.Reading", 'main.Reading{Name:"r", Value:0.25}')])], \
        worker.err()


# What go-delayed does with values that do not fit the parameter's Go type: its msgpack
# (shamaton/msgpack v2) converts numbers without range checks, so they wrap or truncate.
CONVERTED = [
    ("Int8", 200, "int8", "-56"),
    ("Int8", -129, "int8", "127"),
    ("Int16", 32768, "int16", "-32768"),
    ("Int32", 2**31, "int32", "-2147483648"),
    ("Int64", 2**63, "int64", "-9223372036854775808"),
    ("Int", 2**64 - 1, "int", "-1"),
    ("Uint8", 256, "uint8", "0x0"),
    ("Uint8", -1, "uint8", "0xff"),
    ("Uint16", -1, "uint16", "0xffff"),
    ("Uint32", -5, "uint32", "0xfffffffb"),
    ("Uint64", -1, "uint64", "0xffffffffffffffff"),
    ("Uint", -1, "uint", "0xffffffffffffffff"),
    ("Int", 1.5, "int", "1"),
    ("Float32", 2, "float32", "2"),
    ("Float64", Float32(0.5), "float64", "0.5"),
    ("String", b"raw", "string", '"raw"'),
    ("Bytes", "text", "[]uint8", "[]byte{0x74, 0x65, 0x78, 0x74}"),
]


@pytest.mark.parametrize("func, value, go_type, go_value", CONVERTED,
                         ids=[f"{f}-{v!r}" for f, v, _, _ in CONVERTED])
def test_values_out_of_a_parameters_range_are_converted_silently(procs, conn, func, value, go_type, go_value):
    """Out-of-range ints wrap, floats truncate into ints, str and bytes convert: the task runs, no error logged."""
    records, worker = run_on_go(procs, conn, GoTask("main." + func, value))
    assert received(records) == [(func, [(go_type, go_value)])]
    assert "Failed" not in worker.err()


REFUSED = [
    ("Float32", 1.5, "invalid code cb decoding float32"),
    ("Float32Struct", ["r", 0.25], "invalid code cb decoding float32"),
    ("Int", "5", "invalid code a1 decoding int"),
    ("Int", True, "invalid code c3 decoding int"),
    ("Bool", 1, "invalid code 1 decoding bool"),
    ("Struct", {"X": 1, "Y": 2, "Label": "p"}, "invalid code 83 decoding struct"),
    ("Struct", None, "invalid code c0 decoding struct"),
]


@pytest.mark.parametrize("func, value, error", REFUSED, ids=[f"{f}-{v!r}"[:40] for f, v, _ in REFUSED])
def test_values_go_delayed_refuses_are_logged_and_dropped(procs, conn, func, value, error):
    """go-delayed logs "Failed to unmarshal payload" and drops the task: the handler never runs,
    the worker goes on with the next task, and nothing of the task is left in Redis."""
    records, worker = run_on_go(procs, conn, GoTask("main." + func, value))
    assert records == []
    assert f"Failed to unmarshal payload: msgpack : {error}" in worker.err()
    assert conn.llen("q") == 0 and conn.xlen("q_dead_letters") == 0


# GoTasks carrying options: [func, payload, options], run by a stock go-delayed worker that ignores them

WITH_OPTIONS = [
    ("Struct", [1, 2, "p"], [("main.Point", 'main.Point{X:1, Y:2, Label:"p"}')]),
    ("Several", [1, "a", 2.5], [("int", "1"), ("string", '"a"'), ("float64", "2.5")]),
    ("Float32", Float32(1.5), [("float32", "1.5")]),
    ("NoArg", None, []),
]


@pytest.mark.parametrize("func, args, expected", WITH_OPTIONS, ids=[f for f, _, _ in WITH_OPTIONS])
def test_a_gotask_carrying_options_runs_on_go_delayed_s_worker_which_ignores_them(procs, conn, func, args, expected):
    """go-delayed's decoder (shamaton/msgpack v2.1.1, setStructFromArray) skips array elements past its
    two fields: a stock go-delayed worker runs a GoTask whose third element carries max_retries,
    time_limit and the options of a tracked, unique task, with its argument intact, logging nothing.
    It writes no record and releases no lock: the record says pending, the lock stays until unique_for."""
    queue = Queue("q", conn)
    task = GoTask("main." + func, args, max_retries=3, time_limit=30)
    handle = queue.enqueue(task, result_ttl=60, unique_for=600)
    [blob] = conn.lrange("q", 0, -1)
    assert msgpack.unpackb(blob)[2].keys() == {"max_retries", "time_limit", "unique_key", "unique_token", "id"}
    queue.enqueue(SENTINEL)
    worker = procs.go_worker("q")
    wait_for(lambda: any(r["func"] == "String" and r["args"][0]["json"] == "sentinel" for r in go_results(conn)),
             what="the sentinel task to run on the Go worker")
    assert received(go_results(conn)[:-1]) == [(func, expected)], worker.err()
    assert "Failed" not in worker.err()
    assert handle.status() == "pending"
    with pytest.raises(DuplicateTaskError):
        queue.enqueue(task, unique_for=600)
