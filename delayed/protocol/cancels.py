"""What a worker hears of cancels: the ids that tracking.lua's track.cancel publishes on a queue's cancels
channel (wire/keys.py's QueueKeys.cancels) when a tracked task a worker holds is cancelled.

Pubsub is fire-and-forget: a message sent while the listener is not subscribed (reconnecting after an
outage) is lost. Nothing depends on it but how soon a task stops: the script that ends the task reads
the request in its record and ends it cancelled, whether or not its worker heard of it.
"""
from typing import Any, Dict, List, Optional, Sequence

import redis

from .base import QueueBase


class CancelListener:
    """A pubsub connection subscribed to the cancels channels of queues (on one Redis: the first one's
    connection's), made on first use and again after an error."""

    def __init__(self, queues: Sequence[QueueBase]) -> None:
        self._conn = queues[0].conn
        self.channels = [queue.keys.cancels for queue in queues]
        self._pubsub: Optional[Any] = None

    @property
    def subscribed(self) -> bool:
        """Whether it is subscribed (its last call did not fail)."""
        return self._pubsub is not None

    def subscribe(self) -> List[str]:
        """Subscribe on a connection of its own, and wait until Redis confirmed every channel: the task ids
        published meanwhile. A Redis error closes the connection, and is raised."""
        try:
            self._pubsub = self._conn.pubsub()
            self._pubsub.subscribe(*self.channels)
            ids: List[str] = []
            confirmed = 0
            while confirmed < len(self.channels):
                message = self._pubsub.get_message(timeout=None)  # a read of the connection's own timeout
                if message is not None and message["type"] == "subscribe":
                    confirmed += 1
                ids += _published(message)
            return ids
        except redis.RedisError:
            self.close()
            raise

    def listen(self, timeout: float) -> List[str]:
        """The task ids published on the channels, waiting up to timeout seconds for the first (subscribing
        first if it is not subscribed). A Redis error closes the connection, and is raised: the next call
        subscribes again."""
        ids = [] if self._pubsub is not None else self.subscribe()
        assert self._pubsub is not None
        try:
            message = self._pubsub.get_message(timeout=timeout)
            while message is not None:
                ids += _published(message)
                message = self._pubsub.get_message(timeout=0)
            return ids
        except redis.RedisError:
            self.close()
            raise

    def close(self) -> None:
        """Close the connection (the next listen() subscribes again)."""
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            try:
                pubsub.close()
            except redis.RedisError:  # a connection that broke closes all the same
                pass


def _published(message: Optional[Dict[str, Any]]) -> List[str]:
    """The task id a pubsub message carries: [] for none, or for a subscription's confirmation."""
    if message is None or message["type"] != "message":
        return []
    data = message["data"]
    return [data.decode("ascii", errors="replace") if isinstance(data, bytes) else str(data)]
