"""Queue operations on Redis: every command a producer, worker or sweeper sends lives here."""
from typing import Any, Iterable, List, Optional, Sequence, Union

import redis
import redis.asyncio

from . import scripts
from .errors import TaskTooLargeError
from .keys import QueueKeys
from .task import GoTask, PyTask

Task = Union[PyTask, GoTask]

DEFAULT_MAX_TASK_SIZE = 1024 * 1024
"""Bytes; larger blobs are refused at enqueue and dead-lettered when found in a queue."""

NOTIFICATION = b"1"


def _blobs(tasks: Iterable[Task], max_task_size: int) -> List[bytes]:
    """Serialize tasks, refusing oversized ones before anything reaches Redis."""
    blobs = []
    for task in tasks:
        blob = task.serialize()
        if len(blob) > max_task_size:
            raise TaskTooLargeError(
                f"{task.func_path}: {len(blob)} bytes is over the queue's max_task_size of {max_task_size}"
            )
        blobs.append(blob)
    return blobs


def _stage_push(pipe: Any, keys: QueueKeys, blobs: Sequence[bytes]) -> None:
    """Queue the two commands of an enqueue on a pipeline: the blobs, then one notification each."""
    pipe.rpush(keys.name, *blobs)
    pipe.rpush(keys.noti, *([NOTIFICATION] * len(blobs)))


class Queue:
    """A go-delayed queue on a redis-py connection (drop-in for keakon/delayed 1.x's Queue).

    dequeue_timeout: seconds a worker blocks waiting for a notification.
    keep_alive_timeout: seconds a worker's keep-alive key lives without a refresh.
    worker_id: the id of the worker using this queue; set by Worker, used by
    dequeue/release and the keep-alive methods.
    """

    def __init__(
        self,
        name: str,
        conn: redis.Redis,
        dequeue_timeout: float = 1,
        keep_alive_timeout: float = 60,
        max_task_size: int = DEFAULT_MAX_TASK_SIZE,
    ) -> None:
        self.keys = QueueKeys.of(name)
        self.conn = conn
        self.dequeue_timeout = dequeue_timeout
        self.keep_alive_timeout = keep_alive_timeout
        self.max_task_size = max_task_size
        self.worker_id: Optional[str] = None
        self._scripts = scripts.register(conn)

    @property
    def name(self) -> str:
        return self.keys.name

    # Producers

    def enqueue(self, task: Task) -> None:
        """Append a task: its blob and its notification in one atomic round trip."""
        self.enqueue_many((task,))

    def enqueue_many(self, tasks: Iterable[Task]) -> int:
        """Append many tasks in one atomic round trip; returns how many."""
        blobs = _blobs(tasks, self.max_task_size)
        if blobs:
            with self.conn.pipeline(transaction=True) as pipe:
                _stage_push(pipe, self.keys, blobs)
                pipe.execute()
        return len(blobs)

    def len(self) -> int:
        """Tasks waiting in the queue (not counting those being processed)."""
        return self.conn.llen(self.keys.name)

    # Workers

    def claim(self) -> Optional[bytes]:
        """Wait up to dequeue_timeout for a task and hold it as this worker's; the raw blob or None."""
        if not self.conn.blpop([self.keys.noti], self.dequeue_timeout):
            return None
        return self._scripts["dequeue"](keys=(self.keys.name, self.keys.processing), args=(self.worker_id,))

    def dequeue(self) -> Optional[PyTask]:
        """claim() decoded as a PyTask (keakon/delayed's API); raises MalformedTaskError for bad blobs."""
        blob = self.claim()
        return None if blob is None else PyTask.deserialize(blob)

    def release(self) -> None:
        """Forget the task this worker holds: it is done."""
        self.conn.hdel(self.keys.processing, self.worker_id)

    def requeue(self, blob: bytes) -> None:
        """Enqueue blob (a retry of the held task) and release the held task, atomically."""
        self._scripts["requeue"](
            keys=(self.keys.name, self.keys.noti, self.keys.processing), args=(self.worker_id, blob)
        )

    def bury(self, record: bytes) -> None:
        """Append a dead-letter record and release the held task, atomically."""
        self._scripts["bury"](keys=(self.keys.dead, self.keys.processing), args=(self.worker_id, record))

    def try_online(self) -> bool:
        """Claim worker_id's keep-alive key; False if a live worker already has it."""
        return bool(self.conn.set(self.worker_id, 1, px=self._keep_alive_ms, nx=True))

    def keep_alive(self) -> None:
        """Refresh worker_id's keep-alive key."""
        self.conn.set(self.worker_id, 1, px=self._keep_alive_ms)

    def go_offline(self) -> None:
        """Delete worker_id's keep-alive key: the worker holds nothing and is leaving."""
        self.conn.delete(self.worker_id)

    @property
    def _keep_alive_ms(self) -> int:
        return max(1, int(self.keep_alive_timeout * 1000))

    # Sweepers

    def requeue_lost(self) -> int:
        """Requeue the tasks of dead workers and top up notifications (go-delayed's sweep).

        Returns the number of notifications pushed, as go-delayed does.
        """
        return self._scripts["requeue_lost"](keys=(self.keys.name, self.keys.noti, self.keys.processing))

    # Dead letters

    def dead_letters(self, start: int = 0, end: int = -1) -> List[bytes]:
        """Raw dead-letter records (JSON), oldest first; see delayed.dead_letter.parse."""
        return self.conn.lrange(self.keys.dead, start, end)


class AsyncQueue:
    """The producer side of Queue for asyncio code, on a redis.asyncio connection."""

    def __init__(
        self, name: str, conn: redis.asyncio.Redis, max_task_size: int = DEFAULT_MAX_TASK_SIZE
    ) -> None:
        self.keys = QueueKeys.of(name)
        self.conn = conn
        self.max_task_size = max_task_size

    @property
    def name(self) -> str:
        return self.keys.name

    async def enqueue(self, task: Task) -> None:
        """Append a task: its blob and its notification in one atomic round trip."""
        await self.enqueue_many((task,))

    async def enqueue_many(self, tasks: Iterable[Task]) -> int:
        """Append many tasks in one atomic round trip; returns how many."""
        blobs = _blobs(tasks, self.max_task_size)
        if blobs:
            async with self.conn.pipeline(transaction=True) as pipe:
                _stage_push(pipe, self.keys, blobs)
                await pipe.execute()
        return len(blobs)

    async def len(self) -> int:
        return await self.conn.llen(self.keys.name)
