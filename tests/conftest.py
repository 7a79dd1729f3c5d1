import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, List

import pytest
import redis

from delayed import Worker
from delayed.testing import RedisServer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    os.environ["DELAYED_TEST_REDIS_URL"] = server.url
    yield server
    server.stop()


@pytest.fixture
def conn(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def run_worker(queue):
    """Start a Worker on the test module's `queue` fixture in a thread; stopped and joined after the test."""
    started = []

    def start(allow=("tests.tasks",)):
        worker = Worker(queue, allow, keep_alive_interval=1)
        thread = threading.Thread(target=worker.run)
        thread.start()
        started.append((worker, thread))
        return worker

    yield start
    for worker, thread in started:
        worker.stop()
        thread.join(10)
        assert not thread.is_alive()


def wait_for(condition: Callable[[], object], timeout: float = 10, what: str = "condition"):
    """Poll condition until it is truthy; fail the test if it is not within timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def results(client: redis.Redis) -> List[str]:
    return [item.decode() for item in client.lrange("results", 0, -1)]


def spawn(module: str, *args: str, redis_url: str, task_redis_url: str = "", **popen) -> subprocess.Popen:
    """Start `python -m module args...` from the repo root, able to import tests.tasks.

    tests.tasks records into task_redis_url, by default the same Redis as redis_url.
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT), DELAYED_TEST_REDIS_URL=task_redis_url or redis_url)
    return subprocess.Popen(
        [sys.executable, "-m", module, "--redis-url", redis_url, *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen,
    )
