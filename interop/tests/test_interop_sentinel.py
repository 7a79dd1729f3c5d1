"""Our Go worker behind Redis Sentinel: ourgoworker -url redis+sentinel://... (Connect's failover
client, which asks the sentinels for the primary) runs tracked GoTasks a Python producer enqueued
through the same URL, and stops cleanly. go-delayed's client (redigo, one address) knows no Sentinel."""
import signal

import pytest
import redis
from conftest import WAIT, Procs

from delayed import GoTask, Queue, connect
from delayed.testing import SentinelSet

QUEUE = "sentinel"


@pytest.fixture(scope="module")
def sentinels(go_bin, tmp_path_factory):
    with SentinelSet(tmp_path_factory.mktemp("sentinel")) as servers:
        yield servers


@pytest.fixture
def sentinel_procs(sentinels, tmp_path) -> Procs:
    manager = Procs(sentinels.url, tmp_path)
    yield manager
    manager.kill_all()


def test_our_go_worker_behind_sentinel_returns_results_and_stops_cleanly(sentinels, sentinel_procs):
    """The worker finds the primary through the sentinels, Python's handles read its results there,
    and SIGTERM stops it: status 0, nothing held, offline."""
    worker = sentinel_procs.our_go_worker(QUEUE, "-concurrency", "2")
    queue = Queue(QUEUE, connect(sentinels.url))
    handles = [queue.enqueue(GoTask("main.Add", [i, 40]), result_ttl=60) for i in range(10)]
    assert [handle.result(timeout=WAIT) for handle in handles] == [i + 40 for i in range(10)]
    assert handles[0].info().worker.startswith(worker.id)

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.err()
    primary = redis.Redis.from_url(sentinels.primary.url)  # where the sentinels sent everyone
    assert primary.hlen(QUEUE + "_processing") == 0 and primary.zcard(QUEUE + "_workers") == 0
    primary.close()
