"""Fuzz flow.lua's `with_argument`, the Lua that appends a step's inputs to its blob's arguments without
decoding it (a msgpack skipper and appender), through the real Lua on Redis.

Blobs are written here byte by byte, each value in any encoding msgpack allows for it (a small int as
a fixint or any wider int, a short str as a str8, str16 or str32, an array of 3 under an array32
header, ...), so every marker the skipper reads comes up without megabytes of data: PyTask blobs with
and without options, GoTask blobs whose payload (a bin 8, 16 or 32) holds one value, an array or nil.
The blob that comes back must decode to the same task with exactly the value at the end of its
arguments (a GoTask without an argument: the value as its payload), and its bytes before and after
the arguments must be those it had (the options map, the id at the end). DELAYED_FUZZ_EXAMPLES sets how many blobs each test tries (default 1000).
"""
import os
import struct
from importlib import resources

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("DELAYED_FUZZ_EXAMPLES", 1000))
FLOW_LUA = resources.files("delayed.protocol").joinpath("lua", "flow.lua").read_text("utf-8")
WITH_ARGUMENT = FLOW_LUA + "\nreturn flows({}).with_argument(ARGV[1], ARGV[2])\n"
BIN_MARKERS = {1: b"\xc4", 2: b"\xc5", 4: b"\xc6"}
"""bin 8, 16 and 32, by the bytes of their length."""
ARRAY_MARKERS = {*range(0x90, 0xA0), 0xDC, 0xDD}
"""fixarray, array 16 and array 32."""


@pytest.fixture
def with_argument(conn):
    """flow.lua's with_argument(blob, value), run by Redis's Lua."""
    script = conn.register_script(WITH_ARGUMENT)
    return lambda blob, value: script(args=[blob, value])


def header(draw, small_base, small_limit, wide, count):
    """A header for count (items, bytes): the fix form (small_base + count) if count fits under
    small_limit, or any of the wide markers (8, 16, 32 bits: (marker, bytes of length)) that hold it."""
    forms = [None] if small_base is not None and count < small_limit else []
    forms += [(marker, size) for marker, size in wide if count < 256 ** size]
    form = draw(st.sampled_from(forms))
    return bytes([small_base + count]) if form is None else bytes([form[0]]) + count.to_bytes(form[1], "big")


def encodings_of_int(n):
    """Every msgpack encoding of the int n."""
    forms = []
    if 0 <= n < 128 or -32 <= n < 0:
        forms.append(struct.pack(">b", n) if n < 0 else bytes([n]))
    for marker, fmt in ((0xCC, ">B"), (0xCD, ">H"), (0xCE, ">I"), (0xCF, ">Q"),
                        (0xD0, ">b"), (0xD1, ">h"), (0xD2, ">i"), (0xD3, ">q")):
        try:
            forms.append(bytes([marker]) + struct.pack(fmt, n))
        except struct.error:
            pass
    return forms


@st.composite
def integers(draw):
    n = draw(st.one_of(st.integers(-32, 127), st.integers(-(2**63), 2**64 - 1),
                       st.sampled_from([255, 256, 65535, 65536, 2**32 - 1, 2**32, -33, -128, -129, -(2**15) - 1])))
    return n, draw(st.sampled_from(encodings_of_int(n)))


@st.composite
def floats(draw):
    if draw(st.booleans()):
        value = draw(st.floats(width=32, allow_nan=False))
        return value, b"\xca" + struct.pack(">f", value)
    value = draw(st.floats(allow_nan=False))
    return value, b"\xcb" + struct.pack(">d", value)


@st.composite
def strings(draw, min_size=0):
    # and texts of up to 600 bytes, past a str8's (cheap to make: a random long text is not)
    text = draw(st.text(min_size=min_size, max_size=20) | st.integers(max(min_size, 21), 300).map(lambda n: "é" * n))
    data = text.encode()
    return text, header(draw, 0xA0, 32, ((0xD9, 1), (0xDA, 2), (0xDB, 4)), len(data)) + data


@st.composite
def binaries(draw):
    data = draw(st.binary(max_size=20) | st.integers(0, 600).map(lambda n: b"\xc1" * n))
    return data, header(draw, None, 0, ((0xC4, 1), (0xC5, 2), (0xC6, 4)), len(data)) + data


@st.composite
def extensions(draw):
    code = draw(st.integers(0, 127))  # (-1 is the timestamp, whose lengths are fixed)
    data = draw(st.binary(max_size=20) | st.sampled_from([b"x", b"xy", b"wxyz", b"12345678", b"0123456789abcdef"]))
    fixed = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}
    forms = ([bytes([fixed[len(data)]])] if len(data) in fixed else [])
    forms += [bytes([marker]) + len(data).to_bytes(size, "big") for marker, size in ((0xC7, 1), (0xC8, 2), (0xC9, 4))]
    return msgpack.ExtType(code, data), draw(st.sampled_from(forms)) + bytes([code]) + data


scalars = st.one_of(st.just((None, b"\xc0")), st.just((False, b"\xc2")), st.just((True, b"\xc3")),
                    integers(), floats(), strings(), binaries(), extensions())


def arrays_of(children, max_size=4):
    """Arrays of children, under any header that holds their count (an array 32 of 2, say)."""
    @st.composite
    def arrays(draw):
        items = draw(st.lists(children, max_size=max_size))
        body = b"".join(encoded for _, encoded in items)
        return [value for value, _ in items], header(draw, 0x90, 16, ((0xDC, 2), (0xDD, 4)), len(items)) + body
    return arrays()


def maps_of(children):
    """Maps of str keys to children, under any header that holds their count."""
    @st.composite
    def maps(draw):
        keys = draw(st.lists(strings(), max_size=4, unique_by=lambda pair: pair[0]))
        values = [draw(children) for _ in keys]
        body = b"".join(key + value for (_, key), (_, value) in zip(keys, values))
        return ({key: value for (key, _), (value, _) in zip(keys, values)},
                header(draw, 0x80, 16, ((0xDE, 2), (0xDF, 4)), len(keys)) + body)
    return maps()


values = st.recursive(scalars, lambda children: arrays_of(children) | maps_of(children), max_leaves=8)
arrays = arrays_of(scalars | values, max_size=18)
"""Arguments: up to 18 (15 and 16 are where a fixarray's header gives way to an array 16's)."""


def decode(data):
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


@st.composite
def options(draw):
    """A tracked task's options map, with and without other entries before the id (which is last)."""
    task_id = draw(st.text("0123456789abcdef", min_size=32, max_size=32))
    entries = draw(st.dictionaries(st.sampled_from(["max_retries", "time_limit", "attempt", "x"]),
                                   st.integers(0, 10**6), max_size=3))
    body = b"".join(msgpack.packb(key) + msgpack.packb(value) for key, value in entries.items())
    return header(draw, 0x80, 16, ((0xDE, 2),), len(entries) + 1) + body + b"\xa2id\xd9\x20" + task_id.encode()


func_paths = strings(min_size=1)


@st.composite
def py_tasks(draw):
    """A PyTask blob: (prefix, args (value, bytes), suffix): [func, args] or [func, args, kwargs] (no
    options), or [func, args, kwargs, retry, options]."""
    _, func = draw(func_paths)
    args = draw(arrays | st.just((None, b"\xc0")))
    kwargs = draw(maps_of(values))[1]
    shape = draw(st.sampled_from(["plain", "kwargs", "options"]))
    if shape == "plain":
        return b"\x92" + func, args, b""
    if shape == "kwargs":
        return b"\x93" + func, args, kwargs
    return b"\x95" + func, args, kwargs + draw(integers())[1] + draw(options())


@st.composite
def go_tasks(draw):
    """A GoTask blob: (prefix, payload (value, msgpack), suffix): [func, bin payload] or [func, bin
    payload, options]; the payload one value, an array of them, or nil (no argument)."""
    _, func = draw(func_paths)
    payload = draw(values | arrays | st.just((None, b"\xc0")))
    with_options = draw(st.booleans())
    return (b"\x93" if with_options else b"\x92") + func, payload, draw(options()) if with_options else b""


@given(py_tasks(), values)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])
def test_a_py_task_s_args_gain_the_value_at_their_end_and_nothing_else_changes(with_argument, task, value):
    prefix, (args, args_bytes), suffix = task
    added, added_bytes = value
    grown = with_argument(prefix + args_bytes + suffix, added_bytes)
    assert grown.startswith(prefix) and grown.endswith(suffix)
    new_args = grown[len(prefix):len(grown) - len(suffix)]
    assert decode(new_args) == (args or []) + [added]
    assert decode(grown)[2:] == decode(prefix + args_bytes + suffix)[2:]  # kwargs, retry, options: as they were


@given(go_tasks(), values)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])
def test_a_go_task_s_payload_gains_the_value_and_nothing_else_changes(with_argument, task, value):
    prefix, (payload, payload_bytes), suffix = task
    added, added_bytes = value
    for width in (1, 2, 4):  # the payload under a bin 8, 16 and 32 header
        if len(payload_bytes) >= 256 ** width:
            continue
        blob = prefix + BIN_MARKERS[width] + len(payload_bytes).to_bytes(width, "big") + payload_bytes
        grown = with_argument(blob + suffix, added_bytes)
        assert grown.startswith(prefix) and grown.endswith(suffix)
        new_payload = decode(grown[len(prefix):len(grown) - len(suffix)])
        assert isinstance(new_payload, bytes)
        if payload is None:  # no argument: the value is the payload (a one-parameter Go handler's)
            expected = added
        elif payload_bytes[0] in ARRAY_MARKERS:
            expected = payload + [added]
        else:
            expected = [payload, added]
        assert decode(new_payload) == expected
        assert decode(grown)[2:] == decode(blob + suffix)[2:]  # the options, as they were


@pytest.mark.parametrize("count", [0, 14, 15, 16, 65534, 65535, 65536])
def test_arguments_whose_count_crosses_a_header_s_limit(with_argument, count):
    """15 arguments and one more need an array 16; 65,535 and one more, an array 32."""
    task_id = b"0123456789abcdef" * 2
    suffix = b"\x80\x00\x81\xa2id\xd9\x20" + task_id
    args = msgpack.packb([None] * count)
    grown = with_argument(b"\x95\xa3m:f" + args + suffix, b"\x07")
    assert decode(grown) == ["m:f", [None] * count + [7], {}, 0, {"id": task_id.decode()}]
    payload = msgpack.packb([None] * count)
    go = msgpack.packb(["F", payload])
    assert decode(decode(with_argument(go, b"\x07"))[1]) == [None] * count + [7]


@pytest.mark.parametrize("grown", [255, 256, 65535, 65536])
def test_a_go_payload_whose_size_crosses_a_bin_header_s_limit(with_argument, grown):
    """A payload grown to 256 bytes needs a bin 16; to 65,536, a bin 32."""
    size = grown - 2  # its one value, then nil: an array of 2 (one byte of header), the value, one byte
    value = b"\xc4" + bytes([size - 2]) + b"x" * (size - 2) if size < 258 else \
        b"\xc5" + (size - 3).to_bytes(2, "big") + b"x" * (size - 3)
    go = msgpack.packb(["F", value])
    blob = with_argument(go, b"\xc0")
    header = {255: b"\xc4", 256: b"\xc5", 65535: b"\xc5", 65536: b"\xc6"}[grown]
    assert blob[3:4] == header and decode(decode(blob)[1]) == [decode(value), None]
