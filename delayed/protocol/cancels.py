"""What a worker hears of cancels: the ids that tracking.lua's track.cancel publishes on a queue's cancels
channel (wire/keys.py's QueueKeys.cancels) when a tracked task a worker holds is cancelled.

Pubsub is fire-and-forget: a message sent while the listener is not subscribed (reconnecting after an
outage) is lost. Nothing depends on it but how soon a task stops: the script that ends the task reads
the request in its record and ends it cancelled, whether or not its worker heard of it.
"""
from typing import Any, List, Optional, Sequence

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

    def subscribe(self) -> None:
        """Subscribe on a connection of its own (a Redis error closes it, and is raised)."""
        try:
            self._pubsub = self._conn.pubsub(ignore_subscribe_messages=True)
            self._pubsub.subscribe(*self.channels)
        except redis.RedisError:
            self.close()
            raise

    def listen(self, timeout: float) -> List[str]:
        """The task ids published on the channels, waiting up to timeout seconds for the first (subscribing
        first if it is not subscribed). A Redis error closes the connection, and is raised: the next call
        subscribes again."""
        if self._pubsub is None:
            self.subscribe()
        assert self._pubsub is not None
        try:
            ids = []
            message = self._pubsub.get_message(timeout=timeout)
            while message is not None:
                data = message["data"]
                ids.append(data.decode("ascii", errors="replace") if isinstance(data, bytes) else str(data))
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
