"""What operators read of workflows (see delayed/protocol/lua/flow.lua for the fields): their steps'
records, field by field, in chunks; which workflows exist; and which of a workflow's waiting steps a
worker that does not track tasks took (lua/stalled_steps.lua). Replies come back as plain data; what
to show and how is delayed.ops'."""
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple, cast

import redis

from ..wire.keys import FLOW_INFIX, QueueKeys
from .scripts import Script, Scripts

STALLED_STEPS = Script("stalled_steps")

CHUNK = 1000
"""Records read per round trip."""


def step_fields(conn: redis.Redis, records: Sequence[str], fields: Sequence[str]) -> List[List[Optional[bytes]]]:
    """These fields of each record (None where a field, or the record, is missing), in order: one
    pipelined HMGET each, CHUNK to a round trip."""
    found: List[List[Optional[bytes]]] = []
    for first in range(0, len(records), CHUNK):
        with conn.pipeline(transaction=False) as pipe:
            for record in records[first:first + CHUNK]:
                pipe.hmget(record, list(fields))
            found += cast(List[List[Optional[bytes]]], pipe.execute())
    return found


def record_field(conn: redis.Redis, record: str, field: str) -> Optional[bytes]:
    """One field of a record (a step's `flow`, say), or None."""
    return cast(Optional[bytes], conn.hget(record, field))


def with_workflows(conn: redis.Redis, names: Sequence[str]) -> List[str]:
    """The queues among names on which a workflow was ever enqueued (their counts hash's
    workflows_started), in one round trip: the others have no workflow to look for."""
    with conn.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hget(QueueKeys.of(name).counts, "workflows_started")
        started = pipe.execute(raise_on_error=False)  # WRONGTYPE: another program's key, no workflow
    return [name for name, count in zip(names, started) if isinstance(count, bytes) and int(count) > 0]


def workflow_keys(conn: redis.Redis) -> Iterator[str]:
    """The keys of the workflows in the database (hashes N_flow:<id>, every node's on a cluster), as a
    SCAN MATCH finds them, CHUNK keys a call: a caller stops when it has seen enough. Other keys whose
    name holds FLOW_INFIX may come too (their TYPE is not asked)."""
    for raw in conn.scan_iter(match="*" + FLOW_INFIX + "*", count=CHUNK):
        yield cast(bytes, raw).decode(errors="replace")


def workflow_states(conn: redis.Redis, keys: Sequence[str]) -> List[Tuple[Optional[str], int]]:
    """The status and the number of steps of each workflow ((None, 0): no such hash, or another program's
    key of another type). One round trip."""
    with conn.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.hmget(key, ("status", "total"))
        replies = pipe.execute(raise_on_error=False)  # WRONGTYPE for a key that is no hash
    return [(reply[0].decode(errors="replace"), int(reply[1] or 0)) if isinstance(reply, list) and reply[0] else
            (None, 0) for reply in replies]


class StalledStep(NamedTuple):
    """A step whose record says it waits, while a worker holds its blob (worker: that worker's id) or its
    blob is nowhere (worker: None)."""

    record: str
    status: str
    func: str
    worker: Optional[str]


class StallLook(NamedTuple):
    """What stalled_steps found of a workflow: its status ("" if it has none), the steps it looked at,
    those it could not tell (in a queue or processing hash longer than it looks through), and the
    stalled ones."""

    status: str
    looked: int
    unchecked: int
    stalled: List[StalledStep]


def stalled_steps(conn: redis.Redis, flow_keys: Sequence[str], limit: int, budget: int,
                  depth: int) -> List[StallLook]:
    """Per workflow (best all of one queue: its queues are then read once), the waiting steps of a running
    (or failed) one that a worker which does not track tasks took: one script call (lua/stalled_steps.lua:
    it looks at the first limit steps of each, budget in all, through the first depth tasks of a queue
    and processing entries)."""
    if not flow_keys:
        return []
    reply = cast(List[object], Scripts(conn)[STALLED_STEPS](flows=flow_keys, limit=limit, budget=budget, depth=depth))

    def text(value: object) -> str:
        return cast(bytes, value).decode(errors="replace")

    looks, at = [], 0
    for _ in flow_keys:
        status, looked, unchecked, count = text(reply[at]), int(cast(int, reply[at + 1])), int(cast(int, reply[at + 2])), \
            int(cast(int, reply[at + 3]))
        rest = reply[at + 4:at + 4 + 4 * count]
        looks.append(StallLook(status, looked, unchecked,
                               [StalledStep(text(rest[i]), text(rest[i + 1]), text(rest[i + 2]), text(rest[i + 3]) or None)
                                for i in range(0, len(rest), 4)]))
        at += 4 + 4 * count
    return looks
