import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import List

import pytest
import redis

from delayed import Queue, Worker
from delayed.testing import RedisServer, wait_for  # noqa: F401  (tests import wait_for from here)

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
    """Start a Worker on the test module's `queue` fixture in a thread (options such as threads=N go
    to Worker); stopped and joined after the test."""
    started = []

    def start(allow=("tests.tasks",), **options):
        worker = Worker(queue, allow, keep_alive_interval=1, **options)
        thread = threading.Thread(target=worker.run)
        thread.start()
        started.append((worker, thread))
        return worker

    yield start
    for worker, thread in started:
        worker.stop()
        thread.join(10)
        assert not thread.is_alive()


@pytest.fixture
def start_worker(conn):
    """Start a Worker on the named queues (in priority order) in a thread; stopped and joined after the test."""
    started = []

    def start(*names, **options):
        queues = [Queue(name, conn, dequeue_timeout=0.05, keep_alive_timeout=5) for name in names]
        worker = Worker(queues, ["tests.tasks"], keep_alive_interval=1, **options)
        thread = threading.Thread(target=worker.run)
        thread.start()
        started.append((worker, thread))
        return worker

    yield start
    for worker, thread in started:
        worker.stop()
        thread.join(10)
        assert not thread.is_alive()


def results(client: redis.Redis) -> List[str]:
    return [item.decode() for item in client.lrange("results", 0, -1)]


def tags(client: redis.Redis) -> List[str]:
    """The tags tests.tasks.record recorded, in order."""
    return [eval(result)[0] for result in results(client)]


def spawn(module: str, *args: str, redis_url: str, task_redis_url: str = "", **popen) -> subprocess.Popen:
    """Start `python -m module args...` from the repo root, able to import tests.tasks.

    tests.tasks records into task_redis_url, by default the same Redis as redis_url.
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT), DELAYED_TEST_REDIS_URL=task_redis_url or redis_url)
    return subprocess.Popen(
        [sys.executable, "-m", module, "--redis-url", redis_url, *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen,
    )
