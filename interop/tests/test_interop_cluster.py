"""Go and Python on a Redis Cluster: our Go worker, and why go-delayed's own client is not part of it.

go-delayed talks to Redis through a redigo pool on one address: it follows no MOVED redirect and
knows no Cluster (nor Sentinel). With go-delayed's code, what works is a Go producer that builds its
tasks with go-delayed's own NewPyTask + Serialize and pushes them, as go-delayed's Queue.Enqueue would,
to a queue whose name has a hash tag, through a cluster-aware client: interop/cmd/clusterproducer,
with go-redis's ClusterClient (RPUSH <queue> <blob>, RPUSH <queue>_noti 1, in one MULTI on the node
serving the slot). Our workers on the redis+cluster:// URL run those tasks. Our Go worker
(ourgoworker -url redis+cluster://...) runs GoTasks on the cluster and writes their results.

The queue lives on the cluster; tests.tasks records what it ran in the plain redis_server
(DELAYED_TEST_REDIS_URL), so the checks read one server.
"""
import ast
import signal
import subprocess

import pytest
import redis
import redis.cluster
from conftest import WAIT, Procs, py_results, wait_for

from delayed import GoTask, Queue, TaskFailedError, connect
from delayed.testing import RedisCluster
from interop import gocommands

QUEUE = "{gocluster}"
TASKS = 300


@pytest.fixture(scope="module")
def cluster(go_bin, tmp_path_factory):
    if "clusterproducer" in gocommands.unavailable:
        pytest.skip(f"!!! clusterproducer not built: {gocommands.unavailable['clusterproducer']} !!!")
    with RedisCluster(tmp_path_factory.mktemp("cluster")) as servers:
        yield servers


@pytest.fixture
def cluster_procs(cluster, redis_server, conn, tmp_path) -> Procs:
    for node in cluster.nodes:  # every key gone: primaries FLUSHALL, replicas follow
        client = redis.Redis(port=node.port)
        if client.execute_command("ROLE")[0] == b"master":
            client.flushall()
        client.close()
    manager = Procs(cluster.url, tmp_path, results_url=redis_server.url)
    yield manager
    manager.kill_all()


def on_cluster(cluster) -> redis.cluster.RedisCluster:
    return redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)


def test_go_cluster_producer_tasks_run_once_each_in_our_worker_on_the_cluster(cluster, cluster_procs, procs, conn):
    """TASKS PyTasks from go-delayed's NewPyTask, pushed through a ClusterClient to a tagged queue,
    are byte for byte what go-delayed's own Queue.Enqueue writes, and our worker on the cluster URL
    runs every one exactly once with its arguments, then stops gracefully."""
    summary = cluster_procs.cluster_producer(QUEUE, "-func", "tests.tasks:record", "-ids", "t", "-n", str(TASKS))
    assert summary["enqueued"] == TASKS
    check = on_cluster(cluster)
    assert check.llen(QUEUE) == TASKS and check.llen(QUEUE + "_noti") == TASKS

    # the same tasks from go-delayed's own producer (redigo, one plain server): the same blobs
    procs.go_producer("-kind", "py", "-func", "tests.tasks:record", "-ids", "t", "-n", "3", queue="plain")
    assert check.lrange(QUEUE, 0, 2) == conn.lrange("plain", 0, -1)
    conn.delete("plain", "plain_noti")

    worker = cluster_procs.py_worker(QUEUE)
    wait_for(lambda: len(py_results(conn)) >= TASKS, what=f"{TASKS} tasks to run")
    wait_for(lambda: check.llen(QUEUE) == 0 and check.hlen(QUEUE + "_processing") == 0,
             what="the queue to be empty and nothing held")
    ran = sorted(ast.literal_eval(result) for result in py_results(conn))
    assert ran == sorted((f"t{i}", (), {}) for i in range(TASKS))  # each once, with its argument
    assert check.xlen(QUEUE + "_dead_letters") == 0
    worker.signal(signal.SIGTERM)  # a graceful stop on the cluster: offline, its keys gone, status 0
    assert worker.wait() == 0, worker.err()
    assert check.zcard(QUEUE + "_workers") == 0
    check.close()


def test_go_delayed_own_producer_on_one_cluster_node_gets_moved(cluster, cluster_procs, go_bin):
    """Not supported, and why: go-delayed's own producer (redigo, one address) pointed at a
    cluster primary that does not serve the queue's slot is refused with MOVED; it follows no
    redirect, so it cannot feed a queue on a cluster (its worker and sweeper cannot either)."""
    owner = cluster.primary_for(QUEUE)
    roles = cluster.roles()
    other = next(node for node in cluster.nodes if node is not owner and roles.get(node.port) == "master")
    done = subprocess.run(gocommands.producer_argv(other.url, QUEUE, "-kind", "py", "-func", "tests.tasks:record",
                                                   "-args", '["x"]'), capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and "MOVED" in done.stderr, (done.returncode, done.stderr)
    check = on_cluster(cluster)
    assert check.llen(QUEUE) == 0 and check.llen(QUEUE + "_noti") == 0
    check.close()


def test_our_go_worker_on_the_cluster_returns_results_and_stops_cleanly(cluster, cluster_procs):
    """Our Go worker on a redis+cluster:// URL (Connect's ClusterClient) drains a tagged queue of tracked
    GoTasks a Python producer enqueued on the cluster: each result comes back to Python's handle, a
    failing task is retried through the scheduled set and then fails, and SIGTERM stops the worker
    cleanly: status 0, nothing held, offline."""
    worker = cluster_procs.our_go_worker(QUEUE, "-concurrency", "4")
    queue = Queue(QUEUE, connect(cluster.url))
    sums = [queue.enqueue(GoTask("main.Add", [i, i]), result_ttl=60) for i in range(50)]
    point = queue.enqueue(GoTask("main.MakePoint", [1, 2, "cluster"]), result_ttl=60)
    failing = queue.enqueue(GoTask("main.Fail", ["on-cluster", "fails on the cluster"], max_retries=1, backoff=0),
                            result_ttl=60)
    assert [handle.result(timeout=WAIT) for handle in sums] == [2 * i for i in range(50)]
    assert point.result(timeout=WAIT) == {"X": 1, "Y": 2, "Label": "cluster"}
    with pytest.raises(TaskFailedError, match="fails on the cluster"):
        failing.result(timeout=WAIT)
    assert failing.info().attempts == 2
    assert sums[0].info().worker.startswith(worker.id)

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.err()
    check = on_cluster(cluster)
    assert check.hlen(QUEUE + "_processing") == 0 and check.llen(QUEUE) == 0
    assert check.zcard(QUEUE + "_workers") == 0
    assert check.xlen(QUEUE + "_dead_letters") == 1
    check.close()
