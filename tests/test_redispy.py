"""The redis-py internals delayed.protocol.redispy relies on, each checked against the installed redis-py on a
one-node Redis Cluster; and the redis-py range setup.cfg declares, the one `make test` runs on."""
import configparser
import gc
import re

import pytest
import redis
from packaging.requirements import Requirement
from packaging.version import Version
from redis.cluster import RedisCluster

from delayed.protocol.redispy import pipeline_commands, unowned_copy, wrap_resend
from delayed.testing import RedisServer, free_port

from .conftest import ROOT, wait_for
from .test_cluster import LostReply

VERSION = f"redis-py {redis.__version__}"


@pytest.fixture(scope="module")
def one_node(tmp_path_factory):
    """A redis-server serving every slot of a Redis Cluster, for the module."""
    directory = tmp_path_factory.mktemp("one_node_cluster")
    server = RedisServer(directory, ["--cluster-enabled", "yes", "--cluster-port", str(free_port()),
                                     "--cluster-config-file", str(directory / "nodes.conf")])
    with server:
        plain = redis.Redis(port=server.port)
        plain.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        wait_for(lambda: b"cluster_state:ok" in plain.execute_command("CLUSTER", "INFO"), what="the cluster")
        plain.close()
        yield server


@pytest.fixture
def client(one_node):
    """A RedisCluster as redis-py makes it by default, on one_node, its keys gone."""
    cluster = RedisCluster(host="127.0.0.1", port=one_node.port)
    cluster.flushall()
    yield cluster
    cluster.close()


def test_a_dropped_unowned_copy_leaves_its_client_working(client):
    view = unowned_copy(client)
    assert view.nodes_manager is client.nodes_manager and isinstance(view, type(client))
    view.set("{q}k", 1)
    del view
    gc.collect()
    assert client.get_default_node() is not None and client.get("{q}k") == b"1", (
        f"{VERSION}: collecting a copy of a RedisCluster closed the nodes it shares (RedisCluster.__del__)")


def test_pipeline_commands_are_those_a_cluster_pipeline_holds(client):
    pipe = client.pipeline(transaction=False)
    pipe.incr("{q}n")
    pipe.get("{q}n")
    commands = pipeline_commands(pipe)  # a TypeError names _execution_strategy or command_queue if gone
    assert [tuple(command.args) for command in commands] == [("INCRBY", "{q}n", 1), ("GET", "{q}n")], (
        f"{VERSION}: ClusterPipeline._execution_strategy.command_queue no longer holds the commands queued")
    assert all(hasattr(command, "result") for command in commands), (
        f"{VERSION}: the commands in ClusterPipeline._execution_strategy.command_queue have no .result")


def test_wrap_resend_sees_each_command_a_cluster_pipeline_sends_again(client):
    seen = []

    def recording(resend, *args, **options):
        seen.append((args, [type(command.result) for command in pipeline_commands(pipe)]))
        return resend(*args, **options)

    LostReply(client, "{q}", "INCRBY")
    pipe = client.pipeline(transaction=False)
    wrap_resend(pipe, recording)  # a TypeError names parent_execute_command if it is gone
    pipe.incr("{q}n")
    assert pipe.execute() == [2]  # resent by redis-py, through the wrapper
    assert seen == [(("INCRBY", "{q}n", 1), [redis.ConnectionError])], (
        f"{VERSION}: a ClusterPipeline no longer sends a command whose connection was lost again through "
        f"parent_execute_command, with the error in its result (saw {seen})")


def declared_range() -> Requirement:
    """setup.cfg's requirement on redis."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    [requirement] = [Requirement(line) for line in config["options"]["install_requires"].split("\n")
                     if line.strip().startswith("redis")]
    return requirement


def test_the_oldest_redis_py_make_test_runs_on_is_the_floor_setup_cfg_declares():
    [floor] = [spec.version for spec in declared_range().specifier if spec.operator == ">="]
    [oldest] = re.findall(r"^REDIS_OLDEST := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert Version(oldest) == Version(floor), f"the Makefile's REDIS_OLDEST is {oldest}, setup.cfg's floor {floor}"


def test_the_installed_redis_py_is_in_the_declared_range():
    assert declared_range().specifier.contains(redis.__version__), f"{VERSION} is outside {declared_range()}"
