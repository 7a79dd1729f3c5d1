"""Which queues exist: the names whose keys look like ours or go-delayed's, for `delayed stats`, the
dashboard, the metrics exporter and a sweeper told no queue (it sweeps every one it finds)."""
import json
import re
from typing import List

import redis

from ..errors import MalformedTaskError
from ..wire.dead_letter import UNDECODABLE
from ..wire.keys import (
    COUNTED_EVENTS,
    COUNTED_WORKFLOWS,
    COUNTS_SUFFIX,
    GO_WORKER_ID,
    NOTI_SUFFIX,
    PROCESSING_SUFFIX,
    SCHEDULED_SUFFIX,
    WORKER_ID_PREFIX,
    WORKERS_SUFFIX,
)
from ..wire.task import decode_task
from . import inspect
from .queue import Queue

WORKER_ID = re.compile(r"(" + GO_WORKER_ID.pattern + "|" + re.escape(WORKER_ID_PREFIX) + r"[0-9a-f]{32}(-[0-9]+)?(:\{[^{}]+\})?)")
"""go-delayed's worker ids (32 hex digits) and ours (delayed-py-, 32 hex digits, maybe -N for an extra slot,
then the queue's hash tag if it has one)."""
COUNTED_FIELDS = frozenset(COUNTED_EVENTS + COUNTED_WORKFLOWS)
"""What a queue's counts hash holds: its tasks' events and its workflows'."""
LETTER_HEAD = 64 * 1024
"""Bytes of a would-be queue's first dead letter read to tell whether it is one of ours."""


def queue_names(conn: redis.Redis) -> List[str]:
    """The queues of ours or go-delayed's that have keys now; other programs' keys are left alone.

    A name N counts when one of its keys has the right type and looks like ours: `N` a list and
    `N_noti` a list of "1"s; `N_processing` a hash with a worker id among up to 10 of its fields;
    `N_workers` a sorted set whose first member is one of our worker ids; `N_scheduled` a sorted
    set whose first member is 8 bytes and a task blob; `N_dead_letters` a stream (or `N_dead`, as
    older versions kept them, a list) whose first entry is a dead-letter record; `N_counts` a hash
    whose fields (up to 10) are counted events, of tasks or workflows (a queue drained empty keeps its counters). Cost: those
    of inspect.candidates, and a script per dead-letter stream of a name nothing else showed to be
    a queue (reading the head of its first letter); never a whole key read.
    """
    samples, streams = inspect.candidates(conn)
    found = {sample.name for sample in samples if _looks_ours(sample)}
    found.update(name for name in streams if name not in found and _first_letter_is_ours(conn, name))
    return sorted(found)


def _first_letter_is_ours(conn: redis.Redis, name: str) -> bool:
    """Whether N_dead_letters starts with a dead letter of ours: its record read as a preview (its task
    may be of any size)."""
    try:
        letters = Queue(name, conn).dead.list(count=1, migrate=False, head=LETTER_HEAD)
    except ValueError:  # a name no queue can have (e.g. without a hash tag, on a Redis Cluster): not ours
        return False
    return bool(letters) and letters[0]["reason"] != UNDECODABLE


def _looks_ours(sample: inspect.Sample) -> bool:
    """Whether a key of the right type holds what our (or go-delayed's) queues put there."""
    suffix, head = sample.suffix, sample.head
    if suffix == NOTI_SUFFIX:
        return sample.name_is_list and head == [b"1"]
    if suffix == PROCESSING_SUFFIX:
        return any(WORKER_ID.fullmatch(field.decode(errors="replace")) for field in head)
    if suffix == COUNTS_SUFFIX:
        return bool(head) and all(field.decode(errors="replace") in COUNTED_FIELDS for field in head)
    if suffix == WORKERS_SUFFIX:
        return bool(head) and WORKER_ID.fullmatch(head[0].decode(errors="replace")) is not None
    if suffix == SCHEDULED_SUFFIX:
        return bool(head) and _is_task(head[0])
    try:  # N_dead, the letters of older versions
        entry = json.loads(head[0])
    except (IndexError, ValueError, RecursionError):
        return False
    return isinstance(entry, dict) and "reason" in entry and "task" in entry


def _is_task(blob: bytes) -> bool:
    """Whether a blob decodes as a task, Python's or Go's."""
    try:
        decode_task(blob)
    except MalformedTaskError:
        return False
    return True
