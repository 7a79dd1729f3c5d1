"""Go types as a contract file (version 1) describes them: one GoType per node, read once and checked,
so a malformed contract fails as it loads, not as a task is built."""
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from ..errors import ContractError

KINDS = frozenset({"int", "float", "string", "bytes", "bool", "slice", "array", "map", "struct", "pointer",
                   "any", "time"})
NILLABLE = frozenset({"slice", "map", "pointer", "any", "bytes"})
"""Kinds a Go nil (Python None) is a value of."""


@dataclass(frozen=True)
class Field:
    name: str
    type: "GoType"


@dataclass(frozen=True)
class GoType:
    """One Go type: `go` as written, `kind`, and what the kind needs (bits, signed, elem, key, len, name, fields)."""

    kind: str
    go: str
    bits: int = 64
    signed: bool = True
    elem: Optional["GoType"] = None
    key: Optional["GoType"] = None
    length: int = 0
    name: str = ""
    fields: Tuple[Field, ...] = ()


def _need(node: Dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = node.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
        raise ContractError(f"{where}: {name!r} must be a {kind.__name__}, got {value!r}")
    return value


def parse_type(node: Any, where: str) -> GoType:
    """The GoType of a contract's type object; where says whose it is, for the error."""
    if not isinstance(node, dict):
        raise ContractError(f"{where}: a type must be an object, got {node!r}")
    kind = _need(node, "kind", str, where)
    if kind not in KINDS:
        raise ContractError(f"{where}: unknown kind {kind!r}")
    go = _need(node, "go", str, where)
    if kind in ("int", "float"):
        bits = _need(node, "bits", int, where)
        if bits not in ((8, 16, 32, 64) if kind == "int" else (32, 64)):
            raise ContractError(f"{where}: {go} cannot have {bits} bits")
        return GoType(kind, go, bits=bits, signed=_need(node, "signed", bool, where) if kind == "int" else True)
    if kind in ("slice", "array", "pointer"):
        elem = parse_type(node.get("elem"), f"{where} ({go})")
        return GoType(kind, go, elem=elem, length=_need(node, "len", int, where) if kind == "array" else 0)
    if kind == "map":
        return GoType(kind, go, key=parse_type(node.get("key"), f"{where} ({go} key)"),
                      elem=parse_type(node.get("elem"), f"{where} ({go})"))
    if kind == "struct":
        name = _need(node, "name", str, where)
        fields = []
        for field in _need(node, "fields", list, where):
            if not isinstance(field, dict):
                raise ContractError(f"{where}: a field of {name} must be an object, got {field!r}")
            field_name = _need(field, "name", str, f"{where} ({name})")
            fields.append(Field(field_name, parse_type(field.get("type"), f"{where} ({name}.{field_name})")))
        return GoType(kind, go, name=name, fields=tuple(fields))
    return GoType(kind, go)
