"""Dead-letter records: what lands in `<queue>_dead` when a task cannot or did not run.

A record is one JSON object, readable with redis-cli:
  reason     one of REASONS
  error      one line saying what went wrong
  traceback  the task's traceback, for "failed" (else absent)
  func       the task's func path when the blob decoded that far (else null)
  queue, worker, failed_at (ISO 8601, UTC)
  task       the raw blob, base64: nothing of the original is lost
"""
import base64
import datetime
import json
from typing import Any, Dict, Optional

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

MAX_TRACEBACK = 8192


def record(
    *,
    reason: str,
    error: str,
    blob: bytes,
    queue: str,
    worker: Optional[str],
    func: Optional[str] = None,
    traceback: Optional[str] = None,
) -> bytes:
    """Encode one dead-letter record."""
    entry: Dict[str, Any] = {
        "reason": reason,
        "error": error,
        "func": func,
        "queue": queue,
        "worker": worker,
        "failed_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
        "task": base64.b64encode(blob).decode("ascii"),
    }
    if traceback:
        entry["traceback"] = traceback[-MAX_TRACEBACK:]
    return json.dumps(entry).encode()


def parse(data: bytes) -> Dict[str, Any]:
    """Decode a record; its "task" field becomes the raw blob again (bytes)."""
    entry = json.loads(data)
    entry["task"] = base64.b64decode(entry["task"])
    return entry
