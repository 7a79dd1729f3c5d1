"""Bounded views of decoded task values, for people: what messages, the `delayed` command and the
dashboard show of whatever bytes a queue holds. Both never raise and stay small, however deep or
large the value (a hostile or careless producer can send anything msgpack can hold).

brief(value): one line in Python's repr style, at most BRIEF characters, for error messages.
value(obj): JSON-able data, at most NODES values in all, each string cut to TEXT characters and
each bin to TEXT bytes; what JSON has no word for is tagged:
  bytes            {"base64": ...} (with "bytes": the full length when cut)
  msgpack Timestamp {"timestamp": "2024-05-01T12:00:00.000000001Z"} (unix seconds past year 9999)
  other ext types  "<ext type 7, 2 bytes>"
  nan, inf         {"float": "nan"}
  cut containers   "<array of 3 items>" once the budget is spent; "… 80 more items" as the last item
"""
import base64
import math
import reprlib
from typing import Any, Dict, List

import msgpack

BRIEF = 80
"""Characters of a brief()."""
NODES = 200
"""Values (scalars and containers) one value() shows; the rest is summarised."""
TEXT = 120
"""Characters of a string, and bytes of a bin, one value() shows."""


class _Brief(reprlib.Repr):
    """reprlib's bounded repr, with bins and ext types cut before they are turned into text."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother = 3, 40, 40
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 4

    def repr_bytes(self, x: bytes, level: int) -> str:
        return repr(x[:self.maxstring]) + ("..." if len(x) > self.maxstring else "")

    def repr_ExtType(self, x: msgpack.ExtType, level: int) -> str:
        return _ext(x)


_BRIEF = _Brief()


def brief(value: Any) -> str:
    """value in one bounded line, as repr would write its start."""
    try:
        text = _BRIEF.repr(value)
    except Exception:  # reprlib guards instances' reprs, not every path: never fail a message
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= BRIEF else text[:BRIEF - 3] + "..."


def value(obj: Any, nodes: int = NODES) -> Any:
    """obj (decoded msgpack, or any Python value) as JSON-able data of bounded size."""
    return _Budget(nodes).show(obj)


class _Budget:
    """How many more values a preview may show."""

    def __init__(self, nodes: int) -> None:
        self.left = nodes

    def show(self, obj: Any) -> Any:
        self.left -= 1
        if obj is None or isinstance(obj, (bool, int)):
            return obj
        if isinstance(obj, float):
            return obj if math.isfinite(obj) else {"float": repr(obj)}
        if isinstance(obj, str):
            return obj if len(obj) <= TEXT else f"{obj[:TEXT]}… ({len(obj)} characters)"
        if isinstance(obj, (bytes, bytearray, memoryview)):
            shown: Dict[str, Any] = {"base64": base64.b64encode(bytes(obj[:TEXT])).decode("ascii")}
            if len(obj) > TEXT:
                shown["bytes"] = len(obj)
            return shown
        if isinstance(obj, msgpack.Timestamp):
            return {"timestamp": _timestamp(obj)}
        if isinstance(obj, msgpack.ExtType):
            return _ext(obj)
        if isinstance(obj, (list, tuple)):
            return self._array(obj)
        if isinstance(obj, dict):
            return self._map(obj)
        return f"<{type(obj).__name__}>"

    def _array(self, items: Any) -> Any:
        if self.left < 1:
            return f"<array of {len(items)} items>"
        shown: List[Any] = []
        for item in items:
            if self.left < 1:
                shown.append(f"… {len(items) - len(shown)} more items")
                break
            shown.append(self.show(item))
        return shown

    def _map(self, entries: Dict[Any, Any]) -> Any:
        if self.left < 1:
            return f"<map of {len(entries)} entries>"
        shown: Dict[str, Any] = {}
        for count, (key, item) in enumerate(entries.items()):
            if self.left < 1:
                shown["…"] = f"{len(entries) - count} more entries"
                break
            name = key if isinstance(key, str) and len(key) <= TEXT else brief(key)
            shown[name] = self.show(item)
        return shown


def _timestamp(stamp: msgpack.Timestamp) -> str:
    try:
        return stamp.to_datetime().strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.nanoseconds:09d}Z"
    except (OverflowError, ValueError, OSError):  # past year 9999, or before year 1
        return f"{stamp.seconds}.{stamp.nanoseconds:09d} (unix seconds)"


def _ext(ext: msgpack.ExtType) -> str:
    return f"<ext type {ext.code}, {len(ext.data)} bytes>"

