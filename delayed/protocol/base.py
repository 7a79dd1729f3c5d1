"""A queue on a redis-py client: its keys, the client its commands go through, its producer settings
and its dead letters; what Queue (the producer's face) and the operations of workers and sweepers on
it share."""
from typing import Any, Sequence, TypeVar

import redis

from ..wire.hooks import Middleware
from ..wire.keys import QueueKeys, check_queue_name
from .calls import Executor, Plan
from .connection import is_cluster
from .dead_letters import DEFAULT_DEAD_MAX, DEFAULT_DEAD_MAX_AGE, DeadLetters
from .handles import TaskHandle
from .producer import DEFAULT_MAX_TASK_SIZE, Producer
from .send_once import sent_once

T = TypeVar("T")


def queue_keys(name: str, conn: Any) -> QueueKeys:
    """The keys of queue `name`; a name no queue can have (empty, another queue's key, or on a Redis
    Cluster without a hash tag) is refused (ValueError: see check_queue_name)."""
    check_queue_name(name, is_cluster(conn))
    return QueueKeys.of(name)


class QueueBase(Producer[TaskHandle]):
    """A go-delayed queue on a redis-py connection: its keys, the client its commands go through
    (each sent once: see send_once.sent_once), its settings and its dead letters (`dead`).
    Queue documents the arguments."""

    def __init__(
        self,
        name: str,
        conn: redis.Redis,
        max_task_size: int = DEFAULT_MAX_TASK_SIZE,
        dead_max: int = DEFAULT_DEAD_MAX,
        dead_max_age: float = DEFAULT_DEAD_MAX_AGE,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
        middleware: Sequence[Middleware] = (),
    ) -> None:
        keys = queue_keys(name, conn)
        super().__init__(keys, sent_once(conn), max_task_size, wait_replicas, wait_timeout_ms, middleware)
        self.dead = DeadLetters(self.conn, self.keys, dead_max, dead_max_age)
        self._executor = Executor(self.conn, self.keys)

    def _run(self, plan: Plan[T]) -> T:
        return self._executor.run(plan)
