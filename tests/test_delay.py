"""keakon/delayed's `delayed(queue)` decorator, on a Queue and on an AsyncQueue."""
import asyncio
import inspect
import re
import subprocess
import sys
import warnings

import pytest
import redis.asyncio

from delayed import AsyncQueue, PyTask, Queue, delayed

from . import tasks
from .conftest import ROOT


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


def test_on_a_queue_delay_enqueues_at_once(conn, queue):
    task = delayed(queue)
    record = task(tasks.record)
    assert record is tasks.record and not inspect.iscoroutinefunction(record.delay)
    assert record.delay("a", 1, k=2) is None
    assert conn.lrange("q", 0, -1) == [PyTask("tests.tasks:record", ("a", 1), {"k": 2}).serialize()]


def test_on_an_async_queue_delay_is_a_coroutine_function_to_await(conn, redis_server):
    async def produce():
        client = redis.asyncio.Redis.from_url(redis_server.url)
        try:
            task = delayed(AsyncQueue("q", client))
            record = task(tasks.record)
            retried = task(retry=3)(tasks.fail_until)
            coroutine = task(tasks.async_record)
            assert record is tasks.record
            assert inspect.iscoroutinefunction(record.delay)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no "coroutine was never awaited"
                await record.delay("a", 1, k=2)
                await retried.delay("counter", 1)
                await coroutine.delay("c")
        finally:
            await client.aclose()

    asyncio.run(produce())
    assert conn.lrange("q", 0, -1) == [PyTask("tests.tasks:record", ("a", 1), {"k": 2}).serialize(),
                                       PyTask("tests.tasks:fail_until", ("counter", 1), retry=3).serialize(),
                                       PyTask("tests.tasks:async_record", ("c",)).serialize()]
    assert conn.llen("q_noti") == 3


TYPED_USE = '''
import redis
import redis.asyncio
from delayed import AsyncQueue, Queue, delayed


def add(a: int, b: int) -> int:
    return a + b


sync_add = delayed(Queue("q", redis.Redis()))(add)
async_add = delayed(AsyncQueue("q", redis.asyncio.Redis()))(retry=3)(add)
reveal_type(sync_add(1, 2))
reveal_type(sync_add.delay(1, 2))


async def main() -> None:
    pending = async_add.delay(1, 2)
    reveal_type(pending)
    await pending
    await sync_add.delay(1, 2)
    await async_add.delay("1", 2)
'''


def test_the_public_api_is_typed(tmp_path):
    """mypy sees .delay's arguments, and whether it must be awaited."""
    (tmp_path / "use.py").write_text(TYPED_USE)
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", str(tmp_path / "use.py")],
                          cwd=ROOT, capture_output=True, text=True)
    lines = {number: line.strip() for number, line in enumerate(TYPED_USE.splitlines(), 1)}
    said = {}
    for line in done.stdout.splitlines():
        match = re.match(r".*use\.py:(\d+): (?:note|error): (.*)", line)
        if match:
            said.setdefault(lines[int(match[1])], []).append(match[2])
    assert said.pop("reveal_type(sync_add(1, 2))") == ['Revealed type is "int"'], done.stdout
    assert said.pop("reveal_type(sync_add.delay(1, 2))") == ['Revealed type is "None"'], done.stdout
    assert 'Revealed type is "typing.Coroutine[Any, Any, None]"' in said.pop("reveal_type(pending)"), done.stdout
    assert any("not awaitable" in note or "Awaitable" in note for note in said.pop("await sync_add.delay(1, 2)"))
    assert any("incompatible type" in note for note in said.pop('await async_add.delay("1", 2)'))
    assert not said, done.stdout
