"""Contracts: GoTasks checked against a Go package's handler types (delayed.contract), and the typed
code `delayed contract python|gotasks` writes for either side."""
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

import msgpack
import pytest

from delayed import ContractError, DelayedError, Float32, GoTask
from delayed.contract import Contract
from delayed.contract.python_module import python_module
from delayed.wire.task import decode_task

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



def delayed_command(*words, cwd):
    """`python -m delayed WORDS` run in cwd, importing this checkout's delayed."""
    return subprocess.run([sys.executable, "-m", "delayed", *map(str, words)], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


GOOD_CALLS = """\
import datetime
from delayed import Float32, GoTask
from jobs_tasks import Point, add, blob, float32, no_arg, pointer, shapes, struct, variadic

point: Point = {"X": 1, "Y": 2, "Label": "p"}
tasks: list[GoTask] = [
    add(1, 2), no_arg(), float32(0.5), float32(Float32(0.5)), struct(point), pointer(None), variadic("p", 1, 2),
    shapes({"a": {"Corners": [point], "Scale": 1.5, "Parent": None}}, [1.0, Float32(2)]),
    blob(b"x", True, datetime.datetime.now(datetime.timezone.utc)),
]
"""
BAD_CALLS = [
    'add(1, "2")',
    "add(1)",
    'struct({"X": 1, "Y": 2})',
    'struct({"X": 1, "Y": 2, "Label": "p", "Z": 3})',
    'variadic("p", 1, "x")',
    "blob(b'x', True, 5)",
    'shapes({1: None}, [])',
]


@pytest.fixture(scope="module")
def jobs_tasks(tmp_path_factory):
    """The module `delayed contract python` writes for tests/contract/handlers.contract.json, in its own folder."""
    folder = tmp_path_factory.mktemp("python")
    done = delayed_command("contract", "python", HANDLERS, "-o", "jobs_tasks.py", cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder


def test_the_python_module_has_a_function_per_handler_with_its_go_signature(jobs_tasks):
    code = ("import jobs_tasks as t; print(t.add.__doc__); print(t.variadic('p', 1, 2).serialize().hex()); "
            "print(sorted(name for name in vars(t) if not name.startswith('_')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=jobs_tasks, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    doc, blob, names = done.stdout.splitlines()
    assert doc == "main.Add: func Add(a int, b int)", done.stderr
    assert bytes.fromhex(blob) == GoTask("main.Variadic", ["p", [1, 2]]).serialize()
    assert "main.Watch: takes a chan int" in (jobs_tasks / "jobs_tasks.py").read_text()  # said, not a function
    for name in ["add", "small", "string", "no_arg", "several", "float32", "struct", "pointer", "shapes", "variadic",
                 "blob", "counts", "Point", "Shape"]:
        assert name in names


def test_the_python_module_checks_at_run_time_too(jobs_tasks):
    code = "import jobs_tasks as t; t.small(200, 0, 0, 0, 0)"
    done = subprocess.run([sys.executable, "-c", code], cwd=jobs_tasks, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "ContractError: main.Small: a must be Go int8: 200 is out of its range -128..127" in done.stderr


def test_mypy_checks_calls_of_the_python_module(jobs_tasks):
    (jobs_tasks / "good.py").write_text(GOOD_CALLS)
    (jobs_tasks / "bad.py").write_text("from jobs_tasks import add, blob, shapes, struct, variadic\n\n"
                                       + "".join(call + "\n" for call in BAD_CALLS))
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
                           "jobs_tasks.py", "good.py", "bad.py"], cwd=jobs_tasks, capture_output=True, text=True,
                          env={**os.environ, "MYPYPATH": str(ROOT)})
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert {line.split(":")[0] for line in errors} == {"bad.py"}, done.stdout
    assert {int(line.split(":")[1]) for line in errors} == set(range(3, 3 + len(BAD_CALLS))), done.stdout


def test_contract_python_refuses_a_malformed_contract(tmp_path):
    (tmp_path / "bad.json").write_text('{"version": 1, "handlers": {"main.F": {"params": [{"name": "a"}]}}}')
    done = delayed_command("contract", "python", "bad.json", "-o", "out.py", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, "delayed contract: handler main.F, param a: a type must be an "
                                                 "object, got None\n")
    assert not (tmp_path / "out.py").exists()


TASKS = '''\
from typing import Any, Dict, List, Optional, Sequence


def add(a: int, b: int) -> int:
    return a + b


def send_email(to: str, body: bytes, *, cc: Optional[List[str]] = None, urgent: bool = False) -> None:
    pass


def many(prefix: str, *items: float, options: Dict[str, Any]) -> None:
    pass


def nothing() -> None:
    pass


def typed(range: Optional[int], m: Sequence[Dict[int, float]], x: "Optional[bytes]") -> None:
    pass


def _private(x: int) -> None:
    pass
'''
CONSTRUCTORS = [
    'func Add(a int64, b int64) *delayed.PyTask {\n\treturn delayed.NewPyTask("gotasks_mod:add", '
    '[]interface{}{a, b}, nil)\n}',
    'func SendEmail(to string, body []byte, cc []string, urgent bool) *delayed.PyTask {\n\treturn delayed.NewPyTask('
    '"gotasks_mod:send_email", []interface{}{to, body}, map[string]interface{}{"cc": cc, "urgent": urgent})\n}',
    'func Many(prefix string, options map[string]interface{}, items ...float64) *delayed.PyTask {\n'
    '\targs := []interface{}{prefix}\n\tfor _, item := range items {\n\t\targs = append(args, item)\n\t}\n'
    '\treturn delayed.NewPyTask("gotasks_mod:many", args, map[string]interface{}{"options": options})\n}',
    'func Nothing() *delayed.PyTask {\n\treturn delayed.NewPyTask("gotasks_mod:nothing", nil, nil)\n}',
    "func Typed(range_ *int64, m []map[int64]float64, x []byte) *delayed.PyTask {",
]


@pytest.fixture
def tasks_module(tmp_path):
    (tmp_path / "gotasks_mod.py").write_text(TASKS)
    return tmp_path


def test_contract_gotasks_writes_a_typed_constructor_per_public_function(tasks_module):
    done = delayed_command("contract", "gotasks", "gotasks_mod", "--package", "jobs", "-o", "jobs.go",
                           cwd=tasks_module)
    assert done.returncode == 0, done.stderr
    source = (tasks_module / "jobs.go").read_text()
    assert source.startswith("// Code generated by delayed contract gotasks gotasks_mod --package jobs; DO NOT EDIT."
                             "\n\npackage jobs\n\nimport \"github.com/yizhisec/go-delayed/delayed\"\n")
    assert [name for name in ("Add", "SendEmail", "Many", "Nothing", "Typed", "Private") if f"func {name}(" in source
            ] == ["Add", "SendEmail", "Many", "Nothing", "Typed"]
    for constructor in CONSTRUCTORS:
        assert constructor in source
    assert "// SendEmail is the PyTask of gotasks_mod:send_email(to: str, body: bytes, *, cc: " in source


def test_contract_gotasks_takes_only_the_functions_named(tasks_module):
    done = delayed_command("contract", "gotasks", "gotasks_mod", "--func", "nothing", "--func", "add", "--package",
                           "jobs", "-o", "jobs.go", cwd=tasks_module)
    assert done.returncode == 0, done.stderr
    source = (tasks_module / "jobs.go").read_text()
    assert source.index("func Nothing(") < source.index("func Add(") and "func Many(" not in source
    done = delayed_command("contract", "gotasks", "gotasks_mod", "--func", "_private", "--package", "jobs",
                           "-o", "jobs.go", cwd=tasks_module)
    assert (done.returncode, done.stderr) == (2, "delayed contract: not public functions of gotasks_mod: _private\n")


def test_contract_gotasks_lists_every_hint_it_cannot_type(tmp_path):
    (tmp_path / "loose.py").write_text("import datetime\nfrom typing import Dict, Tuple\n\n\n"
                                       "def f(a, b: datetime.datetime, c: Dict[bytes, int], **rest: int) -> None:\n"
                                       "    pass\n\n\ndef g(t: Tuple[int, int]) -> None:\n    pass\n\n\n"
                                       "def h(x: 'Missing') -> None:\n    pass\n")
    done = delayed_command("contract", "gotasks", "loose", "--package", "jobs", "-o", "loose.go", cwd=tmp_path)
    assert done.returncode == 2
    supported = ("has no Go type (int, float, str, bytes, bool, Any, Optional, list/Sequence and dict/Mapping of "
                 "those do)")
    assert done.stderr.splitlines() == [
        "delayed contract: hints with no Go type, so no Go file written:",
        "  loose:f: a has no type hint",
        f"  loose:f: b: datetime {supported}",
        "  loose:f: c: Dict[bytes, int]: map keys must be str or int",
        "  loose:f: **rest takes any keywords, which a typed constructor cannot list",
        f"  loose:g: t: Tuple[int, int] {supported}",
        "  loose:h: its type hints do not resolve (NameError: name 'Missing' is not defined)",
    ]
    assert not (tmp_path / "loose.go").exists()


def test_the_go_file_passes_gofmt_and_go_vet_and_writes_pytasks_our_worker_decodes(tasks_module):
    if shutil.which("go") is None or shutil.which("gofmt") is None:
        pytest.skip("`go` is not on PATH: cannot check the generated Go")
    module = tasks_module / "gomod"
    (module / "jobs").mkdir(parents=True)
    (module / "main").mkdir()
    done = delayed_command("contract", "gotasks", "gotasks_mod", "--package", "jobs", "-o", "gomod/jobs/jobs.go",
                           cwd=tasks_module)
    assert done.returncode == 0, done.stderr
    requires = re.findall(r"(?ms)^require \(.*?^\)", (ROOT / "interop" / "go.mod").read_text())
    (module / "go.mod").write_text("module example.com/gotasks\n\ngo 1.21\n\n" + "\n\n".join(requires) + "\n")
    shutil.copy(ROOT / "interop" / "go.sum", module / "go.sum")
    (module / "main" / "main.go").write_text(MAIN_GO)
    assert subprocess.run(["gofmt", "-l", "."], cwd=module, capture_output=True, text=True).stdout == ""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off"}
    vet = subprocess.run(["go", "vet", "./..."], cwd=module, capture_output=True, text=True, env=env)
    assert vet.returncode == 0, vet.stderr
    ran = subprocess.run(["go", "run", "./main"], cwd=module, capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    tasks = [decode_task(bytes.fromhex(line)) for line in ran.stdout.split()]
    assert [(task.func_path, task.args, task.kwargs) for task in tasks] == [
        ("gotasks_mod:add", [1, 2], {}),
        ("gotasks_mod:send_email", ["me", b"hi"], {"cc": None, "urgent": True}),
        ("gotasks_mod:many", ["p", 1.5, 2.0], {"options": {"k": "v"}}),
        ("gotasks_mod:nothing", (), {}),
        ("gotasks_mod:typed", [None, [{3: 0.5}], b"x"], {}),
    ]


MAIN_GO = """package main

import (
	"encoding/hex"
	"fmt"

	"example.com/gotasks/jobs"
	"github.com/yizhisec/go-delayed/delayed"
)

func main() {
	for _, task := range []*delayed.PyTask{
		jobs.Add(1, 2),
		jobs.SendEmail("me", []byte("hi"), nil, true),
		jobs.Many("p", map[string]interface{}{"k": "v"}, 1.5, 2),
		jobs.Nothing(),
		jobs.Typed(nil, []map[int64]float64{{3: 0.5}}, []byte("x")),
	} {
		blob, err := task.Serialize()
		if err != nil {
			panic(err)
		}
		fmt.Println(hex.EncodeToString(blob))
	}
}
"""


def test_python_names_that_would_clash_or_are_keywords_are_qualified():
    text = {"kind": "string", "go": "string"}
    source = python_module({"version": 1, "handlers": {
        "main.Resize": {"signature": "func Resize(s string)", "params": [{"name": "s", "type": text}]},
        "example.com/svc/jobs.Resize": {"signature": "func Resize(from string, _ string)",
                                        "params": [{"name": "from", "type": text}, {"name": "_", "type": text}]},
        "main.Class": {"signature": "func Class()", "params": []}}}, "x.json")
    for line in ["def main_resize(s: str) -> GoTask:", "def jobs_resize(from_: str, arg1: str) -> GoTask:",
                 "    return _CONTRACT.task('example.com/svc/jobs.Resize', from_, arg1)", "def class_() -> GoTask:"]:
        assert line in source.splitlines()


GOAPP = CONTRACTS / "goapp.contract.json"
"""The contract `delayed contract go` writes for tests/contract/goapp (a handler for every kind)."""
SHAPE = {"Name": "n", "Corner": POINT, "Tags": {"a": [1, 2], "b": None}, "Next": None}


@pytest.mark.parametrize("call, expected", [
    (("main.Ints", -128, -32768, -(1 << 31), -(1 << 63), 1 << 62), [-128, -32768, -(1 << 31), -(1 << 63), 1 << 62]),
    (("main.Uints", 255, 65535, (1 << 32) - 1, (1 << 64) - 1, 0, 255), [255, 65535, (1 << 32) - 1, (1 << 64) - 1, 0,
                                                                         255]),
    (("main.Floats", 1, 2, 0.5), [Float32(1), 2.0, Float32(0.5)]),
    (("main.Text", "s", b"b", False), ["s", b"b", False]),
    (("main.Collections", ["a"], (1, 2, 3), {"x": 1}, {-1: True}), [["a"], [1, 2, 3], {"x": 1.0}, {-1: True}]),
    (("main.Nested", SHAPE, [None, POINT], {"Point": POINT, "Note": "n"}),
     [["n", [1, -2, "p"], {"a": [1, 2], "b": None}, None], [None, [1, -2, "p"]], [[1, -2, "p"], "n"]]),
    (("main.Pointer", None), None),
    (("main.Pointer", 3), 3),
    (("main.Anything", {"k": [1]}, None, {"a": Float32(1)}), [{"k": [1]}, None, {"a": Float32(1)}]),
    (("main.When", AT), msgpack.Timestamp.from_datetime(AT)),
    (("main.Variadic", "p", 1), ["p", [1]]),
    (("main.NoArg",), None),
    (("main.Returns", 1), 1),
])
def test_every_kind_go_reads_from_a_package_converts(call, expected):
    task = Contract.load(GOAPP).task(*call)
    assert task.args == expected
    assert task.serialize() == GoTask(call[0], expected).serialize()


@pytest.mark.parametrize("call, message", [
    (("main.Watch", None), "main.Watch cannot be a GoTask: it takes a chan int (parameter c)"),
    (("main.Chain", None), "a recursive type, which a contract cannot describe"),
    (("main.Uints", 0, 0, 0, 0, 0, 256), "main.Uints: f must be Go byte: 256 is out of its range 0..255"),
    (("main.Floats", 1, 2, 1e300), "main.Floats: c must be Go main.Celsius: 1e+300 is past float32's largest"),
    (("main.Nested", {**SHAPE, "hidden": 1}, [], {"Point": POINT, "Note": "n"}),
     "main.Nested: s.hidden: Go main.Shape has no such field (its fields: Name, Corner, Tags, Next)"),
    (("main.Nested", {**SHAPE, "Tags": {"a": ["x"]}}, [], {"Point": POINT, "Note": "n"}),
     "main.Nested: s.Tags['a'][0] must be Go int: got str 'x'"),
    (("main.Collections", [], [1, 2, 3], {}, {"1": True}), "main.Collections: a key of k must be Go int: got str '1'"),
])
def test_what_go_reads_from_a_package_refuses(call, message):
    with pytest.raises(ContractError) as caught:
        Contract.load(GOAPP).task(*call)
    assert message in str(caught.value)


def test_mypy_checks_the_module_for_a_package_go_read(tmp_path):
    done = delayed_command("contract", "python", GOAPP, "-o", "goapp_tasks.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (tmp_path / "calls.py").write_text(
        "import datetime\nfrom goapp_tasks import Labelled, Shape, floats, nested, uints, when\n\n"
        'shape: Shape = {"Name": "n", "Corner": {"X": 1, "Y": 2, "Label": "p"}, "Tags": {"a": [1]}, "Next": None}\n'
        'labelled: Labelled = {"Point": {"X": 1, "Y": 2, "Label": "p"}, "Note": "n"}\n'
        "tasks = [nested(shape, [None], labelled), floats(1, 2.5, 3), uints(1, 2, 3, 4, 5, 6),\n"
        "         when(datetime.datetime.now(datetime.timezone.utc))]\n"
        'nested(shape, [], {"Point": {"X": 1, "Y": 2}, "Note": "n"})\n')
    checked = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
                              "goapp_tasks.py", "calls.py"], cwd=tmp_path, capture_output=True, text=True,
                             env={**os.environ, "MYPYPATH": str(ROOT)})
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and errors[0].startswith("calls.py:8: error: Missing key \"Label\""), checked.stdout


def test_handlers_named_as_python_builtins_do_not_shadow_the_types_of_later_hints(tmp_path):
    def handler(name: str, *params: tuple) -> dict:
        return {"signature": f"func {name}(...)", "variadic": False,
                "params": [{"name": p, "type": {"kind": kind, "go": go}} for p, kind, go in params]}

    contract = {"version": 1, "package": "main", "refused": {}, "handlers": {
        "main.Bool": handler("Bool", ("b", "bool", "bool")),
        "main.Bytes": handler("Bytes", ("b", "bytes", "[]byte")),
        "main.Flags": handler("Flags", ("on", "bool", "bool"), ("data", "bytes", "[]byte"))}}
    (tmp_path / "builtins.contract.json").write_text(json.dumps(contract))
    done = delayed_command("contract", "python", "builtins.contract.json", "-o", "named_tasks.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    checked = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
                              "named_tasks.py"], cwd=tmp_path, capture_output=True, text=True,
                             env={**os.environ, "MYPYPATH": str(ROOT)})
    assert checked.returncode == 0, checked.stdout
    source = (tmp_path / "named_tasks.py").read_text()
    assert "def bool_(" in source and "def bytes_(" in source and "def flags(" in source
