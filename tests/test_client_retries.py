"""A producer never lets redis-py resend a command whose reply was lost.

redis-py 8's `redis.Redis()` (the README's Quick start, and the docs' examples) retries a command up to 10 times
after a connection error, resending it whole: when Redis had applied it and only the reply
was lost, an enqueue lands twice, and a unique enqueue finds its own lock and raises
DuplicateTaskError. The retry policy lives on each connection (`conn.retry`, from the pool's
connection_kwargs), so every client built on that pool resends. These tests put a proxy
between the client and a real redis-server that lets one command through, waits for Redis's
reply, and then cuts the connection instead of passing the reply on.
"""
import asyncio
import gc
import re
import socket
import subprocess
import threading
import time
from typing import List, Optional

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry
from redis.sentinel import Sentinel

from delayed import AsyncQueue, DuplicateTaskError, GoTask, PyTask, Queue
from delayed.testing import RedisServer, free_port

from .conftest import WAIT, wait_for

REPLY = re.compile(rb"(?:^|\r\n)[-:*$_#,(%~|>=!]")
"""The start of any reply but a simple string (+OK to MULTI, +QUEUED inside it)."""


class ReplyDropper:
    """A loopback TCP proxy to a redis-server. Once armed with a command name, it forwards the
    next request holding that command, swallows what Redis answers until the reply to that command
    has come (so Redis applied it), and then closes both sides: the client sees its connection
    drop with the command applied and no reply."""

    def __init__(self, port: int) -> None:
        self.upstream_port = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed: Optional[bytes] = None
        self.drops = 0
        self.lock = threading.Lock()
        self.sockets: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, command: str) -> None:
        self.armed = b"\r\n" + command.encode() + b"\r\n"

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.sockets += [client, upstream]
            dropping = threading.Event()
            threading.Thread(target=self._up, args=(client, upstream, dropping), daemon=True).start()
            threading.Thread(target=self._down, args=(client, upstream, dropping), daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket, dropping: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                with self.lock:
                    if self.armed and self.armed in data.upper():
                        self.armed = None
                        dropping.set()
                upstream.sendall(data)
        except OSError:
            pass
        try:
            upstream.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        upstream.close()

    def _down(self, client: socket.socket, upstream: socket.socket, dropping: threading.Event) -> None:
        swallowed = b""
        try:
            while data := upstream.recv(65536):
                if not dropping.is_set():
                    client.sendall(data)
                    continue
                swallowed += data
                if REPLY.search(swallowed) and swallowed.endswith(b"\r\n"):
                    self.drops += 1
                    break
        except OSError:
            pass
        for sock in (client, upstream):  # shutdown: a close alone leaves _up blocked in recv, unseen
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


@pytest.fixture
def proxy(redis_server):
    dropper = ReplyDropper(redis_server.port)
    yield dropper
    dropper.close()


def quick_start_client(proxy: ReplyDropper) -> redis.Redis:
    """The docs' `redis.Redis()`, on the proxy's port: redis-py 8's default retries."""
    client = redis.Redis(port=proxy.port)
    assert client.get_retry().get_retries() > 0
    return client


ONE = PyTask("m:f", [1])
WARM_UP = PyTask("m:warm_up")  # loads the scripts (EVALSHA's NOSCRIPT) before the dropped command


def test_a_lost_enqueue_reply_raises_and_the_task_is_there_once(conn, proxy):
    queue = Queue("q", quick_start_client(proxy))
    queue.enqueue(WARM_UP)
    proxy.arm("EVALSHA")
    with pytest.raises(redis.ConnectionError):
        queue.enqueue(ONE)
    assert proxy.drops == 1
    assert conn.lrange("q", 0, -1) == [WARM_UP.serialize(), ONE.serialize()]
    assert conn.llen("q_noti") == 2
    queue.enqueue(PyTask("m:after"))  # the queue goes on, on a new connection
    assert conn.llen("q") == 3


def test_a_lost_unique_enqueue_reply_is_not_a_duplicate_of_itself(conn, proxy):
    queue = Queue("q", quick_start_client(proxy))
    queue.enqueue(WARM_UP, unique_for=60)
    proxy.arm("EVALSHA")
    with pytest.raises(redis.ConnectionError):  # unknown outcome; not DuplicateTaskError
        queue.enqueue(ONE, unique_for=60)
    assert proxy.drops == 1
    [blob] = conn.lrange("q", 1, -1)
    task = PyTask.deserialize(blob)
    assert (task.func_path, task.args) == ("m:f", [1])
    assert conn.get(f"q_unique:{task.options.unique_key}").decode() == task.options.unique_token  # its own lock
    with pytest.raises(DuplicateTaskError):  # and the lock does its job
        queue.enqueue(ONE, unique_for=60)


def test_a_lost_enqueue_many_reply_raises_and_the_batch_is_there_once(conn, proxy):
    queue = Queue("q", quick_start_client(proxy))
    batch = [PyTask("m:f", [i]) for i in range(3)] + [GoTask("main.F", 3)]
    queue.enqueue_many([WARM_UP])
    proxy.arm("EXEC")
    with pytest.raises(redis.ConnectionError):
        queue.enqueue_many(batch)
    assert proxy.drops == 1
    assert conn.lrange("q", 1, -1) == [task.serialize() for task in batch]
    assert conn.llen("q_noti") == 5


def test_a_lost_scheduled_enqueue_reply_raises_and_the_task_is_there_once(conn, proxy):
    queue = Queue("q", quick_start_client(proxy))
    proxy.arm("ZADD")
    with pytest.raises(redis.ConnectionError):
        queue.enqueue(ONE, delay=60)
    assert proxy.drops == 1
    assert conn.zcard("q_scheduled") == 1


def test_the_users_client_keeps_its_retries(conn, proxy):
    client = quick_start_client(proxy)
    retry = client.get_retry()
    queue = Queue("q", client)
    queue.enqueue(WARM_UP)
    assert client.get_retry() is retry
    lent = client.connection_pool._available_connections
    assert lent and all(c.retry.get_retries() == retry.get_retries() > 0 for c in lent)
    proxy.arm("INCRBY")
    assert client.incr("counter") == 2  # the user's own command was resent, as they configured
    assert proxy.drops == 1


def test_a_pool_with_retries_passed_in(conn, proxy):
    """`redis.Redis(connection_pool=...)`: the retries come from the pool's connection_kwargs."""
    pool = redis.BlockingConnectionPool(port=proxy.port, max_connections=2, timeout=5,
                                        retry=Retry(ExponentialBackoff(), 5),
                                        retry_on_error=[redis.ConnectionError])
    client = redis.Redis(connection_pool=pool)
    queue = Queue("q", client)
    queue.enqueue(WARM_UP)
    proxy.arm("EVALSHA")
    with pytest.raises(redis.ConnectionError):
        queue.enqueue(ONE)
    assert conn.llen("q") == 2
    queue.enqueue_many([PyTask("m:f", [i]) for i in range(4)])  # connections go back to the pool
    assert conn.llen("q") == 6
    pool.disconnect()


def run(coroutine_function):
    return asyncio.run(coroutine_function())


def test_async_lost_replies_raise_and_each_task_is_there_once(conn, proxy):
    async def produce():
        client = redis.asyncio.Redis(port=proxy.port)
        assert client.get_retry().get_retries() > 0
        queue = AsyncQueue("q", client)
        try:
            await queue.enqueue(WARM_UP, unique_for=60)
            proxy.arm("EVALSHA")
            with pytest.raises(redis.ConnectionError):
                await queue.enqueue(ONE)
            proxy.arm("EVALSHA")
            with pytest.raises(redis.ConnectionError):
                await queue.enqueue(PyTask("m:unique"), unique_for=60)
            proxy.arm("EXEC")
            with pytest.raises(redis.ConnectionError):
                await queue.enqueue_many([PyTask("m:many", [i]) for i in range(2)])
            await queue.enqueue(PyTask("m:after"))
            assert await client.incr("counter") == 1  # the user's client still works
        finally:
            await client.aclose()

    run(produce)
    assert proxy.drops == 3
    assert [PyTask.deserialize(blob).func_path for blob in conn.lrange("q", 0, -1)] == [
        "m:warm_up", "m:f", "m:unique", "m:many", "m:many", "m:after"]
    assert conn.llen("q_noti") == 6


@pytest.fixture
def sentinel(tmp_path, proxy):
    """A redis-sentinel watching the test Redis through the proxy, so the master it names is the proxy."""
    port = free_port()
    config = tmp_path / "sentinel.conf"
    config.write_text(f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\nlogfile {tmp_path / 'sentinel.log'}\n"
                      f"sentinel monitor mymaster 127.0.0.1 {proxy.port} 1\n")
    process = subprocess.Popen(["redis-server", str(config), "--sentinel"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = Sentinel([("127.0.0.1", port)], socket_timeout=1)
        wait_for(lambda: _master(client), what="the sentinel to name the master")
        yield client
    finally:
        process.terminate()
        process.wait(WAIT)


def _master(sentinel: Sentinel):
    try:
        return sentinel.discover_master("mymaster")
    except (redis.ConnectionError, redis.sentinel.MasterNotFoundError):
        time.sleep(0.05)
        return None


def test_a_sentinel_managed_client(conn, proxy, sentinel):
    master = sentinel.master_for("mymaster", retry=Retry(NoBackoff(), 3))
    assert master.get_retry().get_retries() == 3
    queue = Queue("q", master)
    queue.enqueue(WARM_UP)
    proxy.arm("EVALSHA")
    with pytest.raises(redis.ConnectionError):
        queue.enqueue(ONE)
    queue.enqueue(PyTask("m:after"))
    assert [PyTask.deserialize(blob).func_path for blob in conn.lrange("q", 0, -1)] == [
        "m:warm_up", "m:f", "m:after"]


def test_the_queue_leaves_the_users_client_alone(conn, redis_server):
    """A subclass's overrides still see the queue's commands; dropping the queue closes nothing of
    the user's (redis.Redis.from_url's client closes its pool when it is collected)."""

    class Traced(redis.Redis):
        seen: List[str] = []

        def execute_command(self, *args, **options):
            self.seen.append(str(args[0]))
            return super().execute_command(*args, **options)

    client = Traced.from_url(redis_server.url)
    queue = Queue("q", client)
    queue.enqueue(ONE)
    assert "EVALSHA" in Traced.seen
    del queue
    gc.collect()
    [connection] = client.connection_pool._available_connections
    assert connection._sock is not None  # still connected: the pool was not closed
    assert client.llen("q") == 1


def test_an_asyncio_cluster_client_must_come_without_retries(tmp_path):
    """A RedisCluster retries at its own level, above any pool: a sync one gets a view that does not
    (tests/test_cluster.py), an asyncio one must come without retries."""
    server = RedisServer(tmp_path, ["--cluster-enabled", "yes", "--cluster-port", str(free_port()),
                                    "--cluster-config-file", str(tmp_path / "nodes.conf")])
    with server:
        plain = redis.Redis(port=server.port)
        plain.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        wait_for(lambda: b"cluster_state:ok" in plain.execute_command("CLUSTER", "INFO"), what="the cluster")
        queue = Queue("{q}", RedisCluster(host="127.0.0.1", port=server.port))
        queue.enqueue(ONE)
        assert plain.lrange("{q}", 0, -1) == [ONE.serialize()]

        async def produce():
            with pytest.raises(TypeError, match=r"retry=Retry\(NoBackoff\(\), 0\)"):
                AsyncQueue("{q}", redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=server.port))

        run(produce)
