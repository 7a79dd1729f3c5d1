"""go-delayed's own bytes against ours: go_fixtures/, written by interop/cmd/fixtures.

Each case is a blob go-delayed's NewGoTask or NewPyTask wrote, and the Python call a user would
write for the same task (evaluated here with GoTask, PyTask and Float32 in scope). The manifest
says how the two compare: "identical" bytes; "decoded", where our bytes differ on purpose, for a
reason this file checks, and both decode to the same call; "refused", where go-delayed writes
something no PyTask can be and decode_task must say why. Needs no Go: the blobs are committed.
"""
import json
import re
import struct
from pathlib import Path

import msgpack
import pytest

from delayed.errors import MalformedTaskError
from delayed.wire.task import Float32, GoTask, PyTask, decode_task

FIXTURES = Path(__file__).resolve().parent.parent / "go_fixtures"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
CASES = MANIFEST["cases"]


def cases(compare):
    return [pytest.param(case, id=case["name"]) for case in CASES if case["compare"] == compare]


def go_blob(case):
    return (FIXTURES / f"{case['name']}.bin").read_bytes()


def our_task(case):
    return eval(case["python"], {"GoTask": GoTask, "PyTask": PyTask, "Float32": Float32})


def plain(value):
    """A value as a worker receives it, for comparing by repr (which tells 1, 1.0, True and nan apart):
    a Float32 as the float32 it stands for, tuples as lists, maps as sorted pairs (Go's order is random)."""
    if isinstance(value, Float32):
        return struct.unpack(">f", struct.pack(">f", value.value))[0]
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return sorted(([plain(key), plain(item)] for key, item in value.items()), key=repr)
    return value


def call(task):
    """What a worker would run: which kind of task, the function, the arguments."""
    if isinstance(task, GoTask):
        return repr(("GoTask", task.func_path, plain(task.args)))
    return repr(("PyTask", task.func_path, plain(list(task.args)), plain(task.kwargs), task.retry))


def brief(blob):
    text = blob.hex()
    return text if len(text) <= 120 else f"{text[:100]}... ({len(blob)} bytes)"


def test_manifest_lists_every_blob_and_the_pinned_go_delayed():
    names = [case["name"] for case in CASES]
    assert len(names) >= 80
    assert len(set(names)) == len(names)
    assert {path.stem for path in FIXTURES.glob("*.bin")} == set(names)
    for case in CASES:
        assert case["go"].startswith(("delayed.NewGoTask(", "delayed.NewPyTask(")), case["name"]
        assert case["compare"] in ("identical", "decoded", "refused"), case["name"]
        assert bool(case.get("reason")) == (case["compare"] != "identical"), case["name"]
        assert (case["python"] is None) == (case["compare"] == "refused"), case["name"]
    go_mod = (FIXTURES.parent / "interop" / "go.mod").read_text()
    pinned = re.search(r"github\.com/yizhisec/go-delayed (\S+)", go_mod).group(1)
    assert MANIFEST["go_delayed"] == f"github.com/yizhisec/go-delayed {pinned}"


@pytest.mark.parametrize("case", cases("identical"))
def test_we_write_the_bytes_go_delayed_writes(case):
    ours, go = our_task(case).serialize(), go_blob(case)
    assert ours == go, f"{case['python']} wrote {brief(ours)}; {case['go']} wrote {brief(go)}"


def _keakon_form(go, ours):
    # go: [path, args|nil, kwargs|nil]; ours: nil as empty, then trailing empties dropped.
    fields = msgpack.unpackb(go, strict_map_key=False)
    assert len(fields) == 3 and (fields[1] is None or fields[2] is None or not fields[2])
    expected = [fields[0], fields[1] or [], fields[2] or {}]
    while len(expected) > 1 and not expected[-1]:
        expected.pop()
    assert ours == msgpack.packb(expected)


def _nil_payload(go, ours):
    path = msgpack.unpackb(go)[0]
    assert (go, ours) == (msgpack.packb([path, None]), msgpack.packb([path, b"\xc0"]))


def _map_order(go, ours):
    # The same pairs, maybe in another order: the same bytes, maybe rearranged. The fixture holds
    # the smallest of many Go runs, which may happen to be the order we write.
    assert sorted(go) == sorted(ours)


def _nan_bits(go, ours):
    assert (go[-9:].hex(), ours[-9:].hex()) == ("cb7ff8000000000001", "cb7ff8000000000000")
    assert go[:-9] == ours[:-9]


def _float32_in_a_pytask(go, ours):
    assert b"\xca" in go and b"\xca" not in ours


# Every way our bytes may differ from go-delayed's, by the manifest's reason, and how exactly;
# each check but _map_order's fails if the bytes are the same.
HOW_THEY_DIFFER = {
    "we write keakon/delayed 1.x's PyTask, trailing defaults dropped; "
    "NewPyTask always writes [path, args|nil, kwargs|nil]": _keakon_form,
    "NewGoTask(path, nil) writes [path, nil]; "
    "GoTask(path, None) writes the payload bin(c0), as NewGoTask(path) does": _nil_payload,
    "Go randomises map order": _map_order,
    "Go's math.NaN() is 0x7ff8000000000001, Python's float('nan') is 0x7ff8000000000000": _nan_bits,
    "PyTask has no Float32: NewPyTask writes a Go float32 as ca, a Python float is cb": _float32_in_a_pytask,
}


@pytest.mark.parametrize("case", cases("decoded"))
def test_where_we_differ_on_purpose_both_decode_to_the_same_call(case):
    ours, go = our_task(case).serialize(), go_blob(case)
    assert case["reason"] in HOW_THEY_DIFFER, "a new kind of difference: say how it differs in HOW_THEY_DIFFER"
    HOW_THEY_DIFFER[case["reason"]](go, ours)
    assert call(decode_task(go)) == call(decode_task(ours))


@pytest.mark.parametrize("case", cases("identical") + cases("decoded"))
def test_we_decode_go_delayed_blobs_as_the_intended_task(case):
    assert call(decode_task(go_blob(case))) == call(our_task(case))


# What decode_task must say when it refuses a blob, by the manifest's reason.
REFUSALS = {
    "NewPyTask writes a struct's fields as an array: their names are lost":
        "NewPyTask writes a Go struct's fields without their names",
    "kwargs must be a map with string keys": "kwargs must be a map with string keys",
    "args must be an array or nil": "args must be an array or nil",
}


@pytest.mark.parametrize("case", cases("refused"))
def test_what_no_pytask_can_be_is_refused_with_its_cause(case):
    with pytest.raises(MalformedTaskError) as info:
        decode_task(go_blob(case))
    assert REFUSALS[case["reason"]] in str(info.value)
    assert info.value.reason == "malformed"


def test_the_go_struct_kwargs_case_is_covered():
    assert any(case["go"].endswith("Point{X: 1, Y: 2})") for case in CASES if case["compare"] == "refused")
