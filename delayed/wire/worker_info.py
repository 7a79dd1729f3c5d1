"""What our workers write about themselves, for people: each worker's description, the hash
<queue>_worker:<main id> (see QueueKeys.worker_info), written as it goes online and kept with its
keep-alive keys' expiry, so that it lapses with them (and goes when the worker goes offline):
  host      the worker's host name
  pid       its process id
  started   when it went online (unix time, by its own clock)
  queues    the queues it serves, in priority order (a JSON array)
  <id>      for each of its ids that has held its task a while (see delayed.worker.holding.NOTE_AFTER), when
            it claimed it: milliseconds since the epoch, by Redis's clock
"""
import json
import os
import socket
from typing import Any, Dict, List, Mapping, Optional, Sequence

FIELDS = ("host", "pid", "started", "queues")


def describe(queues: Sequence[str], started: float) -> List[str]:
    """The description of this process, a worker serving queues since started (unix time), as field,
    value, field, value, ... (what HSET takes)."""
    about = {"host": socket.gethostname(), "pid": str(os.getpid()), "started": repr(started),
             "queues": json.dumps(list(queues))}
    return [item for field in FIELDS for item in (field, about[field])]


def about(fields: Mapping[bytes, bytes]) -> Dict[str, Any]:
    """A description as read (HGETALL) as FIELDS: host (str), pid (int), started (float), queues (a list of
    str); None each where it is missing or unreadable (a go-delayed worker has none). Never raises."""
    text = {field: fields[field.encode()].decode(errors="replace") for field in FIELDS if field.encode() in fields}
    try:
        queues = json.loads(text["queues"])
    except (KeyError, ValueError, RecursionError):
        queues = None
    return {"host": text.get("host"), "pid": _number(text.get("pid"), int), "started": _number(text.get("started"), float),
            "queues": queues if isinstance(queues, list) and all(isinstance(name, str) for name in queues) else None}


def claimed_at(value: Optional[bytes]) -> Optional[float]:
    """The unix time (seconds) an id's field says it claimed its task, or None (no field, or not a time)."""
    return int(value) / 1000 if value is not None and value.isdigit() else None


def _number(text: Optional[str], kind: Any) -> Any:
    try:
        return None if text is None else kind(text)
    except ValueError:
        return None
