import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, List, Sequence, Tuple

import pytest
import redis

from delayed import Queue, Worker, testing
from delayed.protocol.worker_ops import WorkerOps
from delayed.runtime.lifecycle import Lifecycle
from delayed.testing import RedisCluster, RedisServer, SentinelSet  # noqa: F401
from delayed.wire.keys import new_worker_id
from delayed.worker.holding import Claim, Holding

ROOT = Path(__file__).resolve().parent.parent
WAIT = 60
"""Seconds a test waits for an event (a process's exit, a key, a log line) unless it says otherwise:
what a loaded machine may need. Only a test that fails waits it out, so it bounds no duration."""


def wait_for(condition: Callable[[], Any], timeout: float = WAIT, what: str = "condition",
             interval: float = 0.02) -> Any:
    """delayed.testing.wait_for with the suite's timeout, WAIT: the tests import it from here."""
    return testing.wait_for(condition, timeout, what, interval)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    os.environ["DELAYED_TEST_REDIS_URL"] = server.url
    yield server
    server.stop()


@pytest.fixture(scope="session")
def cluster_servers(tmp_path_factory):
    """Six redis-servers in a Redis Cluster (three primaries, a replica each), for the session."""
    with RedisCluster(tmp_path_factory.mktemp("cluster")) as servers:
        yield servers


@pytest.fixture
def cluster(cluster_servers):
    """The session's cluster, every node up (a test before may have killed a primary) and every key gone."""
    cluster_servers.heal()
    for node in cluster_servers.nodes:
        client = redis.Redis(port=node.port)
        if client.execute_command("ROLE")[0] == b"master":
            client.flushall()
        client.close()
    return cluster_servers


@pytest.fixture(scope="session")
def sentinel_servers(tmp_path_factory):
    """A primary and a replica watched by three sentinels, for the session."""
    with SentinelSet(tmp_path_factory.mktemp("sentinel")) as servers:
        yield servers


@pytest.fixture
def sentinels(sentinel_servers):
    """The session's sentinel set, both servers up (a test before may have killed the primary), the data gone."""
    sentinel_servers.heal()
    client = redis.Redis(port=sentinel_servers.primary.port)
    client.flushall()
    client.execute_command("WAIT", 1, 5000)
    client.close()
    return sentinel_servers


@pytest.fixture
def conn(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield client
    client.close()


WORKER_TIMING = dict(dequeue_timeout=0.05, keep_alive_timeout=5, keep_alive_interval=1)
"""A test worker's timing: an idle claim waits 50 ms, so a stop is quick; its keys live 5 s."""


@pytest.fixture
def run_worker(queue):
    """Start a Worker on the test module's `queue` fixture in a thread (options such as threads=N go
    to Worker); stopped and joined after the test."""
    started = []

    def start(allow=("tests.tasks",), **options):
        worker = Worker(queue, allow, **{**WORKER_TIMING, **options})
        thread = threading.Thread(target=worker.run)
        thread.start()
        started.append((worker, thread))
        return worker

    yield start
    for worker, thread in started:
        worker.stop()
        thread.join(WAIT)
        assert not thread.is_alive()


@pytest.fixture
def start_worker(conn):
    """Start a Worker on the named queues (in priority order) in a thread; stopped and joined after the test."""
    started = []

    def start(*names, **options):
        queues = [Queue(name, conn) for name in names]
        worker = Worker(queues, ["tests.tasks"], **{**WORKER_TIMING, **options})
        thread = threading.Thread(target=worker.run)
        thread.start()
        started.append((worker, thread))
        return worker

    yield start
    for worker, thread in started:
        worker.stop()
        thread.join(WAIT)
        assert not thread.is_alive()


def results(client: redis.Redis) -> List[str]:
    return [item.decode() for item in client.lrange("results", 0, -1)]


def tags(client: redis.Redis) -> List[str]:
    """The tags tests.tasks.record recorded, in order."""
    return [eval(result)[0] for result in results(client)]


def spawn(module: str, *args: str, redis_url: str, task_redis_url: str = "", prefix: Sequence[str] = (),
          **popen) -> subprocess.Popen:
    """Start `python -m module args...` from the repo root, able to import tests.tasks.

    tests.tasks records into task_redis_url, by default the same Redis as redis_url. prefix: a command
    that runs python (e.g. faketime and its arguments).
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT), DELAYED_TEST_REDIS_URL=task_redis_url or redis_url)
    return subprocess.Popen(
        [*prefix, sys.executable, "-m", module, "--redis-url", redis_url, *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen,
    )


def finish(process: subprocess.Popen, timeout: float = WAIT) -> Tuple[int, str]:
    """Wait for a process to exit; return (exit status, its output)."""
    output, _ = process.communicate(timeout=timeout)
    return process.returncode, output


def read_until(process: subprocess.Popen, text: str) -> str:
    """Read the process's output up to a line containing text (the line is returned)."""
    for line in process.stdout:
        if text in line:
            return line
    pytest.fail(f"the process ended without printing {text!r}")


def stop(*processes: subprocess.Popen) -> List[str]:
    """SIGTERM each process still running; assert each exits 0; their outputs."""
    outputs = []
    for process in processes:
        if process.poll() is None:
            process.terminate()
        status, output = finish(process)
        assert status == 0, output
        outputs.append(output)
    return outputs


def lost_and_duplicates(client: redis.Redis, total: int) -> Tuple[int, int]:
    """Of total tasks that each count their runs in the hash "executions" (tests.tasks): how many
    never ran, and how many runs were repeats."""
    runs = [int(count) for count in client.hvals("executions")]
    return total - len(runs), sum(count - 1 for count in runs)


def settle_by_a_worker(queue: Queue) -> None:
    """Claim the head of the queue and let a Worker run it and settle it, as its loop does (a task that
    fails and may run again is retried: rescheduled, for a max_retries task or a retry=-1 one)."""
    ops, worker_id = WorkerOps(queue), new_worker_id()
    claim = Claim(worker_id, ops.claim(worker_id, timeout=1), Holding(queue, 1, Lifecycle("worker")))
    assert Worker(queue, ["tests.tasks"]).execute(claim.blob).apply(ops, claim)
