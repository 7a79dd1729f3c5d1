"""Contracts: GoTasks checked against a Go package's handler types (delayed.contract), and the typed
code `delayed contract python|gotasks` writes for either side."""
import datetime
import subprocess
import sys

import msgpack
import pytest

from delayed import ContractError, DelayedError, Float32, GoTask
from delayed.contract import Contract

from .conftest import ROOT

CONTRACTS = ROOT / "tests" / "contract"
HANDLERS = CONTRACTS / "handlers.contract.json"
UTC = datetime.timezone.utc


@pytest.fixture(scope="module")
def contract():
    return Contract.load(HANDLERS)


POINT = {"X": 1, "Y": -2, "Label": "p"}
AT = datetime.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize("call, expected", [
    (("main.Add", 1, 2), [1, 2]),
    (("main.String", "later"), "later"),
    (("main.NoArg",), None),
    (("main.Several", 1, "a", 2), [1, "a", 2.0]),
    (("main.Float32", 1.5), Float32(1.5)),
    (("main.Float32", Float32(0.1)), Float32(0.1)),
    (("main.Struct", POINT), [1, -2, "p"]),
    (("main.Struct", (1, -2, "p")), [1, -2, "p"]),
    (("main.Pointer", None), None),
    (("main.Pointer", POINT), [1, -2, "p"]),
    (("main.Variadic", "p", 1, 2, 3), ["p", [1, 2, 3]]),
    (("main.Variadic", "p"), ["p", []]),
    (("main.Shapes", {"a": {"Corners": [POINT], "Scale": 2, "Parent": None}}, [1, 0.5]),
     [{"a": [[[1, -2, "p"]], Float32(2.0), None]}, [Float32(1.0), Float32(0.5)]]),
    (("main.Blob", bytearray(b"\x00\xff"), True, AT), [b"\x00\xff", True, msgpack.Timestamp.from_datetime(AT)]),
    (("main.Blob", None, False, msgpack.Timestamp(1, 2)), [None, False, msgpack.Timestamp(1, 2)]),
    (("main.Counts", {-3: 255}, (1, 2, 3), {"any": [1.5, None]}), [{-3: 255}, [1, 2, 3], {"any": [1.5, None]}]),
    (("main.Small", -128, 255, 65535, -(1 << 31), (1 << 64) - 1), [-128, 255, 65535, -(1 << 31), (1 << 64) - 1]),
])
def test_a_checked_task_holds_the_converted_values_and_the_bytes_of_an_unchecked_one(contract, call, expected):
    task = contract.task(*call)
    assert type(task) is GoTask and task.func_path == call[0]
    assert task.args == expected and type(task.args) is type(expected)
    assert task.serialize() == GoTask(call[0], expected).serialize()


def test_keyword_arguments_go_by_parameter_name(contract):
    expected = GoTask("main.Several", [1, "a", 2.5]).serialize()
    assert contract.task("main.Several", s="a", f=2.5, n=1).serialize() == expected
    assert contract.task("main.Variadic", "p", rest=[4, 5]).args == ["p", [4, 5]]


def test_a_float32_reaches_go_as_msgpack_float32(contract):
    blob = msgpack.unpackb(contract.task("main.Float32", 1).serialize())[1]
    assert blob == b"\xca\x3f\x80\x00\x00"  # float32 1.0


@pytest.mark.parametrize("call, kwargs, message", [
    (("main.Nope",), {}, "main.Nope is not a handler in the contract of example.com/svc/jobs"),
    (("main.Ad", 1, 2), {}, "(did you mean main.Add?)"),
    (("main.Watch", 1), {}, "main.Watch cannot be a GoTask: it takes a chan int, which go-delayed cannot decode"),
    (("main.Add", 1), {}, "main.Add: missing b (func Add(a int, b int))"),
    (("main.Add", 1, 2, 3), {}, "main.Add: takes 2 arguments, got 3"),
    (("main.Add", 1, 2), {"c": 3}, "main.Add: no parameter named 'c'"),
    (("main.Add", 1, 2), {"a": 3}, "main.Add: a is given twice"),
    (("main.Add", 1, True), {}, "main.Add: b must be Go int: got bool True"),
    (("main.Add", 1.0, 2), {}, "main.Add: a must be Go int: got float 1.0"),
    (("main.Add", "1", 2), {}, "main.Add: a must be Go int: got str '1'"),
    (("main.Float32", 1e39), {}, "main.Float32: v must be Go float32: 1e+39 is past float32's largest"),
    (("main.Float32", True), {}, "main.Float32: v must be Go float32: got bool True"),
    (("main.Small", -129, 0, 0, 0, 0), {}, "main.Small: a must be Go int8: -129 is out of its range -128..127"),
    (("main.Small", 0, 256, 0, 0, 0), {}, "main.Small: b must be Go uint8: 256 is out of its range 0..255"),
    (("main.Small", 0, 0, -1, 0, 0), {}, "main.Small: c must be Go uint16: -1 is out of its range 0..65535"),
    (("main.Small", 0, 0, 0, 1 << 31, 0), {}, "main.Small: d must be Go int32: 2147483648 is out of its range"),
    (("main.Small", 0, 0, 0, 0, -1), {}, "main.Small: e must be Go uint: -1 is out of its range 0..18446744073709551"),
    (("main.String", b"x"), {}, "main.String: s must be Go string: got bytes b'x'"),
    (("main.String", None), {}, "main.String: s must be Go string: got None, and it cannot be nil"),
    (("main.Struct", {"X": 1, "Y": 2, "Label": "p", "Z": 3}), {},
     "main.Struct: p.Z: Go main.Point has no such field (its fields: X, Y, Label)"),
    (("main.Struct", {"X": 1, "Y": 2}), {}, "main.Struct: p must be Go main.Point: field Label is missing"),
    (("main.Struct", [1, 2]), {}, "main.Struct: p must be Go main.Point: got 2 fields, not 3 (X, Y, Label)"),
    (("main.Struct", {"X": 1, "Y": 2, "Label": 3}), {}, "main.Struct: p.Label must be Go string: got int 3"),
    (("main.Struct", None), {}, "main.Struct: p must be Go main.Point: got None, and it cannot be nil"),
    (("main.Variadic", "p", 1, "x"), {}, "main.Variadic: rest[1] must be Go int: got str 'x'"),
    (("main.Shapes", {"a": {"Corners": [POINT, {**POINT, "X": 0.5}], "Scale": 1, "Parent": None}}, []), {},
     "main.Shapes: shapes['a'].Corners[1].X must be Go int: got float 0.5"),
    (("main.Shapes", {1: None}, []), {}, "main.Shapes: a key of shapes must be Go string: got int 1"),
    (("main.Shapes", {}, "abc"), {}, "main.Shapes: weights must be Go []float32: got str 'abc'"),
    (("main.Counts", {70000: 1}, [1, 2, 3], None), {}, "a key of counts must be Go int16: 70000 is out of its range"),
    (("main.Counts", {}, [1, 2], None), {}, "main.Counts: triple must be Go [3]int: got 2 items, not 3"),
    (("main.Blob", b"", True, datetime.datetime(2024, 5, 1)), {}, "main.Blob: at must be Go time.Time: "
     "datetime.datetime(2024, 5, 1, 0, 0) is naive"),
    (("main.Blob", b"", 1, AT), {}, "main.Blob: flag must be Go bool: got int 1"),
])
def test_a_task_the_contract_refuses_names_the_handler_the_parameter_and_the_go_type(contract, call, kwargs, message):
    with pytest.raises(ContractError) as caught:
        contract.task(*call, **kwargs)
    assert message in str(caught.value)
    assert isinstance(caught.value, DelayedError)


@pytest.mark.parametrize("data, message", [
    ({"version": 2, "handlers": {}}, "not a contract of version 1"),
    ({"version": 1, "handlers": []}, "handlers and refused must be objects"),
    ({"version": 1, "handlers": {"main.F": {"params": [{"name": "a", "type": {"kind": "chan", "go": "chan int"}}]}}},
     "handler main.F, param a: unknown kind 'chan'"),
    ({"version": 1, "handlers": {"main.F": {"params": [{"name": "a", "type": {"kind": "int", "go": "int", "bits": 12,
                                                                                "signed": True}}]}}},
     "handler main.F, param a: int cannot have 12 bits"),
    ({"version": 1, "handlers": {"main.F": {"variadic": True, "params": [{"name": "a", "type": {"kind": "string",
                                                                                                "go": "string"}}]}}},
     "handler main.F: variadic, but its last param is not a slice"),
])
def test_a_malformed_contract_is_refused_as_it_loads(data, message):
    with pytest.raises(ContractError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Contract.from_dict(data)


def test_an_unreadable_contract_file_is_a_contract_error(tmp_path):
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ContractError, match="cannot read the contract"):
        Contract.load(tmp_path / "bad.json")


def test_an_unchecked_gotask_never_imports_the_contract_code():
    code = ("import sys, delayed; from delayed import ContractError, GoTask, Float32; "
            "GoTask('main.F', [1, Float32(2)]).serialize(); "
            "print(sorted(m for m in sys.modules if m.startswith('delayed.contract')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr

