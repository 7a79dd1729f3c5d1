"""Throwaway servers on free loopback ports, for tests and demos (yours too): one redis-server,
a Redis Cluster (RedisCluster), a primary and replica under three sentinels (SentinelSet), a stand-in
for Sentry that keeps the events sentry-sdk sends it (SentryReceiver); and a poll-until helper."""
import gzip
import http.server
import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional


def wait_for(condition: Callable[[], Any], timeout: float = 10, what: str = "condition",
             interval: float = 0.02) -> Any:
    """Poll `condition` until it returns something truthy, and return that.

    Args:
        condition: Called with no arguments, every `interval` seconds.
        timeout: The most seconds to wait.
        what: What is awaited, for the error's message.
        interval: Seconds between calls.

    Returns:
        The first truthy value `condition` returned.

    Raises:
        AssertionError: Still falsy after `timeout` seconds (so a test fails, naming `what`).

    Example:
        ```python
        from delayed import Queue, connect
        from delayed.testing import wait_for

        queue = Queue("default", connect())
        wait_for(lambda: queue.len() == 0, timeout=5, what="the queue to drain")
        ```
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A throwaway `redis-server` on a free loopback port, for tests and demos; nothing is saved to disk.

    Readiness is read from the server's log, so it works whatever authentication or TLS `extra_args`
    set up. `stop()` and `start()` again keep its port: a restart.

    Args:
        directory: Where the server writes its log (and nothing else).
        extra_args: More arguments for `redis-server`, e.g. `["--requirepass", "secret"]`.

    Raises:
        RuntimeError: `redis-server` is not on the `PATH`.

    Attributes:
        port (int): Its port, on 127.0.0.1.
        log (Path): Its log file.

    Example:
        ```python
        import tempfile

        from delayed import Queue, connect
        from delayed.testing import RedisServer

        with RedisServer(tempfile.mkdtemp()) as server:
            queue = Queue("default", connect(server.url))
            assert queue.len() == 0
        ```
    """

    def __init__(self, directory: Path, extra_args: Optional[List[str]] = None) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not on PATH (`make test` and `make demo` install it)")
        self.directory = Path(directory)
        self.port = free_port()
        self.extra_args = extra_args or []
        self.log = self.directory / f"redis-{self.port}.log"
        self.process: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        """Its URL, `redis://127.0.0.1:PORT/0`."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        """Start the server and wait until it accepts connections (up to 10 s).

        Returns:
            The server itself.

        Raises:
            RuntimeError: It did not start; its log says why.
        """
        self.log.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.directory), "--logfile", str(self.log), *self.extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not (self.log.exists() and "Ready to accept connections" in self.log.read_text(errors="replace")):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}; see {self.log}")
            time.sleep(0.02)
        return self

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the server (SIGTERM), if it runs."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None


def _client(port: int) -> Any:
    import redis  # here, not at the top: RedisServer needs no client
    # RESP3, whatever redis-py's default: SENTINEL's replies read as maps on every redis-py we support
    return redis.Redis(port=port, socket_timeout=5, socket_connect_timeout=2, protocol=3)


def _answers(port: int, *command: str) -> Any:
    """The reply to command on 127.0.0.1:port, or None if it cannot be reached."""
    import redis
    client = _client(port)
    try:
        return client.execute_command(*command)
    except (redis.ConnectionError, redis.TimeoutError):
        return None
    finally:
        client.close()


class RedisCluster:
    """A throwaway Redis Cluster on free loopback ports, created with `redis-cli --cluster create`.

    For tests of failovers: `kill_primary(key)` kills (SIGKILL) the primary serving a key and waits for
    its replica to take over; `failover(key)` hands over cleanly (`CLUSTER FAILOVER` on the replica,
    nothing lost); `heal()` restarts the killed nodes, which rejoin as replicas.

    Args:
        directory: Where the nodes write their logs and cluster configs.
        primaries: How many primaries (shards).
        node_timeout_ms: How long the cluster waits before it calls a silent primary dead: a kill
            fails over a second or two after it.
        replicas: Replicas per primary.

    Raises:
        RuntimeError: `redis-cli` is not on the `PATH` (Debian's redis-tools, installed with
            redis-server).

    Attributes:
        nodes (list[RedisServer]): Every node, primaries and replicas.

    Example:
        ```python
        import tempfile

        from delayed import Queue, connect
        from delayed.testing import RedisCluster

        with RedisCluster(tempfile.mkdtemp()) as cluster:
            queue = Queue("{orders}", connect(cluster.url))
            assert queue.len() == 0
        ```
    """

    def __init__(self, directory: Path, primaries: int = 3, node_timeout_ms: int = 1000, replicas: int = 1) -> None:
        if shutil.which("redis-cli") is None:
            raise RuntimeError("redis-cli is not on PATH (Debian's redis-tools, installed with redis-server)")
        self.directory = Path(directory)
        self.primaries, self.replicas = primaries, replicas
        # a replica's failover election times out after 2 x max(2 x node timeout, 2 s)
        self.election_retry_s = 2 * max(2 * node_timeout_ms, 2000) / 1000
        self.last_election = -self.election_retry_s
        self.nodes: List[RedisServer] = []
        for _ in range(primaries * (1 + replicas)):
            node = RedisServer(self.directory)
            node.extra_args = ["--cluster-enabled", "yes", "--cluster-port", str(free_port()),
                               "--cluster-config-file", str(self.directory / f"nodes-{node.port}.conf"),
                               "--cluster-node-timeout", str(node_timeout_ms),
                               # a replica takes over however long ago it last heard its primary;
                               # a new replica syncs at once (not after 5 s)
                               "--cluster-replica-validity-factor", "0", "--repl-diskless-sync-delay", "0"]
            self.nodes.append(node)

    @property
    def url(self) -> str:
        """A `redis+cluster://` URL naming every node."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def start(self) -> "RedisCluster":
        """Start the nodes, create the cluster and wait until it is healthy (see `wait_healthy`).

        Returns:
            The cluster itself.
        """
        try:
            for node in self.nodes:
                node.start()
            subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{node.port}" for node in self.nodes),
                            "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                           check=True, capture_output=True, timeout=60)
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> "RedisCluster":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop every node."""
        for node in self.nodes:
            node.stop()

    def running(self) -> List[RedisServer]:
        """The nodes that run (not killed)."""
        return [node for node in self.nodes if node.process is not None]

    def roles(self) -> dict:
        """Each running node's role, as its `CLUSTER NODES` tells it of itself.

        Returns:
            Port -> `"master"` or `"slave"`.
        """
        roles = {}
        for node in self.running():
            me = self._myself(node)
            if me is not None and "fail" not in me[2]:
                roles[node.port] = _role(me)
        return roles

    def primary_for(self, key: str) -> RedisServer:
        """The running node that serves `key`'s slot.

        Args:
            key: A key.

        Returns:
            The node.
        """
        slot = _answers(self.running()[0].port, "CLUSTER", "KEYSLOT", key)
        for node in self.running():
            me = self._myself(node)
            if me is not None and _role(me) == "master" and _covers(me[8:], slot):
                return node
        raise AssertionError(f"no running primary serves slot {slot}")

    def replica_of(self, primary: RedisServer) -> RedisServer:
        """A running replica of `primary`.

        Args:
            primary: A primary node.

        Returns:
            The replica.

        Raises:
            AssertionError: The primary has no running replica.
        """
        primary_id = (self._myself(primary) or [""])[0]
        for node in self.running():
            me = self._myself(node)
            if me is not None and _role(me) == "slave" and me[3] == primary_id:
                return node
        raise AssertionError(f"primary {primary.port} has no running replica")

    def kill_primary(self, key: str, timeout: float = 30) -> RedisServer:
        """Kill (SIGKILL) the primary serving `key`, and wait until its replica took over.

        Returns once the replica is promoted and the cluster serves every slot again.

        Args:
            key: A key the primary serves.
            timeout: The most seconds to wait.

        Returns:
            The new primary.
        """
        primary = self.primary_for(key)
        replica = self.replica_of(primary)
        assert primary.process is not None
        self._after_the_last_election()
        primary.process.kill()
        primary.process.wait(10)
        primary.process = None
        wait_for(lambda: self.roles().get(replica.port) == "master", timeout, "the replica to be promoted", 0.1)
        self.last_election = time.monotonic()
        self._wait_settled(timeout)
        return replica

    def failover(self, key: str, timeout: float = 30) -> RedisServer:
        """Make the replica of `key`'s primary the primary, cleanly (`CLUSTER FAILOVER`): nothing is lost.

        Args:
            key: A key the primary serves.
            timeout: The most seconds to wait.

        Returns:
            The new primary.
        """
        replica = self.replica_of(self.primary_for(key))
        self._after_the_last_election()
        _answers(replica.port, "CLUSTER", "FAILOVER")
        wait_for(lambda: self.roles().get(replica.port) == "master", timeout, "the manual failover", 0.1)
        self.last_election = time.monotonic()
        self._wait_settled(timeout)
        return replica

    def heal(self, timeout: float = 30) -> None:
        """Restart the killed nodes (they rejoin as replicas) and wait until every node is up and in sync.

        Args:
            timeout: The most seconds to wait.
        """
        restarted = [node for node in self.nodes if node.process is None]
        for node in restarted:
            node.start()
        wait_for(lambda: all(self.roles().get(node.port) == "slave" for node in restarted), timeout,
                 "the restarted nodes to rejoin as replicas", 0.1)
        self.wait_healthy(timeout)

    def wait_healthy(self, timeout: float = 30) -> None:
        """Wait until the cluster is healthy.

        Every node says `cluster_state:ok` and agrees with the others, `primaries` of them are primaries,
        and every replica's link is up.

        Args:
            timeout: The most seconds to wait.

        Raises:
            AssertionError: Not healthy within `timeout` seconds.
        """
        self._wait_settled(timeout)
        wait_for(lambda: list(self.roles().values()).count("master") == self.primaries,
                 timeout, "one primary per shard", 0.1)
        wait_for(self._replicas_linked, timeout, "every replica to be in sync", 0.1)

    def _after_the_last_election(self) -> None:
        """Sleep until the last promotion is election_retry_s old. Redis 7.0 lets a node that won an
        election and was demoted sooner than that count the old election's votes again when its
        new primary fails: it claims the slots with a stale epoch, no node accepts it, and the
        cluster stays failed for good."""
        time.sleep(max(0.0, self.last_election + self.election_retry_s - time.monotonic()))

    def _wait_settled(self, timeout: float) -> None:
        wait_for(self._all_ok, timeout, "cluster_state:ok on every node", 0.1)
        wait_for(self._agreed, timeout, "every node to see the others as they see themselves", 0.1)

    def _nodes(self, node: RedisServer) -> List[List[str]]:
        """node's CLUSTER NODES, a list of fields per line (none if node cannot be reached)."""
        return [line.split() for line in (_answers(node.port, "CLUSTER", "NODES") or b"").decode().splitlines()]

    def _myself(self, node: RedisServer) -> Optional[List[str]]:
        return next((fields for fields in self._nodes(node) if "myself" in fields[2]), None)

    def _agreed(self) -> bool:
        """Every running node sees every other running node with the role and primary it claims,
        no failure flag and a connected bus link. Until then a node may not hear what another sends
        it: a replica restarted a moment ago drops a CLUSTER FAILOVER request to its primary."""
        views = {node.port: self._nodes(node) for node in self.running()}
        claimed = {fields[0]: (_role(fields), fields[3])
                   for lines in views.values() for fields in lines if "myself" in fields[2]}
        if len(claimed) != len(views):
            return False
        for lines in views.values():
            for fields in lines:
                if "myself" in fields[2] or fields[0] not in claimed:
                    continue  # itself, or a node that is down
                if (_role(fields), fields[3]) != claimed[fields[0]] or fields[7] != "connected" \
                        or any(flag in fields[2] for flag in ("fail", "handshake", "noaddr")):
                    return False
        return True

    def _all_ok(self) -> bool:
        return all(b"cluster_state:ok" in (_answers(node.port, "CLUSTER", "INFO") or b"")
                   for node in self.running())

    def _replicas_linked(self) -> bool:
        for node in self.running():
            info = _answers(node.port, "INFO", "replication") or {}  # parsed by redis-py
            if info.get("role") != "master" and info.get("master_link_status") != "up":
                return False
        return True


def _role(fields: List[str]) -> str:
    """"master" or "slave", from a CLUSTER NODES line's fields."""
    return "master" if "master" in fields[2] else "slave"


def _covers(ranges: List[str], slot: int) -> bool:
    """Whether CLUSTER NODES' slot fields ("0-5460", "5461", "[...]" while migrating) hold slot."""
    for text in ranges:
        if text.startswith("["):
            continue
        low, _, high = text.partition("-")
        if int(low) <= slot <= int(high or low):
            return True
    return False


class SentinelSet:
    """A throwaway primary and replica under three sentinels, on free loopback ports.

    The sentinels call a silent primary down after `down_after_ms` and fail over to the replica (under
    2 s, a sentinel may call a primary it has just promoted down before its first ping, and fail
    back). `kill_primary()` kills (SIGKILL) the primary and waits for the promotion; `heal()` restarts
    the killed server as a replica of the new primary. Sentinels are `redis-server FILE --sentinel`
    (Debian's redis-sentinel package only adds a service around that binary).

    Args:
        directory: Where the servers and sentinels write their logs and configs.
        master_name: The name the sentinels know the primary by.
        down_after_ms: How long a primary may be silent before the sentinels call it down.
        failover_timeout_ms: The sentinels' failover timeout.

    Attributes:
        primary (RedisServer): The primary now.
        replica (RedisServer): The replica now.

    Example:
        ```python
        import tempfile

        from delayed import Queue, connect
        from delayed.testing import SentinelSet

        with SentinelSet(tempfile.mkdtemp()) as sentinels:
            queue = Queue("default", connect(sentinels.url))
            assert queue.len() == 0
        ```
    """

    def __init__(self, directory: Path, master_name: str = "mymaster", down_after_ms: int = 2000,
                 failover_timeout_ms: int = 3000) -> None:
        self.directory = Path(directory)
        self.master_name = master_name
        self.primary = RedisServer(self.directory, ["--repl-diskless-sync-delay", "0"])
        self.replica = RedisServer(self.directory, self._replica_args(self.primary))
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.sentinels: List[subprocess.Popen] = []
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms

    @staticmethod
    def _replica_args(primary: RedisServer) -> List[str]:
        return ["--replicaof", "127.0.0.1", str(primary.port), "--repl-diskless-sync-delay", "0"]

    @property
    def url(self) -> str:
        """A `redis+sentinel://` URL naming the three sentinels and the master."""
        return "redis+sentinel://" + ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports) + \
               f"/{self.master_name}"

    def start(self) -> "SentinelSet":
        """Start the servers and the sentinels, and wait until the set is healthy (see `wait_healthy`).

        Returns:
            The set itself.
        """
        try:
            self.primary.start()
            self.replica.start()
            for port in self.sentinel_ports:
                self.sentinels.append(self._start_sentinel(port))
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_sentinel(self, port: int) -> subprocess.Popen:
        config = self.directory / f"sentinel-{port}.conf"
        name = self.master_name
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self.directory}\nlogfile {self.directory / f'sentinel-{port}.log'}\n"
            f"sentinel monitor {name} 127.0.0.1 {self.primary.port} 2\n"
            f"sentinel down-after-milliseconds {name} {self.down_after_ms}\n"
            f"sentinel failover-timeout {name} {self.failover_timeout_ms}\n"
            f"sentinel parallel-syncs {name} 1\n")
        return subprocess.Popen(["redis-server", str(config), "--sentinel"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def __enter__(self) -> "SentinelSet":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the sentinels and the servers."""
        for process in self.sentinels:
            if process.poll() is None:
                process.terminate()
                process.wait(10)
        self.sentinels = []
        self.primary.stop()
        self.replica.stop()

    def master_port(self) -> Optional[int]:
        """The primary's port as every sentinel names it.

        Returns:
            The port, or None while the sentinels disagree or cannot be reached.
        """
        named = {tuple(_answers(port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name) or (None,))
                 for port in self.sentinel_ports}
        if len(named) != 1 or (None,) in named:
            return None
        [address] = named
        return int(address[1])

    def wait_healthy(self, timeout: float = 30) -> None:
        """Wait until the set is healthy.

        Every sentinel names the primary and knows the replica and the two other sentinels; the replica is in
        sync.

        Args:
            timeout: The most seconds to wait.

        Raises:
            AssertionError: Not healthy within `timeout` seconds; the message says what was last seen.
        """
        seen: List[Any] = []

        def ready() -> bool:
            seen.clear()
            for port in self.sentinel_ports:
                state = _answers(port, "SENTINEL", "MASTER", self.master_name) or {}  # a dict of bytes
                replicas = _answers(port, "SENTINEL", "REPLICAS", self.master_name) or []
                seen.append((port, [state.get(key) for key in (b"port", b"flags", b"num-other-sentinels")],
                             [(replica[b"port"], replica[b"flags"]) for replica in replicas]))
            link = (_answers(self.replica.port, "INFO", "replication") or {}).get("master_link_status")
            seen.append(("replica link", link))
            wanted = [str(self.primary.port).encode(), b"master", b"2"]
            return link == "up" and all(
                primary == wanted and (str(self.replica.port).encode(), b"slave") in replicas
                for _, primary, replicas in seen[:-1])

        try:
            wait_for(ready, timeout, "the sentinels to see the primary, the replica and each other", 0.1)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; primary {self.primary.port}, replica {self.replica.port}; "
                                 f"last seen: {seen}") from None

    def kill_primary(self, timeout: float = 30) -> RedisServer:
        """Kill (SIGKILL) the primary, and wait until the sentinels name the replica and it is a primary.

        Args:
            timeout: The most seconds to wait.

        Returns:
            The new primary.
        """
        old, new = self.primary, self.replica
        assert old.process is not None
        old.process.kill()
        old.process.wait(10)
        old.process = None
        wait_for(lambda: self.master_port() == new.port, timeout, "the sentinels to promote the replica", 0.1)
        wait_for(lambda: (_answers(new.port, "ROLE") or [b""])[0] == b"master", timeout, "the promotion", 0.1)
        self.primary, self.replica = new, old
        return new

    def heal(self, timeout: float = 30) -> None:
        """Restart a killed server as a replica of the primary, and wait until the set is healthy.

        Args:
            timeout: The most seconds to wait.
        """
        if self.replica.process is None:
            self.replica.extra_args = self._replica_args(self.primary)
            self.replica.start()
        self.wait_healthy(timeout)


class SentryReceiver:
    """A stand-in for Sentry on a free loopback port: an HTTP server that takes the envelopes a real
    sentry-sdk sends to its `dsn` and keeps their events, for tests and examples of error reporting.

    It answers every envelope 200 and parses it as Sentry's envelope format says (a header line, then
    items, each a header line and a payload); gzip-compressed bodies (sentry-sdk's default without the
    brotli module) and plain ones are read.

    Attributes:
        port (int): Its port, on 127.0.0.1.

    Example:
        ```python
        import sentry_sdk
        from delayed.testing import SentryReceiver, wait_for

        with SentryReceiver() as sentry:
            sentry_sdk.init(dsn=sentry.dsn)
            sentry_sdk.capture_message("hello")
            event = wait_for(lambda: sentry.events(), what="the event")[0]
            print(event["message"])  # hello
        sentry_sdk.init()  # reports nowhere again
        ```
    """

    def __init__(self) -> None:
        self.port = free_port()
        self._envelopes: List[List[Dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._server: Optional[http.server.ThreadingHTTPServer] = None

    @property
    def dsn(self) -> str:
        """The DSN to give `sentry_sdk.init`: project 1 on this server."""
        return f"http://public@127.0.0.1:{self.port}/1"

    def start(self) -> "SentryReceiver":
        """Start serving, in a thread of this process.

        Returns:
            The receiver itself.
        """
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                items = _envelope_items(body)
                with receiver._lock:
                    receiver._envelopes.append(items)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:  # quiet: a test's output is its own
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, name="sentry-receiver", daemon=True).start()
        return self

    def events(self) -> List[Dict[str, Any]]:
        """The events received so far (the payloads of the envelopes' `event` items), oldest first."""
        with self._lock:
            return [item["payload"] for items in self._envelopes for item in items
                    if item["header"].get("type") == "event"]

    def __enter__(self) -> "SentryReceiver":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving and free the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _envelope_items(body: bytes) -> List[Dict[str, Any]]:
    """An envelope's items as {"header": ..., "payload": ...}: a JSON payload decoded, any other as bytes."""
    _, _, rest = body.partition(b"\n")  # the envelope's own header
    items = []
    while rest.strip():
        line, _, rest = rest.partition(b"\n")
        header = json.loads(line)
        if "length" in header:
            payload, rest = rest[:header["length"]], rest[header["length"] + 1:]
        else:
            payload, _, rest = rest.partition(b"\n")
        try:
            decoded: Any = json.loads(payload)
        except ValueError:
            decoded = payload
        items.append({"header": header, "payload": decoded})
    return items
