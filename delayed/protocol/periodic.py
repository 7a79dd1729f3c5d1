"""What the scheduler sends: claim one tick of a periodic entry and enqueue its task, so that of all
the replicas that see the tick exactly one enqueues it."""
from typing import Any, Sequence

from ..wire.keys import LEGACY_PERIODIC_KEY, QueueKeys
from .connection import is_cluster
from .scripts import Script

TICK = Script("tick")


class Ticks:
    """The scheduler's ticks on conn; outside a cluster each also looks at the hash of every queue's
    ticks older versions kept (one hash spans slots, so a cluster cannot)."""

    def __init__(self, conn: Any) -> None:
        self._tick = TICK.bind(conn)
        self._legacy: Sequence[str] = () if is_cluster(conn) else (LEGACY_PERIODIC_KEY,)

    def claim(self, keys: QueueKeys, entry: str, tick: float, blob: bytes, enqueue: bool) -> bool:
        """Claim entry's tick (unix seconds) on keys' queue, enqueueing blob if enqueue (else the tick
        is claimed and skipped); False if another replica claimed it first."""
        return bool(self._tick(periodic=keys.periodic, name=keys.name, noti=keys.noti, counts=keys.counts,
                               legacy=self._legacy, entry=entry, tick=repr(tick), blob=blob, enqueue=int(enqueue)))
