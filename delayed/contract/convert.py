"""A Python value made into what go-delayed decodes into a Go type, or a ContractError saying why not.

The result is what a hand-written GoTask would hold: Float32 for float32, a struct as the list of its
fields in order, a msgpack Timestamp for time.Time (GoTask writes it as msgpack's timestamp extension).
"""
import datetime
import math
import struct
from collections.abc import Mapping
from typing import Any, NoReturn

import msgpack

from ..errors import ContractError
from ..wire.preview import brief
from ..wire.task import Float32
from .types import NILLABLE, GoType

_FLOAT32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]


def _refuse(handler: str, path: str, want: GoType, problem: str) -> NoReturn:
    raise ContractError(f"{handler}: {path} must be Go {want.go}: {problem}")


def _got(value: Any) -> str:
    return f"got {type(value).__name__} {brief(value)}"


def convert(value: Any, want: GoType, path: str, handler: str) -> Any:
    """value as want's Go type takes it; path names it in handler's call (p.Label, rest[2])."""
    kind = want.kind
    if value is None:
        if kind in NILLABLE:
            return None
        _refuse(handler, path, want, "got None, and it cannot be nil")
    if kind == "any":
        return value
    if kind == "int":
        if type(value) is bool or not isinstance(value, int):
            _refuse(handler, path, want, _got(value))
        low, high = (-(1 << (want.bits - 1)), (1 << (want.bits - 1)) - 1) if want.signed else (0, (1 << want.bits) - 1)
        if not low <= value <= high:
            _refuse(handler, path, want, f"{value} is out of its range {low}..{high}")
        return int(value)
    if kind == "float":
        return _float(value, want, path, handler)
    if kind == "string":
        if not isinstance(value, str):
            _refuse(handler, path, want, _got(value))
        return str(value)
    if kind == "bytes":
        if not isinstance(value, (bytes, bytearray, memoryview)):
            _refuse(handler, path, want, _got(value))
        return bytes(value)
    if kind == "bool":
        if type(value) is not bool:
            _refuse(handler, path, want, _got(value))
        return value
    if kind == "time":
        return _time(value, want, path, handler)
    if kind == "pointer":
        assert want.elem is not None
        return convert(value, want.elem, path, handler)
    if kind in ("slice", "array"):
        return _sequence(value, want, path, handler)
    if kind == "map":
        return _map(value, want, path, handler)
    return _struct(value, want, path, handler)


def _float(value: Any, want: GoType, path: str, handler: str) -> Any:
    """A float64 as a float, a float32 as a Float32 (an int is fine for either; a float32 must fit)."""
    if type(value) is bool or not isinstance(value, (int, float, Float32)):
        _refuse(handler, path, want, _got(value))
    number = float(value)
    if want.bits == 64:
        return number
    if math.isfinite(number) and abs(number) > _FLOAT32_MAX:
        _refuse(handler, path, want, f"{number!r} is past float32's largest, {_FLOAT32_MAX!r}")
    return Float32(number)


def _time(value: Any, want: GoType, path: str, handler: str) -> msgpack.Timestamp:
    if isinstance(value, msgpack.Timestamp):
        return value
    if not isinstance(value, datetime.datetime):
        _refuse(handler, path, want, _got(value))
    if value.tzinfo is None:
        _refuse(handler, path, want, f"{brief(value)} is naive: give it a tzinfo (e.g. timezone.utc)")
    return msgpack.Timestamp.from_datetime(value)


def _sequence(value: Any, want: GoType, path: str, handler: str) -> list:
    if not isinstance(value, (list, tuple)):
        _refuse(handler, path, want, f"{_got(value)} (a list or a tuple, please)")
    if want.kind == "array" and len(value) != want.length:
        _refuse(handler, path, want, f"got {len(value)} items, not {want.length}")
    assert want.elem is not None
    return [convert(item, want.elem, f"{path}[{index}]", handler) for index, item in enumerate(value)]


def _map(value: Any, want: GoType, path: str, handler: str) -> dict:
    if not isinstance(value, Mapping):
        _refuse(handler, path, want, _got(value))
    assert want.key is not None and want.elem is not None
    return {convert(key, want.key, f"a key of {path}", handler): convert(item, want.elem, f"{path}[{key!r}]", handler)
            for key, item in value.items()}


def _struct(value: Any, want: GoType, path: str, handler: str) -> list:
    """A struct, given as a dict by field name or as a list in field order: its fields' list, every field given."""
    names = [field.name for field in want.fields]
    if isinstance(value, Mapping):
        unknown = [key for key in value if key not in names]
        if unknown:
            raise ContractError(f"{handler}: {path}.{unknown[0]}: Go {want.name} has no such field "
                                f"(its fields: {', '.join(names)})")
        missing = [name for name in names if name not in value]
        if missing:  # go-delayed would keep the field's value from the handler's previous task
            _refuse(handler, path, want, f"field {missing[0]} is missing (give every field: {', '.join(names)})")
        items = [value[name] for name in names]
    elif isinstance(value, (list, tuple)):
        if len(value) != len(names):
            _refuse(handler, path, want, f"got {len(value)} fields, not {len(names)} ({', '.join(names)})")
        items = list(value)
    else:
        _refuse(handler, path, want, f"{_got(value)} (a dict by field name, or a list in field order)")
    return [convert(item, field.type, f"{path}.{field.name}", handler) for item, field in zip(items, want.fields)]
