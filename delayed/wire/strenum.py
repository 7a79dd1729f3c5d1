"""StrEnum: names whose members are the very strings stored in Redis, JSON and logs."""
from enum import Enum


class StrEnum(str, Enum):
    """enum.StrEnum (Python 3.11) for 3.9 and 3.10 too: a member is a str equal to its value (stored,
    compared and dumped to JSON as it), and str(), format() and f-strings give that bare value on every
    version (a plain str-mixin Enum formats as "Class.MEMBER" from 3.11 on)."""

    def __str__(self) -> str:
        return str.__str__(self)
