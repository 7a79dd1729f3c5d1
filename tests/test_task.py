"""Task blobs: keakon/delayed 1.x's PyTask bytes, go-delayed's GoTask bytes, and strict decoding."""
import datetime

import msgpack
import pytest

from delayed.errors import MalformedTaskError, TaskArgumentError
from delayed.wire.options import TaskOptions
from delayed.wire.task import Float32, GoTask, PyTask, decode_task, func_path_of

from . import tasks


@pytest.mark.parametrize("task, fields", [
    (PyTask("m:f"), ["m:f"]),
    (PyTask("m:f", [1, 2]), ["m:f", [1, 2]]),
    (PyTask("m:f", (1, 2)), ["m:f", [1, 2]]),
    (PyTask("m:f", kwargs={"a": 1}), ["m:f", [], {"a": 1}]),
    (PyTask("m:f", [1], {"a": 1}), ["m:f", [1], {"a": 1}]),
    (PyTask("m:f", retry=3), ["m:f", [], {}, 3]),
    (PyTask("m:f", [1], retry=-1), ["m:f", [1], {}, -1]),
])
def test_pytask_drops_trailing_defaults_like_keakon_delayed(task, fields):
    assert task.serialize() == msgpack.packb(fields)


def test_pytask_bytes_are_pinned():
    assert PyTask("m:f").serialize() == bytes.fromhex("91a36d3a66")
    assert PyTask("m:f", [1, "x"], {"k": b"b"}, 2).serialize() == bytes.fromhex("94a36d3a669201a17881a16bc4016202")


def test_pytask_from_a_function_uses_its_module_path():
    assert PyTask(tasks.record, ["t"]).func_path == "tests.tasks:record"


@pytest.mark.parametrize("func", [lambda: None, print.__call__, test_pytask_bytes_are_pinned.__code__])
def test_pytask_refuses_callables_a_worker_could_not_name(func):
    with pytest.raises((ValueError, TypeError)):
        func_path_of(func)


def test_nested_functions_cannot_be_tasks():
    def inner():
        pass

    with pytest.raises(ValueError, match="top level"):
        PyTask(inner)


@pytest.mark.parametrize("args, kwargs", [("ab", None), (None, [("a", 1)])])
def test_pytask_checks_argument_containers(args, kwargs):
    with pytest.raises(TypeError):
        PyTask("m:f", args, kwargs)


@pytest.mark.parametrize("task", [
    PyTask("m:f"),
    PyTask("m:f", [1, [2, {"n": None}], "ü", b"\x00\xff", 1.5, True]),
    PyTask("m:f", [], {"a": -(2**63), "b": 2**64 - 1}, retry=-1),
])
def test_pytask_round_trip(task):
    decoded = PyTask.deserialize(task.serialize())
    assert (decoded.func_path, list(decoded.args), decoded.kwargs, decoded.retry) == \
        (task.func_path, list(task.args), task.kwargs, task.retry)


def test_go_delayed_new_pytask_decodes():
    # go-delayed's NewPyTask("m:f", nil, nil) and NewPyTask("m:f", []interface{}{1, "x"}, map[string]int{"k": 1}),
    # as its msgpack library (shamaton/msgpack v2) writes them.
    empty = PyTask.deserialize(bytes.fromhex("93a36d3a66c0c0"))
    assert (empty.args, empty.kwargs, empty.retry) == ((), {}, 0)
    full = PyTask.deserialize(bytes.fromhex("93a36d3a669201a17881a16b01"))
    assert (full.args, full.kwargs) == ([1, "x"], {"k": 1})


@pytest.mark.parametrize("task, hex_bytes", [
    # What go-delayed's NewGoTask("f", ...) writes for the same arguments.
    (GoTask("f"), "92a166c401c0"),
    (GoTask("f", 1), "92a166c40101"),
    (GoTask("f", [1, 2]), "92a166c403920102"),
    (GoTask("f", [1, "test"]), "92a166c40792" "01a474657374"),
    (GoTask("f", {"a": 1}), "92a166c40481a16101"),
])
def test_gotask_bytes_match_go_delayed(task, hex_bytes):
    assert task.serialize().hex() == hex_bytes


def test_gotask_round_trip():
    task = GoTask.deserialize(GoTask("pkg/path.F", [1, b"x", "y"]).serialize())
    assert (task.func_path, task.args) == ("pkg/path.F", [1, b"x", "y"])


def test_decode_task_tells_the_kinds_apart():
    assert isinstance(decode_task(GoTask("f", [1]).serialize()), GoTask)
    assert isinstance(decode_task(PyTask("m:f", [1]).serialize()), PyTask)
    with pytest.raises(MalformedTaskError) as info:
        PyTask.deserialize(GoTask("main.F").serialize())
    assert (info.value.reason, info.value.func_path) == ("go_task", "main.F")


@pytest.mark.parametrize("blob", [
    b"",
    b"\xc1",                                      # reserved byte
    b"\x93\xa3m:f",                               # truncated
    msgpack.packb("m:f") + b"\x00",               # extra data
    msgpack.packb("m:f"),                         # a bare string (keakon's argument-less GoTask)
    msgpack.packb({"f": 1}),
    msgpack.packb([]),
    msgpack.packb([1, [], {}]),
    msgpack.packb(["m:f", "args"]),
    msgpack.packb(["m:f", [], {1: 2}]),
    msgpack.packb(["m:f", [], [1, 2]]),
    msgpack.packb(["m:f", [], {}, "3"]),
    msgpack.packb(["m:f", [], {}, True]),
    msgpack.packb(["m:f", [], {}, 0, 1]),
    b"\x91\xa2\xff\xfe",                          # invalid UTF-8 in the func path
])
def test_malformed_blobs_raise_with_a_reason(blob):
    with pytest.raises(MalformedTaskError) as info:
        decode_task(blob)
    assert info.value.reason == "malformed"
    assert str(info.value)


def test_options_ride_in_a_fifth_element_only_when_set():
    assert PyTask("m:f", time_limit=2.5).serialize() == msgpack.packb(["m:f", [], {}, 0, {"time_limit": 2.5}])
    task = PyTask.deserialize(PyTask("m:f", [1], retry=2, options={"time_limit": 3, "future": "kept"}).serialize())
    assert (task.time_limit, task.options.unknown["future"]) == (3, "kept")
    assert task.with_retry(1).options == task.options.replace(retry=1)
    assert PyTask("m:f", [1]).serialize() == msgpack.packb(["m:f", [1]])


@pytest.mark.parametrize("limit, error", [(0, ValueError), (-1, ValueError), ("5", TypeError), (True, TypeError)])
def test_a_time_limit_must_be_a_positive_number(limit, error):
    with pytest.raises(error, match="time_limit"):
        PyTask("m:f", time_limit=limit)
    with pytest.raises(MalformedTaskError):
        decode_task(msgpack.packb(["m:f", [], {}, 0, {"time_limit": limit}]))


def test_options_must_be_a_map_with_string_keys():
    for options in ([1], {1: 2}):
        with pytest.raises(MalformedTaskError, match="options"):
            decode_task(msgpack.packb(["m:f", [], {}, 0, options]))


@pytest.mark.parametrize("options, error", [({"max_retries": -1}, ValueError), ({"max_retries": 1.5}, TypeError),
                                            ({"attempt": True}, TypeError), ({"backoff": -2}, ValueError),
                                            ({"backoff": [1]}, TypeError)])
def test_retry_options_are_checked(options, error):
    with pytest.raises(error, match=next(iter(options))):
        PyTask("m:f", options=options)
    with pytest.raises(MalformedTaskError):
        decode_task(msgpack.packb(["m:f", [], {}, 0, options]))


def test_retry_options_round_trip_and_are_kept_by_with_options():
    task = PyTask("m:f", max_retries=3, backoff="m:curve")
    assert task.serialize() == msgpack.packb(["m:f", [], {}, 0, {"max_retries": 3, "backoff": "m:curve"}])
    assert PyTask.deserialize(task.with_options(attempt=1).serialize()).options == \
        TaskOptions(max_retries=3, backoff="m:curve", attempt=1)


def test_float32_is_written_as_msgpack_float32_wherever_it_sits():
    # go-delayed's msgpack refuses a float64 (cb) for a float32 target, so Float32 writes ca.
    assert GoTask("f", Float32(1.5)).serialize().hex() == "92a166c405" "ca3fc00000"
    nested = GoTask("f", [1, [Float32(-2.0), 2.5], {"x": Float32(0.5)}])
    assert nested.serialize() == msgpack.packb(["f", bytes.fromhex("9301" "92cac0000000cb4004000000000000"
                                                                     "81a178ca3f000000")])
    assert GoTask("f", 1.5).serialize().hex() == "92a166c409" "cb3ff8000000000000"


def test_float32_still_refuses_what_msgpack_cannot_write():
    with pytest.raises(TaskArgumentError, match=r"args\[1\] is of type object"):
        GoTask("f", [Float32(1), object()]).serialize()


def test_go_delayed_nil_argument_decodes_as_a_gotask():
    # NewGoTask("f", nil) leaves the payload nil: [f, nil], not a PyTask with no args.
    task = decode_task(bytes.fromhex("92a166c0"))
    assert isinstance(task, GoTask) and (task.func_path, task.args) == ("f", None)
    with pytest.raises(MalformedTaskError) as info:
        PyTask.deserialize(bytes.fromhex("92a166c0"))
    assert info.value.reason == "go_task"


def test_struct_kwargs_from_go_delayed_are_refused_with_the_cause():
    # NewPyTask("m:f", nil, struct{A int}{1}) writes the struct as an array: its names are lost.
    with pytest.raises(MalformedTaskError, match="NewPyTask writes a Go struct's fields without their names") as info:
        decode_task(bytes.fromhex("93a36d3a66c09101"))
    assert (info.value.reason, info.value.func_path) == ("malformed", "m:f")


class Unpackable:
    """A value msgpack has no way to write."""


@pytest.mark.parametrize("task, where, kind", [
    (PyTask(tasks.record, [1, Unpackable()]), "args[1]", "tests.test_task.Unpackable"),
    (PyTask(tasks.record, [], {"when": {"at": datetime.datetime(2026, 1, 1)}}), "kwargs['when']['at']",
     "datetime.datetime"),
    (PyTask(tasks.record, [[0, 2 ** 64]]), "args[0][1]", "int"),
    (PyTask(tasks.record, [{Unpackable(): 1}]), "a key of args[0]", "tests.test_task.Unpackable"),
    (PyTask(tasks.record, [Float32(1.5)]), "args[0]", "delayed.wire.task.Float32"),  # a GoTask's only
    (GoTask("main.F", [Float32(1.5), {"x": Unpackable()}]), "args[1]['x']", "tests.test_task.Unpackable"),
    (GoTask("main.F", Unpackable()), "args", "tests.test_task.Unpackable"),
])
def test_an_argument_msgpack_cannot_write_is_named_with_its_task_path_and_type(task, where, kind):
    with pytest.raises(TaskArgumentError) as raised:
        task.serialize()
    assert str(raised.value).startswith(f"task {task.func_path}: {where} is of type {kind}, which msgpack "
                                        "cannot serialize (")
    assert isinstance(raised.value, TypeError)  # what msgpack raised, for code that caught that


def test_a_gotask_s_options_ride_in_a_third_element_its_payload_always_a_bin():
    assert GoTask("main.F", [1, 2], max_retries=3, time_limit=30).serialize() == \
        msgpack.packb(["main.F", msgpack.packb([1, 2]), {"max_retries": 3, "time_limit": 30}])
    assert GoTask("main.F", backoff=1.5).serialize().hex() == "93a66d61696e2e46c401c0" "81a76261636b6f6666cb3ff8000000000000"
    assert GoTask("main.F", [1, 2], delay=5, result_ttl=60).serialize() == GoTask("main.F", [1, 2]).serialize()


def test_decode_task_tells_a_gotask_with_options_from_go_delayeds_new_pytask():
    """[func, bin, map] is a GoTask; [func, nil, map] and [func, array, map] are PyTasks (NewPyTask's)."""
    task = decode_task(msgpack.packb(["main.F", msgpack.packb("x"), {"max_retries": 2, "future": 1}]))
    assert isinstance(task, GoTask) and (task.args, task.options.max_retries, task.options.unknown) == ("x", 2, {"future": 1})
    for args in (None, [1]):
        task = decode_task(msgpack.packb(["m:f", args, {"max_retries": 2}]))
        assert isinstance(task, PyTask) and task.kwargs == {"max_retries": 2} and task.options.max_retries is None


@pytest.mark.parametrize("options, message", [([1], "task options must be a map with string keys"),
                                              ({1: 2}, "task options must be a map with string keys"),
                                              ({"max_retries": -1}, "max_retries must be from 0"),
                                              ({"time_limit": "5"}, "time_limit must be a number")])
def test_a_gotask_s_bad_options_are_malformed_and_name_its_handler(options, message):
    with pytest.raises(MalformedTaskError, match=f"^{message}") as info:
        decode_task(msgpack.packb(["main.F", msgpack.packb(1), options]))
    assert (info.value.reason, info.value.func_path) == ("malformed", "main.F")


def test_a_gotask_rewritten_keeps_its_payload_s_bytes():
    """A sweeper counting a crash rewrites the options only: Go's float32 stays a float32 (Python
    would write it back as a float64, which a Go float32 parameter refuses), a map its order."""
    payload = bytes.fromhex("92" "ca3fc00000" "82a17a01a16102")  # [float32 1.5, {"z": 1, "a": 2}]
    task = decode_task(msgpack.packb(["main.F", payload]))
    counted = task.with_options(crashes=1)
    assert counted.serialize() == msgpack.packb(["main.F", payload, {"crashes": 1}])
    assert decode_task(counted.serialize()).with_options(crashes=2).serialize() == \
        msgpack.packb(["main.F", payload, {"crashes": 2}])
    assert task.options.crashes == 0  # unchanged
    with pytest.raises(TypeError, match="^a GoTask has no retry"):
        task.with_options(retry=1)
