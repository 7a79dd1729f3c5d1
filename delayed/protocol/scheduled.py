"""Operators' changes to one scheduled task: run it now, or delete it. A task is named by a ref
(`ref_of`: its due time, its member's nonce and the sha1 of the member), so that a form can name
it without carrying its blob, and the script acts only on that exact member."""
import re
from typing import Optional, Tuple

import redis

from ..wire.keys import SCHEDULED_PREFIX_BYTES, QueueKeys
from .scripts import Script, Scripts

SCHEDULED_TASK = Script("scheduled_task")
_REF = re.compile(r"(-?(?:inf|[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?)):([0-9a-f]{%d}):([0-9a-f]{40})"
                  % (2 * SCHEDULED_PREFIX_BYTES))
"""A ref: a due time as Redis writes a score (and reads it back exactly), the nonce, the sha1."""


def ref_of(due: str, nonce: bytes, digest: str) -> str:
    """The ref of a scheduled-set member: its score as Redis writes it, its nonce (the member's first
    SCHEDULED_PREFIX_BYTES) and the sha1 of the whole member (hex): "DUE:NONCE:SHA1"."""
    return f"{due}:{nonce.hex()}:{digest}"


class ScheduledTasks:
    """Operators' changes to the scheduled tasks of queue `name` on conn, each task named by its ref."""

    def __init__(self, conn: redis.Redis, name: str) -> None:
        self._scripts = Scripts(conn, QueueKeys.of(name))

    def run_now(self, ref: str) -> bool:
        """Move the scheduled task ref names into the queue now, with its notification (a tracked one's
        record then says pending); False if it is no longer scheduled (or ref names no member)."""
        return self._act(ref, "run")

    def delete(self, ref: str) -> bool:
        """Delete the scheduled task ref names (a tracked one's record ends as cancelled); False if it is
        no longer scheduled (or ref names no member)."""
        return self._act(ref, "delete")

    def _act(self, ref: str, action: str) -> bool:
        parsed = _parse(ref)
        if parsed is None:
            return False
        due, nonce, digest = parsed
        return bool(self._scripts[SCHEDULED_TASK](action=action, due=due, nonce=nonce, digest=digest))


def _parse(ref: str) -> Optional[Tuple[str, bytes, str]]:
    """A ref as the script's (due, nonce, digest); None if it is not one."""
    match = _REF.fullmatch(ref)
    if match is None:
        return None
    due, nonce, digest = match.groups()
    return due, bytes.fromhex(nonce), digest
