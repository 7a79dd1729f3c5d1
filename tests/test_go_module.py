"""Our Go module (go/) speaks Python's wire, both ways: its constants are Python's, its blobs are the ones
Python writes for the same call, it decodes the blobs Python writes, and its Lua scripts are Python's.

Go's half is go/delayed/wire_test.go: TestWireSpec writes Go's constants and blobs as JSON, which the
tests here compare with Python's; TestPythonBlobsDecode decodes the golden blobs Python wrote, committed
under go/delayed/testdata/python/ (test_the_golden_python_blobs_are_current keeps them current:
`.venv/bin/python -m tests.test_go_module` writes them again). Without `go` on the PATH the tests that
run it are skipped, saying so in one line; the rest need no Go.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import msgpack
import pytest

from delayed.errors import MalformedTaskError
from delayed.protocol import producer, sweeper_ops
from delayed.wire import dead_letter, ext, keys, options, task, tracking
from delayed.wire.options import Place, TaskOptions, place_of
from delayed.wire.task import Float32, GoTask, PyTask, decode_task
from delayed.wire.tracking import Status

from .conftest import ROOT

GO_MODULE = ROOT / "go"
GO_PACKAGE = GO_MODULE / "delayed"
GOLDEN = GO_PACKAGE / "testdata" / "python"
pytestmark = pytest.mark.timeout(900)  # the first `go test` builds the module and its dependencies

TRACKED_ID = "0123456789abcdef" * 2
PYTHON_CASES = [
    ("go_plain", "GoTask('main.Add', [1, 2])"),
    ("go_no_argument", "GoTask('main.Ping')"),
    ("go_no_argument_with_options", "GoTask('main.Ping', max_retries=3)"),
    ("go_every_option", "GoTask('main.Resize', {'w': 640}, max_retries=5, backoff=1.5, time_limit=30)"),
    ("go_float_seconds", "GoTask('main.Resize', 1, backoff=0.0, time_limit=30.0)"),
    ("go_float32", "GoTask('main.Reading', ['r', Float32(0.25)], max_retries=1)"),
    ("go_bin16_payload", "GoTask('main.Blob', b'x' * 300, max_retries=1)"),
    ("go_tracked", "GoTask('main.Add', [1, 2], options=TaskOptions(max_retries=1, attempt=1, crashes=2, id=ID))"),
    ("go_tracked_str16_name", "GoTask('main.' + 'F' * 300, options=TaskOptions(id=ID))"),
    ("go_unique", "GoTask('main.Add', 1, options=TaskOptions(unique_key='report', unique_token='00ff00ff00ff00ff'))"),
    ("go_unknown_option", "GoTask('main.Add', 1, options={'max_retries': 1, 'future': [1, 'x']})"),
    ("py_no_arguments", "PyTask('tasks:add')"),
    ("py_plain", "PyTask('tasks:add', [1, 2])"),
    ("py_every_option", "PyTask('tasks:add', [1], {'b': 2}, max_retries=2, backoff=0.5, time_limit=2.5)"),
    ("py_backoff_function", "PyTask('tasks:add', max_retries=2, backoff='tasks:curve')"),
    ("py_keakon_retry", "PyTask('tasks:add', [1], retry=3)"),
    ("py_tracked", "PyTask('tasks:add', [1], options=TaskOptions(attempt=1, id=ID))"),
    ("py_kwargs_ending_like_a_tracked_blob", "PyTask('tasks:add', [], {'id': ID})"),
]
"""Blobs Python writes that Go must decode: (name, the call; ID is TRACKED_ID)."""
REFUSED_OPTIONS = [
    ("refused_options_not_a_map", [1]),
    ("refused_negative_max_retries", {"max_retries": -1}),
    ("refused_fractional_max_retries", {"max_retries": 1.5}),
    ("refused_too_many_crashes", {"crashes": 2 ** 31}),
    ("refused_boolean_attempt", {"attempt": True}),
    ("refused_zero_time_limit", {"time_limit": 0}),
    ("refused_time_limit_as_text", {"time_limit": "5"}),
    ("refused_time_limit_past_ten_years", {"time_limit": 10 ** 12}),
    ("refused_nan_backoff", {"backoff": float("nan")}),
    ("refused_backoff_no_function", {"backoff": "soon"}),
    ("refused_empty_unique_key", {"unique_key": ""}),
    ("refused_short_id", {"id": "0123"}),
]
"""Options maps no task may carry: a GoTask's blob ["main.F", bin, options] with each is malformed to
Python's decode_task and to Go's alike."""


def make(call: str) -> Any:
    """The task a case's Python call makes."""
    return eval(call, {"GoTask": GoTask, "PyTask": PyTask, "TaskOptions": TaskOptions, "Float32": Float32})


def golden_files() -> Dict[str, bytes]:
    """The files of go/delayed/testdata/python/ as this version of Python writes them: NAME.bin per case
    and manifest.json saying what each holds (kind, func, a GoTask's payload, the options map and which of
    them Python does not know), or, for a blob of REFUSED_OPTIONS, that it is malformed and why."""
    files, cases = {}, []
    for name, call in PYTHON_CASES:
        call = call.replace("ID", repr(TRACKED_ID))
        made = make(call)
        blob = made.serialize()
        files[f"{name}.bin"] = blob
        entry: Dict[str, Any] = {"name": name, "python": call, "kind": "go" if isinstance(made, GoTask) else "py",
                                 "func": made.func_path}
        if isinstance(made, GoTask):
            entry["payload"] = msgpack.unpackb(blob)[1].hex()
        entry["options"] = made.options.wire_map()
        entry["unknown"] = list(made.options.unknown)
        cases.append(entry)
    for name, carried in REFUSED_OPTIONS:
        blob = msgpack.packb(["main.F", msgpack.packb(1), carried])
        with pytest.raises(MalformedTaskError) as refused:
            decode_task(blob)
        files[f"{name}.bin"] = blob
        cases.append({"name": name, "kind": "malformed", "func": refused.value.func_path, "error": str(refused.value)})
    manifest = {"about": "Blobs Python's delayed wrote, for go/delayed/wire_test.go's TestPythonBlobsDecode; written by "
                         "`python -m tests.test_go_module` (tests/test_go_module.py checks they are current)",
                "cases": cases}
    files["manifest.json"] = (json.dumps(manifest, indent=1) + "\n").encode()
    return files


def write_golden(directory: Path) -> None:
    """Write the golden blobs into directory, replacing what is there."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.iterdir():
        stale.unlink()
    for name, content in golden_files().items():
        (directory / name).write_bytes(content)


def test_the_golden_python_blobs_are_current():
    committed = {path.name: path.read_bytes() for path in GOLDEN.iterdir()}
    assert committed == golden_files(), "go/delayed/testdata/python/ is stale: run .venv/bin/python -m tests.test_go_module"


def test_go_s_lua_scripts_are_the_python_package_s():
    ours = {path.name: path.read_bytes() for path in (ROOT / "delayed" / "protocol" / "lua").glob("*.lua")}
    go = {path.name: path.read_bytes() for path in (GO_PACKAGE / "lua").glob("*.lua")}
    assert ours and sorted(go) == sorted(ours), "make go-lua"
    assert [name for name in ours if go[name] != ours[name]] == [], "make go-lua"


@pytest.fixture(scope="module")
def go_run(tmp_path_factory) -> Dict[str, Any]:
    """Run Go's half once: TestWireSpec (its JSON) and TestPythonBlobsDecode (pass or fail, with its output).
    Without Go, every test that needs it is skipped here, in one line."""
    if shutil.which("go") is None:
        pytest.skip("!!!!!!!! GO WIRE TESTS DID NOT RUN: no go command on PATH, so the Go module's wire was not "
                    "checked against Python's !!!!!!!!")
    spec_file = tmp_path_factory.mktemp("go") / "spec.json"
    done = subprocess.run(["go", "test", "-count=1", "-json", "-run", "^(TestWireSpec|TestPythonBlobsDecode)$", "./delayed"],
                          cwd=GO_MODULE, env={**os.environ, "DELAYED_WIRE_SPEC": str(spec_file)},
                          capture_output=True, text=True, timeout=840)
    outcomes: Dict[str, str] = {}
    output: Dict[str, List[str]] = {}
    for line in done.stdout.splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        test = event.get("Test", "").split("/")[0]
        if event.get("Action") == "output" and test:
            output.setdefault(test, []).append(event["Output"])
        elif event.get("Action") in ("pass", "fail") and test and "/" not in event.get("Test", ""):
            outcomes[test] = event["Action"]
    assert outcomes.keys() == {"TestWireSpec", "TestPythonBlobsDecode"}, done.stdout[-3000:] + done.stderr[-3000:]
    return {"outcomes": outcomes, "output": {test: "".join(lines) for test, lines in output.items()},
            "spec": json.loads(spec_file.read_text()) if outcomes["TestWireSpec"] == "pass" else None}


def decodes_every_blob_python_writes(go_run: Dict[str, Any]) -> None:
    """Go's TestPythonBlobsDecode passed: the golden blobs decode to their func paths, payloads and options."""
    assert go_run["outcomes"]["TestPythonBlobsDecode"] == "pass", go_run["output"]["TestPythonBlobsDecode"]


def has_python_s_wire_constants(spec: Dict[str, Any]) -> None:
    modules = {"keys": keys, "options": options, "task": task, "dead_letter": dead_letter, "tracking": tracking,
               "producer": producer, "sweeper_ops": sweeper_ops, "ext": ext}
    for path, value in spec["constants"].items():
        module, *names = path.split(".")
        ours: Any = modules[module]
        for name in names:
            ours = getattr(ours, name)
        assert (ours.hex() if isinstance(value, dict) else ours) == (value["hex"] if isinstance(value, dict) else value), path
    assert set(spec["options"]) == {name for name in TaskOptions.__dataclass_fields__
                                    if name != "unknown" and place_of(name) is Place.MAP}
    assert spec["scheduled_kinds"] == {kind: first.decode() for first, kind in keys.SCHEDULED_KINDS.items()}
    assert {value for path, value in spec["constants"].items() if path.startswith("tracking.Status.")} == set(Status)


def lists_every_wire_constant_of_its_source(spec: Dict[str, Any]) -> None:
    """A key suffix, a reason, a status or an option name added to the Go module without its line in
    wireConstants would go unchecked: every such constant's value in go/delayed/*.go must be one the spec holds."""
    declared = re.compile(r'^\s*(\w*(?:Suffix|Infix|Prefix)|Reason\w+|opt[A-Z]\w*|Task[A-Z]\w*)\s*(?:\w+\s*)?=\s*"([^"]*)"',
                          re.MULTILINE)
    found = {name: value for path in GO_PACKAGE.glob("*.go") if not path.name.endswith("_test.go")
             for name, value in declared.findall(path.read_text())}
    listed = {value for value in spec["constants"].values() if isinstance(value, str)} | set(spec["options"])
    assert len(found) > 20 and {name: value for name, value in found.items() if value not in listed} == {}


def names_a_queue_s_keys_as_python_does(spec: Dict[str, Any]) -> None:
    q = keys.QueueKeys.of("q")
    prefixes = ("task_prefix", "limit_running_prefix", "limit_waiting_prefix", "limit_starts_prefix",
                "limit_reserved_prefix")
    assert spec["queue_keys"] == {**{name: getattr(q, name) for name in q.__dataclass_fields__},
                                  **{name: getattr(q, name) for name in prefixes}}
    for name, ids in spec["worker_ids"].items():
        ours = keys.QueueKeys.of(name)
        assert len(set(ids)) == 3 and {ours.main_worker_id(worker_id) for worker_id in ids} == {ids[0]}, ids
        assert ids[0].startswith(keys.WORKER_ID_PREFIX) and ids[0].endswith(ours.worker_id_suffix)
    assert spec["hash_tags"] == {name: keys.hash_tag(name) for name in spec["hash_tags"]}


def same_call(a: Any, b: Any) -> bool:
    """Whether two decoded tasks are the same call: kind, function, arguments and options."""
    if type(a) is not type(b) or a.func_path != b.func_path or a.options != b.options:
        return False
    if isinstance(a, GoTask):
        return bool(a.args == b.args)
    return bool((list(a.args), a.kwargs, a.retry) == (list(b.args), b.kwargs, b.retry))


def writes_python_s_blobs_for_the_same_call(spec: Dict[str, Any]) -> None:
    """Byte for byte where the case says identical; else the same call once decoded, with bytes that
    differ (go-delayed's NewPyTask writes nil where Python writes [] or {}; Go writes a whole number of
    seconds as an integer). Python decodes every blob Go writes."""
    assert len(spec["cases"]) >= 10
    wrong = []
    for case in spec["cases"]:
        go_blob, ours = bytes.fromhex(case["blob"]), make(case["python"])
        identical = go_blob == ours.serialize()
        if identical != (case["compare"] == "identical") or not same_call(decode_task(go_blob), decode_task(ours.serialize())):
            wrong.append((case["name"], case["compare"], go_blob.hex(), ours.serialize().hex()))
    assert wrong == []


def locks_a_unique_call_as_python_does(spec: Dict[str, Any]) -> None:
    """A unique task without unique_key takes the lock named by the digest of the blob Python writes for
    its call, its headers aside (producer.unique_digest), from Go too: the same lock for the same call, wherever both write
    its options alike (Go writes a whole number of seconds as an integer, Python 1.0 as a float)."""
    compared, wrong = 0, []
    for case in spec["cases"]:
        ours = make(case["python"])
        go_options = decode_task(bytes.fromhex(case["blob"])).options.wire_map()
        if msgpack.packb(go_options) == msgpack.packb(ours.options.wire_map()):
            compared += 1
            if case["digest"] != producer.unique_digest(ours):
                wrong.append(case["name"])
    assert wrong == [] and compared == len(spec["cases"]) - 1  # all but go_whole_seconds


def counts_a_crash_in_a_python_blob_as_python_does(spec: Dict[str, Any]) -> None:
    """Go's sweeper rewrites a blob Python wrote to count a crash (blobWithOptions): the same call, its
    crashes one higher, as Python's own sweeper writes it (with_options)."""
    golden = {name: (GOLDEN / f"{name}.bin").read_bytes() for name, _ in PYTHON_CASES}
    assert spec["crash_counted"].keys() == golden.keys()
    wrong = []
    for name, rewritten in spec["crash_counted"].items():
        ours = decode_task(golden[name])
        counted = ours.with_options(crashes=ours.options.crashes + 1)
        if not same_call(decode_task(bytes.fromhex(rewritten)), decode_task(counted.serialize())):
            wrong.append((name, rewritten, counted.serialize().hex()))
    assert wrong == []


GO_CHECKS = [decodes_every_blob_python_writes, has_python_s_wire_constants, lists_every_wire_constant_of_its_source,
             names_a_queue_s_keys_as_python_does, writes_python_s_blobs_for_the_same_call,
             locks_a_unique_call_as_python_does, counts_a_crash_in_a_python_blob_as_python_does]
"""What Go's half must show; all but the first read TestWireSpec's JSON."""


@pytest.mark.parametrize("check", GO_CHECKS, ids=[check.__name__ for check in GO_CHECKS])
def test_go(go_run, check):
    """One test, one skip line without Go, one item per check."""
    if check is decodes_every_blob_python_writes:
        check(go_run)
    else:
        assert go_run["spec"] is not None, go_run["output"].get("TestWireSpec")
        check(go_run["spec"])


if __name__ == "__main__":
    write_golden(GOLDEN)
    print(f"wrote {len(PYTHON_CASES) + len(REFUSED_OPTIONS)} blobs and manifest.json into {GOLDEN.relative_to(ROOT)}",
          file=sys.stderr)
