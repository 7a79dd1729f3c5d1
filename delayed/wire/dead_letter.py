"""Dead letters: what lands in `<queue>_dead_letters` when a task cannot or did not run.

A dead letter is one entry of a Redis stream; its stream id (e.g. 1700000000000-0) is its id, stable
until it is requeued or deleted. It has two fields:
  record   one JSON object, readable with redis-cli:
             reason     a Reason (one of REASONS)
             error      one line saying what went wrong
             traceback  the task's traceback, for failed and timed_out (else absent)
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
from typing import Any, Dict, Iterable, Optional, Tuple

from ..errors import DeadLetterError, MalformedTaskError, one_line
from . import preview
from .strenum import StrEnum
from .task import decode_task
from .tracking import Status


class Reason(StrEnum):
    """Why a task is a dead letter: its record's "reason" (see REASONS)."""

    MALFORMED = "malformed"
    GO_TASK = "go_task"
    PY_TASK = "py_task"
    TOO_LARGE = "too_large"
    NOT_ALLOWED = "not_allowed"
    BAD_ARGUMENTS = "bad_arguments"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CRASH_LOOP = "crash_loop"
    EXPIRED = "expired"


REASONS = {
    Reason.MALFORMED: "the blob is not a task: not msgpack, or the wrong shape",
    Reason.GO_TASK: "a GoTask: only a Go worker can run it",
    Reason.PY_TASK: "a PyTask: only a Python worker can run it",
    Reason.TOO_LARGE: "the blob is over the worker's max task size",
    Reason.NOT_ALLOWED: "the function is not one the worker allows",
    Reason.BAD_ARGUMENTS: "the function's signature does not take the task's arguments: it was not called",
    Reason.FAILED: "the function raised and the task has no retries left",
    Reason.TIMED_OUT: "the function ran past its time limit and the task has no retries left",
    Reason.CRASH_LOOP: "workers died holding it more often than the sweeper's --max-crashes",
    Reason.EXPIRED: "its expires option passed before a worker started it: it was not called",
}
"""What each reason means."""
STATUS_OF = {
    Reason.MALFORMED: Status.DEAD,
    Reason.GO_TASK: Status.DEAD,
    Reason.PY_TASK: Status.DEAD,
    Reason.TOO_LARGE: Status.DEAD,
    Reason.NOT_ALLOWED: Status.DEAD,
    Reason.BAD_ARGUMENTS: Status.FAILED,
    Reason.FAILED: Status.FAILED,
    Reason.TIMED_OUT: Status.FAILED,
    Reason.CRASH_LOOP: Status.DEAD,
    Reason.EXPIRED: Status.DEAD,
}
"""The status a tracked task's record ends in, by its letter's reason: failed once a worker chose its
function (it raised, ran out of time, or did not take the arguments), dead if it never got that far
(an expired task among them: the worker refused it before looking its function up)."""
UNDECODABLE = "undecodable"
"""The reason shown for a letter whose record is not a JSON object (written by hand, or damaged)."""

RECORD = "record"
TASK = "task"
"""The stream fields of a letter."""

MAX_TRACEBACK = 8192
"""Characters of a task's traceback (its end) a letter keeps."""
MAX_ERROR = 1000
"""Characters of a letter's error (one line) and of its func path."""

Letter = Dict[str, bytes]
"""A letter as written: stream field -> value."""

_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")
UINT64_MAX = 2 ** 64 - 1
LAST_ID = f"{UINT64_MAX}-{UINT64_MAX}"
"""The last stream id there can be: Redis refuses a range that starts after it."""


def record(
    *,
    reason: str,
    error: str,
    blob: bytes,
    queue: str,
    worker: Optional[str],
    func: Optional[str] = None,
    traceback: Optional[str] = None,
    at: Optional[float] = None,
) -> Letter:
    """The fields of one dead letter: its JSON record and the raw blob. reason: a Reason (or the str
    of one: a MalformedTaskError's reason); at: when it failed (unix seconds), default now."""
    entry: Dict[str, Any] = {
        "reason": reason,
        "error": one_line(error, MAX_ERROR),
        "func": None if func is None else one_line(func, MAX_ERROR),
        "queue": queue,
        "worker": worker,
        "failed_at": (datetime.datetime.now(datetime.timezone.utc) if at is None else
                      datetime.datetime.fromtimestamp(at, datetime.timezone.utc)).isoformat(timespec="milliseconds"),
    }
    if traceback:
        entry["traceback"] = traceback[-MAX_TRACEBACK:]
    return {RECORD: json.dumps(entry).encode(), TASK: blob}


def crash_loop(blob: bytes, queue: str, worker: str, crashes: int, max_crashes: int) -> Letter:
    """The letter of a task whose workers died holding it crashes times (over max_crashes)."""
    return record(reason=Reason.CRASH_LOOP, blob=blob, queue=queue, worker=worker, func=func_of(blob),
                  error=f"its worker died while holding it {crashes} times (the limit is {max_crashes})")


def expired_error(expires_at: float, now: float) -> str:
    """The error of an expired task's letter: when it expired, and how long before a worker came to start
    it (Go's worker words it the same)."""
    moment = datetime.datetime.fromtimestamp(expires_at, datetime.timezone.utc).isoformat(timespec="milliseconds")
    return f"it expired at {moment}, {now - expires_at:.3f} s before a worker came to start it"


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


def parse(letter_id: bytes, fields: Dict[bytes, bytes], lengths: Optional[Dict[bytes, int]] = None) -> Dict[str, Any]:
    """A letter as a dict: "id", the record's fields, "task", the raw blob (None if it has none), and
    "task_bytes", its length. lengths: the full length of each field, when the fields are their heads
    (see DeadLetters.list's head): then "task" may be the head of a longer blob.

    Never raises, whatever the stream holds: a record that is not a JSON object (or too long to read
    whole) reads as reason "undecodable", with what it is in "error"; values that are not strings are
    previews (delayed.preview.value)."""
    raw = fields.get(RECORD.encode(), b"")
    length = len(raw) if lengths is None else lengths.get(RECORD.encode(), len(raw))
    entry: Any = None
    if length == len(raw):
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested past what json reads
            pass
    if not isinstance(entry, dict):
        shown = preview.brief(raw) + ("" if length == len(raw) else f" ({length} bytes)")
        entry = {"reason": UNDECODABLE, "error": f"not a JSON record: {shown}"}
    entry = {str(key): value if value is None or isinstance(value, str) else preview.value(value)
             for key, value in entry.items() if key not in ("id", TASK)}
    task = fields.get(TASK.encode())
    task_bytes = None if task is None else len(task) if lengths is None else lengths.get(TASK.encode(), len(task))
    return {"id": letter_id.decode(), **entry, "task": task, "task_bytes": task_bytes}


def letter_filter(reason: str = "", func: str = "") -> str:
    """What the scripts take to pick letters by their record's reason and func (an empty one: any), so
    that they match what parse() says a letter is (see delayed/protocol/lua/dead_filter.lua); "" for
    every letter."""
    match = {name: value for name, value in (("reason", reason), ("func", func)) if value}
    return json.dumps({"record": RECORD, "match": match, "unreadable": {"reason": UNDECODABLE}}) if match else ""


def _is_id(text: str) -> bool:
    """Whether text is a stream id Redis takes: MS-SEQ, each part ASCII digits within 64 bits unsigned
    (checked here, so that no other text reaches Redis and comes back as its error)."""
    match = _ID.fullmatch(text)
    return match is not None and all(int(part) <= UINT64_MAX for part in match.groups())


def id_order(letter_id: str) -> Tuple[int, int]:
    """A letter's id as its stream orders it, (milliseconds, sequence): the time it was written, so
    letters of several queues merge in time order."""
    milliseconds, _, sequence = letter_id.partition("-")
    return int(milliseconds), int(sequence)


def check_ids(ids: Iterable[str]) -> None:
    """Raise DeadLetterError naming the ids that cannot be letter ids, in one line (one with a line
    break or other unprintable character is shown quoted)."""
    bad = [letter_id if letter_id.isprintable() else repr(letter_id) for letter_id in ids if not _is_id(letter_id)]
    if bad:
        raise DeadLetterError(f"not a dead letter id: {', '.join(bad)} (ids look like 1700000000000-0)")
