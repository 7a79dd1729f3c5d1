"""What the scheduler sends: read Redis's clock, and claim one tick of a periodic entry and enqueue its
task, so that of all the replicas that see the tick exactly one enqueues it."""
import enum
from typing import Any, Dict, Sequence

from ..wire.keys import LEGACY_PERIODIC_KEY, QueueKeys
from .connection import is_cluster
from .scripts import Script, Scripts

TICK = Script("tick")


class Claim(enum.IntEnum):
    """What claiming a tick came to (the values tick.lua returns)."""

    WON = 1
    TAKEN = 0
    """Another replica claimed the tick, or a later one, first."""
    EARLY = -1
    """The tick lies in the future by the clock of the Redis holding the queue: refused, nothing written."""


class Ticks:
    """The scheduler's ticks on conn; outside a cluster each also looks at the hash of every queue's
    ticks older versions kept (one hash spans slots, so a cluster cannot)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._cluster = is_cluster(conn)
        self._scripts = Scripts(conn)
        self._legacy: Sequence[str] = () if self._cluster else (LEGACY_PERIODIC_KEY,)

    def clocks(self, queues: Sequence[QueueKeys]) -> Dict[str, float]:
        """Redis's time (unix seconds) for each of queues, by queue name, read with one TIME per server:
        on a cluster, from the node holding each queue (TIME names no key to route by), whose clock is
        the one tick.lua checks the tick against."""
        clocks: Dict[str, float] = {}
        by_server: Dict[str, float] = {}
        for keys in queues:
            node = self._conn.get_node_from_key(keys.periodic) if self._cluster else None
            server = node.name if node else ""
            if server not in by_server:
                by_server[server] = _unix(self._conn.time(target_nodes=node) if node else self._conn.time())
            clocks[keys.name] = by_server[server]
        return clocks

    def claim(self, keys: QueueKeys, entry: str, tick: float, blob: bytes, enqueue: bool) -> Claim:
        """Claim entry's tick (unix seconds) on keys' queue, enqueueing blob if enqueue (else the tick
        is claimed and skipped); TAKEN if another replica claimed it first, EARLY if it is still to come
        by Redis's clock."""
        return Claim(self._scripts[TICK](periodic=keys.periodic, name=keys.name, noti=keys.noti, counts=keys.counts,
                                legacy=self._legacy, entry=entry, tick=repr(tick), blob=blob,
                                enqueue=int(enqueue)))


def _unix(time: Any) -> float:
    """TIME's reply, (seconds, microseconds), as unix seconds."""
    seconds, microseconds = time
    return seconds + microseconds / 1_000_000
