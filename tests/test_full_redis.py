"""A full Redis (maxmemory reached, maxmemory-policy noeviction): enqueues are refused with one clear
error, and workers and sweepers still go online, claim, settle and requeue, so the queue drains."""
import asyncio
import socket
import subprocess
import sys
import threading
from typing import Callable

import pytest
import redis
import redis.asyncio

from delayed import AsyncQueue, PyTask, Queue, QueueFullError
from delayed.protocol.redis_errors import error_text
from delayed.protocol.worker_ops import WorkerOps
from delayed.testing import RedisServer
from delayed.wire.keys import new_worker_id

from .conftest import ROOT, finish, lost_and_duplicates, read_until, spawn, wait_for

SECRET = "s3cr3t"
"""A task's argument that no error or log line may show."""


@pytest.fixture
def full(tmp_path):
    """A redis-server of 20 MB that evicts nothing, and a client of it."""
    with RedisServer(tmp_path, ["--maxmemory", "20mb", "--maxmemory-policy", "noeviction"]) as server:
        client = redis.Redis.from_url(server.url)
        yield server, client
        client.close()


def fill(queue: Queue) -> int:
    """Enqueue tasks of 1 KB until Redis refuses one; how many it took."""
    count, batch = 0, 500
    while batch:
        try:
            queue.enqueue_many(PyTask("tests.tasks:count", [f"{count + i}-" + "x" * 1000]) for i in range(batch))
            count += batch
        except QueueFullError:
            batch //= 2
    return count


def test_an_enqueue_refused_for_want_of_memory_is_one_clear_error_that_writes_nothing(full):
    server, client = full
    queue = Queue("q", client)
    filled = fill(queue)
    before = client.llen("q"), client.llen("q_noti"), client.zcard("q_scheduled")
    task = PyTask("tests.tasks:record", [SECRET])
    calls = [lambda: queue.enqueue(task), lambda: queue.enqueue(task, delay=60),
             lambda: queue.enqueue_many([task, task]), lambda: queue.enqueue(task, unique_for=60),
             lambda: queue.enqueue(task, result_ttl=60), lambda: queue.enqueue_many([task], result_ttl=60)]
    for call in calls:
        with pytest.raises(QueueFullError) as raised:
            call()
        message = str(raised.value)
        assert message.startswith("q: Redis is full") and SECRET not in message and "\n" not in message
        assert raised.value.__cause__ is None and raised.value.__suppress_context__

    async def refused_too() -> None:
        aqueue = AsyncQueue("q", redis.asyncio.Redis.from_url(server.url))
        for call in (lambda: aqueue.enqueue(task), lambda: aqueue.enqueue_many([task], delay=60)):
            with pytest.raises(QueueFullError):
                await call()

    asyncio.run(refused_too())
    assert (client.llen("q"), client.llen("q_noti"), client.zcard("q_scheduled")) == before == (filled, filled, 0)
    done = subprocess.run([sys.executable, "-m", "delayed", "--redis-url", server.url, "enqueue", "tests.tasks:record",
                           SECRET, "--queue", "q"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (1, "") and done.stderr.startswith("delayed: q: Redis is full")
    assert len(done.stderr.splitlines()) == 1 and SECRET not in done.stderr


class ExecHolder:
    """A loopback TCP proxy to a redis-server that holds back each EXEC: it forwards what comes before
    it (MULTI and the queued commands), waits until Redis has queued them (CLIENT LIST's multi=),
    calls before_exec(), then forwards it."""

    MULTI, EXEC = b"*1\r\n$5\r\nMULTI\r\n", b"*1\r\n$4\r\nEXEC\r\n"

    def __init__(self, port: int, before_exec: Callable[[], object]) -> None:
        self.upstream_port, self.before_exec = port, before_exec
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        client, _ = self.listener.accept()
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()
        address, sent = "%s:%d" % upstream.getsockname(), b""  # what went up since the last EXEC
        while data := client.recv(65536):
            at = data.find(self.EXEC)
            if at >= 0:
                upstream.sendall(data[:at])
                before = sent + data[:at]
                queued = commands(before[before.rfind(self.MULTI):]) - 1  # after MULTI
                wait_for(lambda: self._queued(address) == queued, what="Redis to queue what came before EXEC")
                self.before_exec()
                data, sent = data[at:], b""
            upstream.sendall(data)
            sent += data

    def _queued(self, address: str) -> int:
        """How many commands the transaction of the client at address holds (-1: none begun)."""
        with redis.Redis(port=self.upstream_port) as admin:
            return next(int(client["multi"]) for client in admin.client_list() if client["addr"] == address)

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket) -> None:
        while data := source.recv(65536):
            target.sendall(data)


def commands(data: bytes) -> int:
    """How many commands data holds, each a RESP array of bulk strings (*N, then N of $LENGTH and bytes)."""
    count = at = 0
    while at < len(data):
        end = data.index(b"\r\n", at)
        parts, at = int(data[at + 1:end]), end + 2
        for _ in range(parts):
            end = data.index(b"\r\n", at)
            at = end + 2 + int(data[at + 1:end]) + 2
        count += 1
    return count


def test_a_batch_whose_exec_redis_refuses_for_memory_is_a_queue_full_error(full):
    """Redis refuses a MULTI's EXEC for want of memory when there was room as its commands were queued
    and none is left at EXEC (EXECABORT, no queued command failing): enqueue_many says QueueFullError
    all the same, not redis-py's ExecAbortError (make test met this once, filling a Redis)."""
    server, client = full
    proxy = ExecHolder(server.port, before_exec=lambda: client.config_set("maxmemory", 1))
    queue = Queue("q", redis.Redis(port=proxy.port))
    with pytest.raises(QueueFullError, match="^q: Redis is full"):
        queue.enqueue_many([PyTask("tests.tasks:record", [SECRET]), PyTask("tests.tasks:record", [SECRET])])
    assert (client.llen("q"), client.llen("q_noti")) == (0, 0)


def test_redis_errors_in_logs_quote_no_command(full):
    """redis-py quotes a failed pipeline command's arguments, a task's bytes among them; our logs do not."""
    _, client = full
    fill(Queue("q", client))
    with pytest.raises(redis.exceptions.OutOfMemoryError) as raised:
        for _ in range(1000):  # until Redis refuses one (the last fill may have left a little room)
            with client.pipeline(transaction=False) as pipe:
                pipe.rpush("q", SECRET, "x" * 1000)
                pipe.execute()
    assert SECRET in str(raised.value)
    assert error_text(raised.value) == "Redis is full: command not allowed when used memory > 'maxmemory'."


@pytest.mark.timeout(180)
def test_a_worker_started_on_a_full_redis_drains_it_and_a_sweeper_requeues_there(full, conn, redis_server):
    """Going online, keeping alive, claiming, releasing, retrying, dead-lettering, moving due tasks and
    sweeping all work at maxmemory: none of them may need memory before it frees some."""
    server, client = full
    queue = Queue("default", client)
    queue.enqueue(PyTask("tests.tasks:count", ["due"]), delay=0.5)
    queue.enqueue(PyTask("tests.tasks:count", ["lost"]))
    assert WorkerOps(queue).claim_batch((), (new_worker_id(),)).tasks  # held by a worker of ours that died at once
    queue.enqueue(PyTask("tests.tasks:fail_until", ["flaky", 1], retry=1))
    queue.enqueue(PyTask("tests.tasks:always_fail", ["doomed"]))
    filled = fill(queue)
    assert client.info("memory")["used_memory"] > 20 * 1024 * 1024 * 0.9
    sweeper = spawn("delayed.sweeper", "--interval", "0.2", redis_url=server.url, task_redis_url=redis_server.url)
    worker = spawn("delayed.worker", "--keep-alive-timeout", "1", "tests.tasks", redis_url=server.url,
                   task_redis_url=redis_server.url)
    try:
        read_until(worker, "online")
        wait_for(lambda: client.llen("default") + client.zcard("default_scheduled") + client.hlen("default_processing")
                 == 0, timeout=90, what="the full queue drained")
    finally:
        worker.terminate()
        sweeper.terminate()
        outputs = [finish(worker), finish(sweeper)]
    for status, output in outputs:
        assert status == 0 and "retrying until it is back" not in output, output
    assert lost_and_duplicates(conn, filled + 2) == (0, 0)  # the filling tasks, "due" and "lost"
    assert conn.get("flaky") == b"2" and [letter["func"] for letter in queue.dead.list()] == ["tests.tasks:always_fail"]
