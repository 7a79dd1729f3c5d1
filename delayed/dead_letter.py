"""Dead letters: what lands in `<queue>_dead_letters` when a task cannot or did not run.

A dead letter is one entry of a Redis stream; its stream id (e.g. 1700000000000-0) is its id, stable
until it is requeued or deleted. It has two fields:
  record   one JSON object, readable with redis-cli:
             reason     one of REASONS
             error      one line saying what went wrong
             traceback  the task's traceback, for "failed" (else absent)
             func       the task's func path when the blob decoded that far (else null)
             queue, worker, failed_at (ISO 8601, UTC)
  task     the raw blob: nothing of the original is lost
This module is the one place that builds and reads the format (the scripts only move fields).
Versions before the stream pushed the record onto the list `<queue>_dead`, with the task inside
it in base64: from_legacy() turns such an entry into a letter.
"""
import base64
import binascii
import datetime
import json
import re
from typing import Any, Dict, Iterable, Optional

from .errors import DelayedError, MalformedTaskError
from .task import decode_task

REASONS = {
    "malformed": "the blob is not a task: not msgpack, or the wrong shape",
    "go_task": "a GoTask: only a go-delayed worker can run it",
    "too_large": "the blob is over the worker's max task size",
    "not_allowed": "the function is not one the worker allows",
    "bad_arguments": "the function rejected the task's arguments",
    "failed": "the function raised and the task has no retries left",
    "timed_out": "the function ran past its time limit and the task has no retries left",
    "crash_loop": "workers died holding it more often than the sweeper's --max-crashes",
}
UNDECODABLE = "undecodable"
"""The reason shown for a letter whose record is not a JSON object (written by hand, or damaged)."""

RECORD = "record"
TASK = "task"
"""The stream fields of a letter."""

MAX_TRACEBACK = 8192

Letter = Dict[str, bytes]
"""A letter as written: stream field -> value."""

_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")
UINT64_MAX = 2 ** 64 - 1
LAST_ID = f"{UINT64_MAX}-{UINT64_MAX}"
"""The last stream id there can be: Redis refuses a range that starts after it."""


class DeadLetterError(DelayedError, LookupError):
    """Dead letters asked for by id that do not exist (or hold no task to requeue); nothing was changed."""


def record(
    *,
    reason: str,
    error: str,
    blob: bytes,
    queue: str,
    worker: Optional[str],
    func: Optional[str] = None,
    traceback: Optional[str] = None,
) -> Letter:
    """The fields of one dead letter: its JSON record and the raw blob."""
    entry: Dict[str, Any] = {
        "reason": reason,
        "error": error,
        "func": func,
        "queue": queue,
        "worker": worker,
        "failed_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
    }
    if traceback:
        entry["traceback"] = traceback[-MAX_TRACEBACK:]
    return {RECORD: json.dumps(entry).encode(), TASK: blob}


def crash_loop(blob: bytes, queue: str, worker: str, crashes: int, max_crashes: int) -> Letter:
    """The letter of a task whose workers died holding it crashes times (over max_crashes)."""
    return record(reason="crash_loop", blob=blob, queue=queue, worker=worker, func=func_of(blob),
                  error=f"its worker died while holding it {crashes} times (the limit is {max_crashes})")


def func_of(blob: bytes) -> Optional[str]:
    """The func path of a blob, if it decodes that far."""
    try:
        return decode_task(blob).func_path
    except MalformedTaskError as exc:
        return exc.func_path


def from_legacy(entry: bytes) -> Letter:
    """A letter from an entry of an old `<queue>_dead` list (JSON, task in base64); an entry that is
    not such a record is kept whole as the letter's record, with no task."""
    try:
        fields = json.loads(entry)
        blob = base64.b64decode(fields.pop(TASK), validate=True)
    except (ValueError, TypeError, KeyError, AttributeError, binascii.Error):
        return {RECORD: entry}
    return {RECORD: json.dumps(fields).encode(), TASK: blob}


def parse(letter_id: bytes, fields: Dict[bytes, bytes]) -> Dict[str, Any]:
    """A letter as a dict: "id", the record's fields, and "task", the raw blob (None if it has none).

    Never raises: a record that is not a JSON object reads as reason "undecodable", its bytes in "error"."""
    raw = fields.get(RECORD.encode(), b"")
    try:
        entry = json.loads(raw)
    except ValueError:
        entry = None
    if not isinstance(entry, dict):
        entry = {"reason": UNDECODABLE, "error": f"not a JSON record: {raw[:200]!r}"}
    entry.pop("id", None)
    return {"id": letter_id.decode(), **entry, "task": fields.get(TASK.encode())}


def _is_id(text: str) -> bool:
    """Whether text is a stream id Redis takes: MS-SEQ, each part ASCII digits within 64 bits unsigned
    (checked here, so that no other text reaches Redis and comes back as its error)."""
    match = _ID.fullmatch(text)
    return match is not None and all(int(part) <= UINT64_MAX for part in match.groups())


def check_ids(ids: Iterable[str]) -> None:
    """Raise DeadLetterError naming the ids that cannot be letter ids, in one line (one with a line
    break or other unprintable character is shown quoted)."""
    bad = [letter_id if letter_id.isprintable() else repr(letter_id) for letter_id in ids if not _is_id(letter_id)]
    if bad:
        raise DeadLetterError(f"not a dead letter id: {', '.join(bad)} (ids look like 1700000000000-0)")
