"""What `python -m delayed` shows and does: queue counts, dead letters, scheduled tasks, workers."""
import datetime
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

import redis

from .errors import MalformedTaskError
from .keys import DEAD_SUFFIX, NOTI_SUFFIX, PROCESSING_SUFFIX, SCHEDULED_SUFFIX, WORKERS_SUFFIX, QueueKeys
from .queue import Queue
from .task import decode_task

Row = Dict[str, Any]
# Replies are cast to what a connection that does not decode responses returns (ours never do).


def queue_names(conn: redis.Redis) -> List[str]:
    """The queues that have any of our keys now (found with SCAN, so cheap on a busy Redis)."""
    names = set()
    for suffix in (NOTI_SUFFIX, PROCESSING_SUFFIX, DEAD_SUFFIX, SCHEDULED_SUFFIX, WORKERS_SUFFIX):
        for key in conn.scan_iter(match="*" + suffix, count=1000):
            names.add(key.decode()[: -len(suffix)])
    return sorted(names)


def stats(conn: redis.Redis, names: Sequence[str]) -> List[Row]:
    """Per queue: tasks pending, held by workers, scheduled, dead; our live workers."""
    with conn.pipeline(transaction=False) as pipe:
        for keys in map(QueueKeys.of, names):
            pipe.llen(keys.name)
            pipe.hlen(keys.processing)
            pipe.zcard(keys.scheduled)
            pipe.llen(keys.dead)
            pipe.zcount(keys.workers, time.time(), "+inf")
        counts = pipe.execute()
    fields = ("pending", "processing", "scheduled", "dead", "workers")
    return [{"queue": name, **dict(zip(fields, counts[i * 5:i * 5 + 5]))} for i, name in enumerate(names)]


def workers(conn: redis.Redis, names: Sequence[str]) -> List[Row]:
    """Our live workers per queue: id, seconds until their keep-alive lapses, tasks they hold now."""
    now = time.time()
    rows = []
    for keys in map(QueueKeys.of, names):
        held = [field.decode() for field in cast(List[bytes], conn.hkeys(keys.processing))]
        live = cast(List[Tuple[bytes, float]], conn.zrangebyscore(keys.workers, now, "+inf", withscores=True))
        for member, expires in live:
            worker_id = member.decode()
            rows.append({"queue": keys.name, "worker": worker_id, "expires_in": round(expires - now, 1),
                         "holding": sum(field.startswith(worker_id) for field in held)})
    return rows


def _describe(blob: bytes) -> str:
    try:
        task = decode_task(blob)
    except MalformedTaskError:
        return f"<{len(blob)} undecodable bytes>"
    return repr(task)


def dead_letters(conn: redis.Redis, name: str, after: Optional[str] = None, count: int = 20) -> List[Row]:
    """Up to count dead letters after the letter id `after` (default: from the oldest), parsed, with their ids."""
    return Queue(name, conn).dead_letters(after, count)


def dead_letter(conn: redis.Redis, name: str, letter_id: str) -> Row:
    """One dead letter, parsed; DeadLetterError if there is none with this id."""
    return Queue(name, conn).dead_letter(letter_id)


def requeue_dead(conn: redis.Redis, name: str, letter_ids: Optional[Sequence[str]] = None,
                 progress: Optional[Callable[[int, int], None]] = None) -> int:
    """Move dead letters (those with letter_ids, or all, in chunks, reporting progress) back into the
    queue, each task with its notification; returns how many moved. A missing id: DeadLetterError,
    and nothing moves."""
    queue = Queue(name, conn)
    return queue.requeue_all_dead(progress) if letter_ids is None else queue.requeue_dead(letter_ids)


def delete_dead(conn: redis.Redis, name: str, letter_ids: Sequence[str]) -> int:
    """Delete these dead letters; a missing id: DeadLetterError, and nothing is deleted."""
    return Queue(name, conn).delete_dead(letter_ids)


def purge_dead(conn: redis.Redis, name: str) -> int:
    """Delete every dead letter of the queue; returns how many there were."""
    return Queue(name, conn).purge_dead()


def scheduled(conn: redis.Redis, name: str, count: int = 20) -> List[Row]:
    """The next tasks to become due: when, and what."""
    members = cast(List[Tuple[bytes, float]],
                   conn.zrange(QueueKeys.of(name).scheduled, 0, count - 1, withscores=True))
    return [{"due": datetime.datetime.fromtimestamp(due, datetime.timezone.utc).isoformat(timespec="seconds"),
             "task": _describe(member[8:])} for member, due in members]


def describe_dead(entry: Row) -> Row:
    """A dead letter for display: its task decoded when it can be (None if it has none)."""
    return {**entry, "task": None if entry["task"] is None else _describe(entry["task"])}
