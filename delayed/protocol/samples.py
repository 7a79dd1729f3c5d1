"""The dashboard's history: per queue, samples of its counts and counters in a capped, expiring stream
(QueueKeys.samples), each entry's id saying when (Redis's clock), so charts survive a restart."""
from typing import Any, Dict, List, Sequence, Tuple, cast

import redis

from ..wire.keys import QueueKeys

Sample = Tuple[float, Dict[str, int]]
"""When (unix seconds), and the numbers sampled by name."""


def append(conn: redis.Redis, samples: Sequence[Tuple[str, Dict[str, int]]], keep: int, ttl: int) -> None:
    """Add a sample (queue name, numbers) to each queue's stream, which keeps its newest keep entries and
    expires ttl seconds after the last one (a queue gone leaves nothing behind). One round trip."""
    with conn.pipeline(transaction=False) as pipe:
        for name, numbers in samples:
            key = QueueKeys.of(name).samples
            pipe.xadd(key, cast(Dict[Any, Any], numbers), maxlen=keep, approximate=False)  # redis-py's dict type
            pipe.expire(key, ttl)
        pipe.execute()


def newest(conn: redis.Redis, names: Sequence[str], count: int) -> Dict[str, List[Sample]]:
    """Each queue's newest count samples, oldest first. One round trip."""
    with conn.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.xrevrange(QueueKeys.of(name).samples, count=count)
        replies = cast(List[List[Tuple[bytes, Dict[bytes, bytes]]]], pipe.execute())
    return {name: [(_when(entry_id), {field.decode(): int(value) for field, value in fields.items()})
                   for entry_id, fields in reversed(entries)]
            for name, entries in zip(names, replies)}


def _when(entry_id: bytes) -> float:
    """A stream entry id's time: its milliseconds part, in seconds."""
    return int(entry_id.split(b"-")[0]) / 1000
