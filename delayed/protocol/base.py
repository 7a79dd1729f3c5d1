"""A queue's keys, connection and settings: what Queue (the producer's face) and the operations of
workers and sweepers on it share."""
from typing import Any, Optional

import redis
from redis.crc import key_slot

from ..wire.keys import QueueKeys, check_queue_name
from .connection import is_cluster
from .send_once import sent_once
from .dead_letters import DEFAULT_DEAD_MAX, DEFAULT_DEAD_MAX_AGE, DeadLetters
from .producer import DEFAULT_MAX_TASK_SIZE


def queue_keys(name: str, conn: Any) -> QueueKeys:
    """The keys of queue `name`; a name no queue can have (empty, another queue's key, or on a Redis
    Cluster without a hash tag) is refused (ValueError: see check_queue_name)."""
    check_queue_name(name, is_cluster(conn))
    return QueueKeys.of(name)


class QueueBase:
    """A go-delayed queue on a redis-py connection: its keys, the client its commands go through
    (each sent once: see send_once.sent_once), its settings and its dead letters (`dead`).
    Queue documents the arguments."""

    def __init__(
        self,
        name: str,
        conn: redis.Redis,
        dequeue_timeout: float = 1,
        keep_alive_timeout: float = 60,
        max_task_size: int = DEFAULT_MAX_TASK_SIZE,
        dead_max: int = DEFAULT_DEAD_MAX,
        dead_max_age: float = DEFAULT_DEAD_MAX_AGE,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
    ) -> None:
        self.keys = queue_keys(name, conn)
        self.conn = sent_once(conn)
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self.dequeue_timeout = dequeue_timeout
        self.keep_alive_timeout = keep_alive_timeout
        self.max_task_size = max_task_size
        self.dead = DeadLetters(self.conn, self.keys, dead_max, dead_max_age)
        self.worker_id: Optional[str] = None

    @property
    def name(self) -> str:
        return self.keys.name

    @property
    def slot(self) -> int:
        """The Redis Cluster hash slot of the queue's keys."""
        return key_slot(self.name.encode())

    def id_or_own(self, worker_id: Optional[str]) -> str:
        """worker_id, else the queue's; a worker method called with neither is a bug, said plainly."""
        chosen = worker_id or self.worker_id
        if chosen is None:
            raise ValueError("no worker id: pass one, or set queue.worker_id")
        return chosen
