"""The msgpack ext values delayed writes into tasks' arguments: a failed workflow step passed on to
the step after it (see delayed/protocol/lua/flow.lua's failure, which writes it)."""
from typing import Any

import msgpack

from ..errors import DelayedError

FAILED_STEP_EXT = 68
"""The msgpack ext type of a failed step passed on as an input ("D": see flow.lua's failure)."""


class StepFailed(DelayedError):
    """A step that failed, as the step after it receives it: in a group's results with
    `on_member_failure="pass"`, and as the input of an `on_failure` step that takes one.

    The Python worker's argument decoding makes it from the msgpack extension value (type 68) the workflow's
    scripts write in the failed step's place. It is an exception, so the step that receives it can
    raise it; equal values compare equal.

    Attributes:
        id (str): The failed step's task id.
        func (str): Its function.
        status (str): How it ended: `"failed"`, `"dead"` or `"cancelled"`.
        error (str): What it raised (or why it could not run).
    """

    def __init__(self, id: str, func: str, status: str, error: str) -> None:
        super().__init__(f"step {id} ({func}) {status}" + (f": {error}" if error else ""))
        self.id, self.func, self.status, self.error = id, func, status, error

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StepFailed) and self.args == other.args

    def __hash__(self) -> int:
        return hash(self.args)


def decode_ext(code: int, data: bytes) -> Any:
    """msgpack's ext_hook for task arguments: a failed step becomes a StepFailed; any other ext stays one."""
    if code == FAILED_STEP_EXT:
        fields = msgpack.unpackb(data, raw=False)
        return StepFailed(fields.get("id", ""), fields.get("func", ""), fields.get("status", ""),
                          fields.get("error", ""))
    return msgpack.ExtType(code, data)
