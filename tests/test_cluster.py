"""Redis Cluster on real servers (conftest's `cluster`: three primaries, a replica each): its URL,
and a queue's commands sent once, following redirects, through a failover."""
import pytest
import redis
import redis.cluster

from delayed import PyTask, Queue
from delayed.protocol.connection import connect
from delayed.protocol.send_once import sent_once
from delayed.protocol.worker_ops import WorkerOps

from .conftest import WAIT, wait_for

ONE = PyTask("m:f", [1])


def nodes_client(cluster) -> redis.cluster.RedisCluster:
    """A plain RedisCluster (redis-py's own retries) to look at what landed."""
    return redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)


def test_a_cluster_url_reaches_every_slot(cluster):
    client = connect(cluster.url)
    assert isinstance(client, redis.cluster.RedisCluster)
    for i in range(20):  # keys on every primary
        client.set(f"key{i}", i)
    assert [int(client.get(f"key{i}")) for i in range(20)] == list(range(20))
    assert len({cluster.primary_for(f"key{i}").port for i in range(20)}) == 3


def test_a_queue_with_a_hash_tag_enqueues_on_a_cluster(cluster):
    queue = Queue("{orders}", connect(cluster.url))
    queue.enqueue(ONE)
    queue.enqueue_many([PyTask("m:f", [i]) for i in range(3)])
    queue.enqueue(ONE, delay=60)
    queue.enqueue(ONE, unique_for=60)
    check = nodes_client(cluster)
    assert check.llen("{orders}") == 5 and check.llen("{orders}_noti") == 5
    assert check.zcard("{orders}_scheduled") == 1
    assert int(check.hget("{orders}_counts", "enqueued")) == 6


class LostReply:
    """Makes the node serving `key` lose its reply to the next `command` it answers (Redis applied it)."""

    def __init__(self, client: redis.cluster.RedisCluster, key: str, command: str) -> None:
        self.node = client.get_redis_connection(client.get_node_from_key(key))
        parse = self.node.parse_response
        self.drops = 0

        def parse_response(connection, command_name, **options):
            response = parse(connection, command_name, **options)
            if command_name == command and not self.drops:
                self.drops += 1
                connection.disconnect()
                raise redis.ConnectionError("reply lost (test)")
            return response

        self.node.parse_response = parse_response


def test_redis_py_resends_a_command_whose_reply_was_lost(cluster):
    """Why sent_once is needed: a RedisCluster's default retries send it again."""
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    assert client.retry.get_retries() > 0
    lost = LostReply(client, "{q}", "INCRBY")
    assert client.incr("{q}n") == 2
    assert lost.drops == 1


def test_a_lost_reply_is_not_resent(cluster):
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    queue = Queue("{q}", client)
    queue.enqueue(PyTask("m:warm_up"))
    lost = LostReply(client, "{q}", "EVALSHA")
    with pytest.raises(redis.ConnectionError):
        queue.enqueue(ONE)
    assert lost.drops == 1
    assert nodes_client(cluster).llen("{q}") == 2
    queue.enqueue(ONE)  # it goes on
    assert nodes_client(cluster).llen("{q}") == 3


def test_a_lost_transaction_reply_is_not_resent(cluster):
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    queue = Queue("{q}", client)
    lost = LostReply(client, "{q}", "EXEC")
    with pytest.raises(redis.ConnectionError):
        queue.enqueue_many([PyTask("m:f", [i]) for i in range(3)])
    assert lost.drops == 1
    assert nodes_client(cluster).llen("{q}") == 3


def test_a_lost_pipeline_reply_is_not_resent(cluster):
    """redis-py resends a non-transactional pipeline's commands after a lost connection, below
    its retry policy; the view raises instead."""
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port, retry=None)
    view = sent_once(client)
    LostReply(client, "{q}", "INCRBY")
    with view.pipeline(transaction=False) as pipe:
        pipe.incr("{q}n")
        with pytest.raises(redis.ConnectionError):
            pipe.execute()
    assert int(client.get("{q}n")) == 1
    LostReply(client, "{q}", "INCRBY")
    with client.pipeline(transaction=False) as pipe:  # the user's client, as redis-py made it
        pipe.incr("{q}n")
        pipe.execute()
    assert int(client.get("{q}n")) == 3


def test_redirects_are_followed_after_a_clean_failover(cluster):
    """After CLUSTER FAILOVER the old primary is a replica and answers MOVED: single commands,
    transactions and pipelines go to the new primary, each applied once."""
    queue = Queue("{q}", connect(cluster.url))
    queue.enqueue(ONE)
    cluster.failover("{q}")
    queue.enqueue(ONE)
    queue.enqueue_many([ONE, ONE])
    queue.enqueue(ONE, delay=60)
    assert queue.len() == 4
    assert queue.dead.count() == 0  # a non-transactional pipeline
    check = nodes_client(cluster)
    assert check.llen("{q}_noti") == 4 and check.zcard("{q}_scheduled") == 1


def test_a_killed_primary_errors_then_the_queue_goes_on(cluster):
    queue = Queue("{q}", connect(cluster.url))
    queue.enqueue(ONE)
    cluster.kill_primary("{q}")

    def enqueued() -> bool:
        try:
            queue.enqueue(ONE)
            return True
        except (redis.ConnectionError, redis.exceptions.ClusterDownError):
            return False

    wait_for(enqueued, what="the queue to reach the new primary", interval=0.2)
    assert queue.len() >= 2  # what the replica had, and the new task


def test_a_clean_failover_right_after_a_restart_is_heard(cluster):
    """A primary killed and restarted rejoins as a replica; a CLUSTER FAILOVER sent to it the moment
    heal() returns must make it the primary again (it was once dropped, its bus link to the
    primary not yet up, and CI timed out waiting)."""
    for _ in range(2):
        old = cluster.primary_for("{q}")
        cluster.kill_primary("{q}")
        cluster.heal()
        assert cluster.failover("{q}") is old
        assert cluster.primary_for("{q}") is old


def test_a_worker_takes_queues_on_a_cluster(cluster):
    """A cluster client has no single connection pool: the worker's one-Redis check must still
    know its queues are on one cluster (python -m delayed.worker on a redis+cluster:// URL failed
    with AttributeError before)."""
    from delayed.worker import Worker

    client = connect(cluster.url)
    worker = Worker([Queue("{a}", client), Queue("{b}", client)], allow=["tests.tasks"])
    assert [queue.name for queue in worker.queues] == ["{a}", "{b}"]


def test_dropping_a_queue_leaves_the_client_working(cluster):
    """A Queue's sent-once view shares the client's nodes; its garbage collection used to close
    them (RedisCluster.__del__), so the next Queue's enqueue on the same client failed with
    AttributeError ('NoneType' object has no attribute 'redis_connection')."""
    import gc

    client = connect(cluster.url)
    for _ in range(3):
        Queue("{dropped}", client).enqueue_many([ONE] * 200)
        gc.collect()
    client.set("{dropped}:still", 1)
    assert nodes_client(cluster).llen("{dropped}") == 600


def test_a_worker_with_several_ids_goes_offline_on_a_cluster(cluster):
    """A process's ids (one per batch slot) are deleted one DEL each: a cluster pipeline refuses a
    DEL of several keys, and the worker died on its graceful stop with RedisClusterException."""
    queue = Queue("{offline}", connect(cluster.url))
    ids = queue.keys.worker_ids(3)
    WorkerOps(queue).keep_alive(ids)
    check = nodes_client(cluster)
    assert sum(check.exists(worker_id) for worker_id in ids) == 3 and check.zcard("{offline}_workers") == 1
    WorkerOps(queue).go_offline(ids)
    assert sum(check.exists(worker_id) for worker_id in ids) == 0 and check.zcard("{offline}_workers") == 0


def test_a_tracked_task_s_record_lives_in_its_queue_s_slot(cluster):
    from delayed.wire.tracking import Tracked, pack_result

    queue = Queue("{orders}", connect(cluster.url))
    handle, waiting = queue.enqueue_many([ONE, ONE], result_ttl=60)
    assert cluster.primary_for(f"{{orders}}_task:{handle.id}").port == cluster.primary_for("{orders}").port
    worker_id = "delayed-py-" + "5" * 32
    [(_, blob)] = WorkerOps(queue).claim_batch((), (worker_id,)).tasks  # the script finds the record from the blob
    assert handle.status() == "running"
    assert queue.cancel(waiting.id) and waiting.status() == "cancelled"
    WorkerOps(queue).claim_batch((worker_id,), (), {worker_id: Tracked(handle.id, 0.01, *pack_result(42, 1000))})
    assert handle.result(timeout=WAIT) == 42


def test_delayed_task_finds_a_tracked_task_on_whichever_primary_holds_it(cluster, capsys):
    from delayed.ops.cli import main

    handles = [Queue(name, connect(cluster.url)).enqueue(ONE, result_ttl=60) for name in ("{a}", "{b}", "{c}")]
    assert len({cluster.primary_for(name).port for name in ("{a}", "{b}", "{c}")}) > 1  # the SCAN visits each
    for handle in handles:
        assert main(["task", handle.id, "--redis-url", cluster.url]) == 0
        assert capsys.readouterr().out.splitlines()[:2] == [f"id: {handle.id}", "status: pending"]
