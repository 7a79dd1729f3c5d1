"""Redis's maxmemory-policy, read with CONFIG GET, else INFO memory: the worker, sweeper and scheduler
refuse a Redis that evicts any key (exit 2, one line) unless --allow-eviction, and warn once for one
that evicts keys with a TTL or whose policy they cannot read; `delayed stats` warns and still shows."""
import json
import subprocess
import sys
from typing import Dict, List

import pytest
import redis

from delayed import PyTask, Queue
from delayed.protocol.connection import connect
from delayed.protocol.eviction import EvictionPolicy, eviction_policy
from delayed.testing import RedisServer

from .conftest import ROOT, finish, results, spawn, stop, wait_for

DUTIES: Dict[str, List[str]] = {"delayed.worker": ["tests.tasks"], "delayed.sweeper": ["--interval", "0.2"],
                                "delayed.scheduler": ["tests.schedule_fast"]}
STARTED = {"delayed.worker": "online", "delayed.sweeper": "sweeping", "delayed.scheduler": "scheduling"}
ALLKEYS = "Redis has maxmemory-policy allkeys-lru: an evicting Redis drops queued tasks and keep-alive keys"
NO_CONFIG_NOR_INFO = ["--user", "default", "on", "nopass", "~*", "&*", "+@all", "-config", "-info"]


@pytest.fixture
def start():
    """conftest's spawn; whatever still runs when the test ends (a refusal that did not come) is killed."""
    processes = []

    def spawned(*args, **options):
        processes.append(spawn(*args, **options))
        return processes[-1]

    yield spawned
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.communicate()


def lines_until(process: subprocess.Popen, text: str) -> List[str]:
    """The process's output lines up to and including the first one containing text."""
    lines = []
    for line in process.stdout:
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"the process ended without printing {text!r}: {''.join(lines)}")


def warnings_in(output: str) -> List[str]:
    return [line for line in output.splitlines() if "maxmemory-policy" in line]


def test_the_policy_is_read_with_config_get_else_info_else_reported_unknown(tmp_path):
    with RedisServer(tmp_path) as plain, \
            RedisServer(tmp_path, ["--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""]) as managed, \
            RedisServer(tmp_path, NO_CONFIG_NOR_INFO) as locked:
        assert eviction_policy(redis.Redis(port=plain.port)) == EvictionPolicy("noeviction")
        assert eviction_policy(redis.Redis(port=plain.port)).risk is None
        assert eviction_policy(redis.Redis(port=managed.port)) == EvictionPolicy("allkeys-lru")
        unknown = eviction_policy(redis.Redis(port=locked.port))
        assert unknown == EvictionPolicy(None) and not unknown.evicts and not unknown.evicts_any_key


def test_an_allkeys_redis_is_refused_by_the_worker_sweeper_and_scheduler(tmp_path, start):
    with RedisServer(tmp_path, ["--maxmemory-policy", "allkeys-lru"]) as server:
        processes = {module: start(module, *args, redis_url=server.url) for module, args in DUTIES.items()}
        for module, process in processes.items():
            status, output = finish(process)
            assert status == 2 and output.count("\n") == 1, output
            assert output.startswith(f"{module}: {ALLKEYS}, so tasks are lost and tasks run twice; "
                                     "set maxmemory-policy noeviction (or pass --allow-eviction"), output
        assert redis.Redis(port=server.port).keys() == []  # none of them went online


def test_with_allow_eviction_they_start_on_an_allkeys_redis_with_one_warning(tmp_path, start):
    with RedisServer(tmp_path, ["--maxmemory-policy", "allkeys-lru"]) as server:
        processes = {module: start(module, *args, "--allow-eviction", redis_url=server.url)
                     for module, args in DUTIES.items()}
        try:
            started = {module: lines_until(process, STARTED[module]) for module, process in processes.items()}
        finally:
            rest = stop(*processes.values())
    for (module, lines), more in zip(started.items(), rest):
        [warning] = warnings_in("".join(lines) + more)
        assert f" WARNING {module}[" in warning and ALLKEYS in warning, warning
        assert warning.rstrip().endswith("(starting anyway: --allow-eviction)"), warning


def test_a_volatile_redis_gets_one_warning_and_the_worker_runs(tmp_path, start):
    with RedisServer(tmp_path, ["--maxmemory-policy", "volatile-lru"]) as server:
        client = redis.Redis(port=server.port)
        Queue("default", client).enqueue(PyTask("tests.tasks:record", ["ran"]))
        worker = start("delayed.worker", "--concurrency", "2", "tests.tasks", redis_url=server.url)
        try:
            wait_for(lambda: results(client), what="the task to run")
        finally:
            [output] = stop(worker)
    [warning] = warnings_in(output)  # once: the supervisor checks, not each of its processes
    assert " WARNING delayed.worker[" in warning, warning
    assert "Redis has maxmemory-policy volatile-lru: keys with a TTL can be evicted (our workers' keep-alive " \
           "keys, unique-task locks and tracked tasks' records)" in warning
    assert warning.rstrip().endswith("a lapsed keep-alive makes a sweeper requeue a task that still runs; "
                                     "set maxmemory-policy noeviction"), warning


def test_a_redis_without_config_is_still_refused_through_info(tmp_path, start):
    with RedisServer(tmp_path, ["--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""]) as server:
        status, output = finish(start("delayed.worker", "tests.tasks", redis_url=server.url))
    assert status == 2 and output.count("\n") == 1 and output.startswith(f"delayed.worker: {ALLKEYS}"), output


def test_a_policy_that_cannot_be_read_gets_one_warning_and_the_worker_runs(tmp_path, start):
    with RedisServer(tmp_path, NO_CONFIG_NOR_INFO) as server:
        client = redis.Redis(port=server.port)
        Queue("default", client).enqueue(PyTask("tests.tasks:record", ["ran"]))
        worker = start("delayed.worker", "tests.tasks", redis_url=server.url)
        try:
            wait_for(lambda: results(client), what="the task to run")
        finally:
            [output] = stop(worker)
    [warning] = warnings_in(output)
    assert " WARNING delayed.worker[" in warning and warning.rstrip().endswith(
        "could not read the maxmemory-policy of Redis (CONFIG GET and INFO refused): make sure it is noeviction, "
        "as an evicting Redis loses tasks"), warning


def test_on_a_cluster_one_allkeys_primary_is_enough_to_refuse(cluster, start):
    primaries = [node for node in cluster.running() if redis.Redis(port=node.port).execute_command("ROLE")[0]
                 == b"master"]
    evicting, volatile = (redis.Redis(port=node.port) for node in primaries[:2])
    try:
        volatile.config_set("maxmemory-policy", "volatile-lru")
        assert eviction_policy(connect(cluster.url)) == EvictionPolicy("volatile-lru",
                                                                       f"127.0.0.1:{primaries[1].port}")
        evicting.config_set("maxmemory-policy", "allkeys-lru")  # the worst of them wins
        assert eviction_policy(connect(cluster.url)) == EvictionPolicy("allkeys-lru", f"127.0.0.1:{primaries[0].port}")
        status, output = finish(start("delayed.worker", "--queue", "{q}", "tests.tasks", redis_url=cluster.url))
    finally:
        for client in (evicting, volatile):
            client.config_set("maxmemory-policy", "noeviction")
    assert status == 2 and output.count("\n") == 1, output
    assert output.startswith(f"delayed.worker: Redis primary 127.0.0.1:{primaries[0].port} has maxmemory-policy "
                             "allkeys-lru: an evicting Redis drops"), output


def test_on_sentinel_the_primarys_policy_is_read(sentinels):
    primary, replica = redis.Redis(port=sentinels.primary.port), redis.Redis(port=sentinels.replica.port)
    try:
        primary.config_set("maxmemory-policy", "volatile-lru")
        replica.config_set("maxmemory-policy", "allkeys-lru")
        assert eviction_policy(connect(sentinels.url)) == EvictionPolicy("volatile-lru")
    finally:
        for client in (primary, replica):
            client.config_set("maxmemory-policy", "noeviction")


def test_stats_warns_of_an_evicting_redis_on_stderr_and_still_shows_the_stats(tmp_path):
    def stats(*args):
        done = subprocess.run([sys.executable, "-m", "delayed", "stats", "--queue", "q", "--redis-url", server.url,
                               *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout, done.stderr

    with RedisServer(tmp_path) as server:
        client = redis.Redis(port=server.port)
        Queue("q", client).enqueue(PyTask("tests.tasks:record", ["a"]))
        out, err = stats()
        assert err == "" and out.splitlines()[1].split()[:2] == ["q", "1"]
        for policy in ("allkeys-lru", "volatile-lfu"):
            client.config_set("maxmemory-policy", policy)
            for args in ((), ("--json",)):
                out, err = stats(*args)
                assert err.count("\n") == 1, err
                assert err.startswith(f"delayed: warning: Redis has maxmemory-policy {policy}: "), err
                assert (json.loads(out)[0]["pending"] if args else int(out.splitlines()[1].split()[1])) == 1
