"""Queue and AsyncQueue are two faces of one producer (and TaskHandle and AsyncTaskHandle of one handle):
what one face offers, the other offers too, with the same arguments, and does the same against Redis."""
import asyncio
import inspect

import pytest
import redis.asyncio

import delayed.queue
from delayed import (
    AsyncQueue,
    AsyncTaskHandle,
    DuplicateTaskError,
    GoTask,
    NotReplicatedError,
    PyTask,
    Queue,
    TaskHandle,
)
from delayed.wire.task import decode_task

SYNC_ONLY = {
    "dead",  # the dead letters are an operator's: DeadLetters is sync, read by the delayed command and the dashboard
}
"""Public names Queue has and AsyncQueue has not, each for a reason given here."""
KEAKON = {"dequeue", "release", "keep_alive", "requeue_lost", "worker_id", "dequeue_timeout", "keep_alive_timeout"}
"""What keakon/delayed 1.x's Queue (delayed.queue.Queue) adds to Queue: its worker calls and timing."""


def public(obj):
    return {name for name in dir(obj) if not name.startswith("_")}


@pytest.fixture
def faces(conn, redis_server):
    client = redis.asyncio.Redis.from_url(redis_server.url)
    yield Queue("q", conn), AsyncQueue("q", client)
    asyncio.run(client.aclose())


def test_a_public_name_on_one_queue_face_is_on_the_other(faces):
    sync, async_ = faces
    assert public(sync) - SYNC_ONLY == public(async_)


def test_a_public_name_on_one_handle_face_is_on_the_other(faces):
    sync, async_ = faces
    assert public(sync.task("0" * 32)) == public(async_.task("0" * 32))
    assert public(TaskHandle) == public(AsyncTaskHandle)


@pytest.mark.parametrize("pair", [(Queue, AsyncQueue), (TaskHandle, AsyncTaskHandle)])
def test_each_method_takes_the_same_arguments_on_both_faces_and_is_awaited_on_the_async_one(pair):
    sync, async_ = pair
    for name, method in inspect.getmembers(sync, inspect.isfunction):
        if name.startswith("_") or name in SYNC_ONLY:
            continue
        twin = getattr(async_, name)
        assert list(inspect.signature(method).parameters) == list(inspect.signature(twin).parameters), name
        assert inspect.iscoroutinefunction(twin) or name in ("task", "workflow"), f"{async_.__name__}.{name} is not awaited"


def test_keakons_queue_is_the_producers_with_keakons_worker_calls(conn):
    keakon = delayed.queue.Queue("q", conn, dequeue_timeout=0.05, keep_alive_timeout=5)
    assert isinstance(keakon, Queue)
    assert public(keakon) - public(Queue("q", conn)) == KEAKON
    assert not public(Queue("q", conn)) & KEAKON  # the producer's Queue has none of them


def test_the_async_queue_pauses_resumes_and_moves_due_tasks(conn, redis_server):
    async def scenario():
        client = redis.asyncio.Redis.from_url(redis_server.url)
        try:
            queue = AsyncQueue("q", client)
            assert await queue.pause() and not await queue.pause()
            paused_at = await queue.paused_since()
            assert await queue.resume() and not await queue.resume()
            await queue.enqueue(PyTask("m:f", [1]), delay=0.01)
            conn.zadd("q_scheduled", {member: 0 for member in conn.zrange("q_scheduled", 0, -1)})  # due now
            moved = await queue.move_due()
            return paused_at, await queue.paused_since(), moved, await queue.len(), queue.slot
        finally:
            await client.aclose()

    paused_at, after, moved, length, slot = asyncio.run(scenario())
    assert paused_at is not None and after is None
    assert (moved, length) == (1, 1) and conn.lrange("q", 0, -1) == [PyTask("m:f", [1]).serialize()]
    assert slot == Queue("q", conn).slot


@pytest.mark.parametrize("many", [False, True])
def test_the_async_queue_waits_for_replicas_as_the_queue_does(conn, redis_server, many):
    async def enqueue():
        client = redis.asyncio.Redis.from_url(redis_server.url)
        try:
            queue = AsyncQueue("q", client, wait_replicas=1, wait_timeout_ms=10)  # a server with no replica
            if many:
                await queue.enqueue_many([PyTask("m:f"), PyTask("m:g")])
            else:
                await queue.enqueue(PyTask("m:f"))
        finally:
            await client.aclose()

    with pytest.raises(NotReplicatedError, match="0 of 1 replicas") as raised:
        asyncio.run(enqueue())
    assert raised.value.acknowledged == 0
    assert conn.llen("q") == (2 if many else 1)  # on the primary all the same
    with pytest.raises(NotReplicatedError, match="0 of 1 replicas"):
        Queue("q", conn, wait_replicas=1, wait_timeout_ms=10).enqueue(PyTask("m:f"))


def test_both_faces_track_and_lock_a_gotask_alike(conn, redis_server):
    """enqueue(GoTask, result_ttl=, unique_for=) writes the same record and lock from either face."""
    sync = Queue("q", conn)
    given = dict(result_ttl=60, unique_for=60, max_retries=2)

    def enqueued_by_sync():
        handle = sync.enqueue(GoTask("main.Add", [1, 2]), **given)
        return handle.id, handle.info().status

    async def enqueued_by_async():
        client = redis.asyncio.Redis.from_url(redis_server.url)
        try:
            handle = await AsyncQueue("q", client).enqueue(GoTask("main.Add", [1, 2]), **given)
            return handle.id, (await handle.info()).status
        finally:
            await client.aclose()

    made = []
    for enqueue in (enqueued_by_sync, lambda: asyncio.run(enqueued_by_async())):
        task_id, status = enqueue()
        task = decode_task(conn.lindex("q", -1))
        with pytest.raises(DuplicateTaskError):
            sync.enqueue(GoTask("main.Add", [1, 2]), unique_for=60, max_retries=2)  # the same call, untracked
        made.append((status, task.options.id == task_id, task.options.max_retries, task.args,
                     conn.hget(f"q_task:{task_id}", "func")))
        conn.delete(f"q_unique:{task.options.unique_key}")
    assert made == [("pending", True, 2, [1, 2], b"main.Add")] * 2
