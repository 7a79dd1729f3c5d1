"""The core scenarios on a real Redis Cluster (conftest's `cluster`: three primaries, a replica each),
with real worker, sweeper, scheduler, metrics and dashboard processes on a redis+cluster:// URL.

Tasks record their runs in a separate plain redis-server (conftest's `redis_server`, read through
`conn`), so what a failover does to the cluster cannot touch the tally."""
import json
import re
import subprocess
import sys
import time
import urllib.request
from typing import Dict, List

import pytest
import redis
import redis.cluster

from delayed import PyTask, Queue
from delayed.protocol.connection import connect
from delayed.testing import free_port
from delayed.wire.keys import hash_tag

from .conftest import ROOT, finish, lost_and_duplicates, read_until, results, spawn, stop, wait_for

KEEP_ALIVE = "1"  # seconds: a killed worker's task is recoverable after this


def nodes_client(cluster) -> redis.cluster.RedisCluster:
    """A plain RedisCluster (redis-py's own retries) to look at what landed."""
    return redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.running()[0].port)


def worker(cluster, redis_server, *args: str) -> subprocess.Popen:
    return spawn("delayed.worker", "--keep-alive-timeout", KEEP_ALIVE, *args, "tests.tasks",
                 redis_url=cluster.url, task_redis_url=redis_server.url)


def sweeper(cluster, *queues: str, interval: str = "0.2") -> subprocess.Popen:
    return spawn("delayed.sweeper", *(arg for name in queues for arg in ("--queue", name)), "--interval", interval,
                 redis_url=cluster.url)








def on_three_primaries(cluster) -> List[str]:
    """Three queue names whose slots are served by three different primaries."""
    chosen: Dict[int, str] = {}
    for tag in "abcdefghijklmnopqrstuvwxyz":
        chosen.setdefault(cluster.primary_for("{" + tag + "}").port, "{" + tag + "}")
        if len(chosen) == 3:
            return sorted(chosen.values())
    raise AssertionError("no three tags on three primaries")


def test_a_worker_drains_a_tagged_queue_and_leaves_nothing_behind(cluster, conn, redis_server):
    queue = Queue("{orders}", connect(cluster.url))
    queue.enqueue_many([PyTask("tests.tasks:record", [i]) for i in range(50)])
    process = worker(cluster, redis_server, "--queue", "{orders}")
    try:
        wait_for(lambda: len(results(conn)) == 50, what="50 tasks to run")
    finally:
        stop(process)
    assert sorted(eval(result)[0] for result in results(conn)) == list(range(50))
    check = nodes_client(cluster)
    assert check.hlen("{orders}_processing") == 0 and check.llen("{orders}_noti") == 0
    assert list(check.scan_iter("delayed-py-*")) == []  # keep-alive keys deleted at a clean stop


def test_a_worker_serves_queues_on_two_primaries_in_priority_order(cluster, conn, redis_server):
    first, second = on_three_primaries(cluster)[:2]
    assert cluster.primary_for(first).port != cluster.primary_for(second).port
    client = connect(cluster.url)
    Queue(second, client).enqueue_many([PyTask("tests.tasks:record", [f"second {i}"]) for i in range(10)])
    Queue(first, client).enqueue_many([PyTask("tests.tasks:record", [f"first {i}"]) for i in range(10)])
    process = worker(cluster, redis_server, "--queue", first, "--queue", second)
    try:
        wait_for(lambda: len(results(conn)) == 20, what="both queues drained")
        ran = [eval(result)[0] for result in results(conn)]
        assert ran == [f"first {i}" for i in range(10)] + [f"second {i}" for i in range(10)]
        # idle, it blocks on the first queue's slot; a task on the second still runs soon
        Queue(second, client).enqueue(PyTask("tests.tasks:record", ["later"]))
        wait_for(lambda: len(results(conn)) == 21, what="a task on the second queue, the worker idle")
    finally:
        stop(process)


def test_a_killed_workers_task_is_swept_and_run_by_another(cluster, conn, redis_server):
    Queue("{orders}", connect(cluster.url)).enqueue(PyTask("tests.tasks:slow", ["k", 0.5]))
    first = worker(cluster, redis_server, "--queue", "{orders}")
    wait_for(lambda: conn.exists("started:k"), what="the task to start")
    first.kill()
    finish(first)
    check = nodes_client(cluster)
    [holder] = check.hkeys("{orders}_processing")
    assert hash_tag(holder.decode()) == "orders"  # its keep-alive key lives in the queue's slot
    second = worker(cluster, redis_server, "--queue", "{orders}")
    sweeping = sweeper(cluster, "{orders}")
    try:
        wait_for(lambda: results(conn), what="the requeued task to run")
        assert results(conn) == [repr(("k", (), {}))]
        wait_for(lambda: check.hlen("{orders}_processing") == 0, what="its release")
    finally:
        stop(second, sweeping)


def test_a_cancel_reaches_a_running_task_of_a_queue_on_another_primary_than_the_worker_s_first(cluster, conn,
                                                                                              redis_server):
    """The worker listens on one node; a cancel's PUBLISH, made on the task's queue's primary, reaches it."""
    first, second = on_three_primaries(cluster)[:2]
    queue = Queue(second, connect(cluster.url))
    handle = queue.enqueue(PyTask("tests.tasks:async_until_cancelled", ["co"]), result_ttl=60)
    process = worker(cluster, redis_server, "--queue", first, "--queue", second)

    def listening() -> bool:  # on some node: a subscription is the node's own
        for node in cluster.running():
            with redis.Redis(port=node.port) as client:
                if client.pubsub_numsub(second + "_cancels")[0][1]:
                    return True
        return False

    try:
        wait_for(lambda: conn.exists("started:co") and listening(), what="the task to start, its worker listening")
        assert handle.cancel().requested
        wait_for(lambda: handle.status() == "cancelled", what="the task to end cancelled")
    finally:
        stop(process)
    assert conn.lrange("cancelled", 0, -1) == [b"co"]


def test_a_delayed_task_runs_when_due_not_before(cluster, conn, redis_server):
    process = worker(cluster, redis_server, "--queue", "{orders}")
    try:
        queue = Queue("{orders}", connect(cluster.url))
        enqueued = time.time()
        queue.enqueue(PyTask("tests.tasks:stamp", ["due"]), delay=1.5)
        wait_for(lambda: conn.hget("stamps", "due"), what="the delayed task to run")
    finally:
        stop(process)
    assert float(conn.hget("stamps", "due")) >= enqueued + 1.5


def test_three_scheduler_replicas_enqueue_each_tick_once(cluster, tmp_path):
    schedule = tmp_path / "every_second.py"
    schedule.write_text("from delayed.scheduler import Periodic\n"
                        "SCHEDULE = [Periodic('tests.tasks:record', queue='{ticks}', every=1)]\n")
    check = nodes_client(cluster)
    check.config_resetstat(target_nodes=check.ALL_NODES)
    replicas = [spawn("delayed.scheduler", str(schedule), redis_url=cluster.url) for _ in range(3)]
    try:
        wait_for(lambda: check.llen("{ticks}") >= 4, what="four ticks")
    finally:
        outputs = stop(*replicas)
    # ticks follow the clock of the node holding the queue: only it was asked the TIME
    queue_node = check.get_node_from_key("{ticks}").name
    asked = {node.name for node in check.get_nodes()
             if "cmdstat_time" in check.info("commandstats", target_nodes=node)}
    assert asked == {queue_node}, (asked, queue_node)
    claimed = [float(line.split(" tick ")[1].split()[0]) for output in outputs for line in output.splitlines()
               if " tick " in line and line.endswith("enqueued")]
    assert sorted(claimed) == sorted(set(claimed)), outputs  # no tick claimed twice
    assert sorted(claimed) == [min(claimed) + i for i in range(len(claimed))]  # none skipped
    assert check.llen("{ticks}") == len(claimed) == check.llen("{ticks}_noti")
    assert all("scheduling 1 entries" in output for output in outputs)  # three replicas competed


@pytest.mark.parametrize("module, extra", [("delayed.worker", ["tests.tasks"]), ("delayed.sweeper", [])])
def test_a_queue_name_without_a_tag_is_refused_in_one_line(cluster, module, extra):
    status, output = finish(spawn(module, "--queue", "orders", *extra, redis_url=cluster.url))
    assert status == 2, output
    assert output.count("\n") == 1 and "Traceback" not in output
    assert "queue 'orders' has no hash tag" in output and "name it '{orders}'" in output


def test_a_scheduler_entry_without_a_tag_is_refused_in_one_line(cluster, tmp_path):
    schedule = tmp_path / "untagged.py"
    schedule.write_text("from delayed.scheduler import Periodic\n"
                        "SCHEDULE = [Periodic('tests.tasks:record', queue='ticks', every=1)]\n")
    status, output = finish(spawn("delayed.scheduler", str(schedule), redis_url=cluster.url))
    assert status == 2, output
    assert output.count("\n") == 1 and "name it '{ticks}'" in output


def test_queue_refuses_a_name_without_a_tag(cluster):
    with pytest.raises(ValueError, match=r"name it '\{orders\}'"):
        Queue("orders", connect(cluster.url))


def http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def test_admin_stats_metrics_and_dashboard_see_every_primary(cluster, conn, redis_server):
    names = on_three_primaries(cluster)
    client = connect(cluster.url)
    for name in names:
        Queue(name, client).enqueue_many([PyTask("tests.tasks:slow", [name, 30])] * 2)
    busy = worker(cluster, redis_server, "--batch", "1", *(arg for name in names for arg in ("--queue", name)))
    metrics_port, dashboard_port = free_port(), free_port()
    exporter = spawn("delayed", "metrics", "--port", str(metrics_port), redis_url=cluster.url)
    dashboard = spawn("delayed", "dashboard", "--port", str(dashboard_port), redis_url=cluster.url)
    try:
        wait_for(lambda: conn.exists(f"started:{names[0]}"), what="the worker to take a task")

        def admin(*command: str):
            run = subprocess.run([sys.executable, "-m", "delayed", *command, "--json", "--redis-url", cluster.url],
                                 cwd=ROOT, capture_output=True, text=True, timeout=30)
            assert run.returncode == 0, run.stderr
            return json.loads(run.stdout)

        stats = {row["queue"]: row for row in admin("stats")}
        assert sorted(stats) == names
        assert [stats[name]["pending"] + stats[name]["processing"] for name in names] == [2, 2, 2]
        assert stats[names[0]]["processing"] == 1
        assert sorted(row["queue"] for row in admin("workers")) == names  # one worker, listed on each queue
        tracked = names[2] + "tracked"  # in names[2]'s slot; no worker serves it
        enqueued = time.time()
        Queue(tracked, client).enqueue(PyTask("tests.tasks:record", ["t"]), result_ttl=60)
        [row] = admin("stats", "--queue", tracked)  # the head's record read on its primary
        assert row["latency_measured"] is True and 0 <= row["latency"] <= round(time.time() - enqueued, 1) + 0.1

        def scraped() -> str:
            try:
                return http_get(f"http://127.0.0.1:{metrics_port}/metrics")
            except OSError:
                return ""

        text = wait_for(scraped, what="the metrics exporter to answer")
        for name in names:
            assert f'queue="{name}"' in text, text
        page = wait_for(lambda: _page(dashboard_port), what="the dashboard to answer")
        for name in names:
            assert name in page
    finally:
        busy.kill()
        finish(busy)
        stop(exporter, dashboard)


def _page(port: int) -> str:
    try:
        return http_get(f"http://127.0.0.1:{port}/")
    except OSError:
        return ""


def both_online(cluster) -> None:
    """Both workers are online before the failover (one still starting would find no primary and exit 1)."""
    check = nodes_client(cluster)
    wait_for(lambda: check.zcount("{orders}_workers", time.time(), "+inf") == 2, what="both workers online")


def test_a_primary_killed_mid_drain_loses_no_replicated_task(cluster, conn, redis_server, tmp_path):
    """3,000 tasks enqueued and replicated (WAIT) before the drain; the queue's primary is SIGKILLed
    while two worker processes drain it, a sweeper running. Lost must be 0; duplicates at most the
    tasks the workers held or had just released, whose state the replica may not have had yet
    (2 workers x 2 x --batch ids: each id holds one task, or released one in the last round trip)."""
    total, batch = 3000, 8
    queue = Queue("{orders}", connect(cluster.url), wait_replicas=1, wait_timeout_ms=5000)
    for start in range(0, total, 500):
        queue.enqueue_many([PyTask("tests.tasks:count", [str(i)]) for i in range(start, start + 500)])
    # keep-alive keys outlast the failover (a second or two): else the sweeper requeues what live workers hold
    workers = [worker(cluster, redis_server, "--queue", "{orders}", "--batch", str(batch), "--keep-alive-timeout", "10")
               for _ in range(2)]
    sweeping = sweeper(cluster, "{orders}", interval="0.5")
    schedule = tmp_path / "every_second.py"
    schedule.write_text("from delayed import PyTask\nfrom delayed.scheduler import Periodic\n"
                        "SCHEDULE = [Periodic(PyTask('tests.tasks:record', ['tick']), queue='{orders}', every=1)]\n")
    scheduler = spawn("delayed.scheduler", str(schedule), redis_url=cluster.url)
    try:
        both_online(cluster)
        read_until(sweeping, "sweeping '{orders}'")  # online: connected before the failover
        read_until(scheduler, "scheduling 1 entries")
        wait_for(lambda: conn.hlen("executions") >= total // 3, what="a third of the drain")
        cluster.kill_primary("{orders}")
        killed_at = conn.hlen("executions")
        ticks_then = len(results(conn))
        wait_for(lambda: conn.hlen("executions") == total, 60, "the drain to finish after the failover")
        check = nodes_client(cluster)
        wait_for(lambda: check.llen("{orders}") == 0 and check.hlen("{orders}_processing") == 0,
                 what="the queue to be empty and nothing held (every duplicate has run)")
        wait_for(lambda: len(results(conn)) >= ticks_then + 2, what="ticks enqueued on the new primary, and run")
        assert all(process.poll() is None for process in workers)  # they rode it out, no restart
    finally:
        outputs = stop(*workers, sweeping, scheduler)
    lost, duplicates = lost_and_duplicates(conn, total)
    bound = 2 * 2 * batch
    print(f"cluster failover mid-drain: {total} tasks, killed at {killed_at} run; lost {lost}, "
          f"duplicates {duplicates} (bound {bound})")
    assert lost == 0
    assert duplicates <= bound
    for output in outputs[:2] + outputs[3:]:
        assert "Redis is back" in output, output
        assert "Traceback" not in output, output
    claimed = re.findall(r" tick (\S+) enqueued", outputs[3])
    assert len(claimed) == len(set(claimed)), outputs[3]  # no tick enqueued twice across the failover


def test_a_clean_failover_mid_drain_loses_nothing(cluster, conn, redis_server):
    """CLUSTER FAILOVER: the replica catches up before it takes over, and the old primary answers
    MOVED from then on. The workers follow the redirects; nothing is lost, nothing runs twice."""
    total = 3000
    queue = Queue("{orders}", connect(cluster.url))
    queue.enqueue_many([PyTask("tests.tasks:count", [str(i)]) for i in range(total)])
    workers = [worker(cluster, redis_server, "--queue", "{orders}", "--batch", "8") for _ in range(2)]
    try:
        both_online(cluster)
        wait_for(lambda: conn.hlen("executions") >= total // 4, what="a quarter of the drain")
        cluster.failover("{orders}")
        switched_at = conn.hlen("executions")
        wait_for(lambda: conn.hlen("executions") == total, 60, "the drain to finish after the failover")
        check = nodes_client(cluster)
        wait_for(lambda: check.llen("{orders}") == 0 and check.hlen("{orders}_processing") == 0, 30,
                 "the queue to be empty and nothing held")
    finally:
        outputs = stop(*workers)
    lost, duplicates = lost_and_duplicates(conn, total)
    print(f"cluster clean failover mid-drain: {total} tasks, switched at {switched_at} run; lost {lost}, "
          f"duplicates {duplicates}")
    assert lost == 0 and duplicates == 0
    for output in outputs:
        assert "Traceback" not in output, output
