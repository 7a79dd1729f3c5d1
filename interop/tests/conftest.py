"""Live interop fixtures: a throwaway redis-server, and real processes beside it, go-delayed's
(interop/bin/goworker, goproducer, gosweeper) and ours (python -m delayed.worker / .sweeper).

Every process a test starts is SIGKILLed at teardown if still running; stdout and stderr go to
files in the test's tmp_path, so tests read go-delayed's log without pipes that could fill up.
The Go commands are built by interop/gocommands.py (a no-op when current), as for the bench,
the chaos runs and the demo.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
import redis

from delayed.testing import RedisServer
from interop import gocommands
from tests.conftest import WAIT, wait_for  # noqa: F401  (the tests import wait_for from here)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def go_bin() -> None:
    """go-delayed's commands, built; the session ends at once, saying why, where they cannot be."""
    reason = gocommands.build()
    if reason:
        pytest.exit(f"the live interop tests need Go and go-delayed ({reason}); make interop says so and passes", 2)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def conn(redis_server) -> redis.Redis:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield client
    client.close()


class Proc:
    """A started process with its output in files."""

    def __init__(self, name: str, popen: subprocess.Popen, out: Path, err: Path) -> None:
        self.name, self.popen, self.out_path, self.err_path = name, popen, out, err

    @property
    def pid(self) -> int:
        return self.popen.pid

    def out(self) -> str:
        return self.out_path.read_text(errors="replace")

    def err(self) -> str:
        return self.err_path.read_text(errors="replace")

    def events(self) -> List[dict]:
        """The JSON lines the process printed on stdout."""
        return [json.loads(line) for line in self.out().splitlines() if line.startswith("{")]

    def signal(self, signum: int) -> None:
        self.popen.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL, and reap."""
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(WAIT)

    def wait(self, timeout: float = WAIT) -> int:
        return self.popen.wait(timeout)

    def alive(self) -> bool:
        return self.popen.poll() is None


class GoWorker(Proc):
    id: str


class Procs:
    """Starts the processes of one test; kills whatever still runs at teardown."""

    def __init__(self, redis_url: str, directory: Path, results_url: Optional[str] = None) -> None:
        """redis_url: where the queues are; results_url: where tests.tasks records (default: the same)."""
        self.redis_url, self.directory = redis_url, directory
        self.results_url = results_url or redis_url
        self.started: List[Proc] = []
        self._count = 0

    def start(self, name: str, argv: List[str], env: Optional[Dict[str, str]] = None, cls=Proc) -> Proc:
        self._count += 1
        stem = self.directory / f"{self._count:03d}-{name}"
        out, err = Path(f"{stem}.out"), Path(f"{stem}.err")
        with open(out, "w") as out_file, open(err, "w") as err_file:
            popen = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out_file, stderr=err_file)
        proc = cls(name, popen, out, err)
        self.started.append(proc)
        return proc

    # go-delayed's side

    def go_worker(self, queue: str = "q", *flags: str, keep_alive_timeout: str = "1s",
                  keep_alive_duration: str = "200ms", dequeue_timeout: str = "200ms",
                  wait_for_event: str = "online") -> GoWorker:
        """A goworker on queue, returned once it is online (its keep-alive key exists), or
        once it printed wait_for_event ("starting": before Run)."""
        worker = self.start("goworker", gocommands.worker_argv(
            self.redis_url, queue, "-keep-alive-timeout", keep_alive_timeout,
            "-keep-alive-duration", keep_alive_duration, "-dequeue-timeout", dequeue_timeout, *flags), cls=GoWorker)
        return self._announced(worker, wait_for_event)

    def _announced(self, worker: GoWorker, event: str) -> GoWorker:
        """worker once it printed event (checked to be still running), its id read from that line."""
        seen = wait_for(lambda: [e for e in worker.events() if e.get("event") == event]
                        or not worker.alive(), what=f"{worker.name} {event}")
        assert worker.alive(), f"{worker.name} exited: {worker.err()}"
        worker.id = seen[0]["id"]
        return worker

    def go_producer(self, *flags: str, queue: str = "q") -> dict:
        """Run goproducer to completion; its JSON summary."""
        done = subprocess.run(gocommands.producer_argv(self.redis_url, queue, *flags),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    def cluster_producer(self, queue: str, *flags: str) -> dict:
        """Run clusterproducer (go-delayed's NewPyTask through go-redis's ClusterClient) on the
        cluster of redis_url, a redis+cluster:// URL, to completion; its JSON summary."""
        done = subprocess.run(gocommands.cluster_producer_argv(self.redis_url, queue, *flags),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    def go_sweeper(self, *queues: str, interval: str = "200ms") -> Proc:
        return self.start("gosweeper", gocommands.sweeper_argv(self.redis_url, list(queues or ("q",)),
                                                               "-interval", interval))

    def go_sweep_once(self, *queues: str) -> List[dict]:
        done = subprocess.run(gocommands.sweeper_argv(self.redis_url, list(queues or ("q",)), "-once"),
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    # our side: our Go module's worker and client

    def our_go_worker(self, queue: str = "q", *flags: str, keep_alive_timeout: str = "1s",
                      keep_alive_duration: str = "200ms", dequeue_timeout: str = "200ms") -> GoWorker:
        """An ourgoworker on queue (NewRedisPool for a redis:// redis_url, else Connect's client),
        returned once it is online (its keep-alive key exists). SIGTERM, SIGINT and SIGHUP stop it."""
        worker = self.start("ourgoworker", gocommands.our_worker_argv(
            self.redis_url, queue, "-keep-alive-timeout", keep_alive_timeout,
            "-keep-alive-duration", keep_alive_duration, "-dequeue-timeout", dequeue_timeout, *flags), cls=GoWorker)
        return self._announced(worker, "online")

    def our_go_client(self, queue: str, *flags: str) -> Tuple[int, dict]:
        """Run ourgoclient (one tracked task, its outcome awaited) to completion: its exit status and
        its JSON line."""
        done = subprocess.run(gocommands.our_client_argv(self.redis_url, queue, "-timeout", f"{WAIT}s", *flags),
                              capture_output=True, text=True, timeout=WAIT + 30)
        assert done.stdout.startswith("{"), (done.returncode, done.stderr)
        return done.returncode, json.loads(done.stdout.splitlines()[-1])

    # our side: Python's

    def _python(self, name: str, module: str, *args: str) -> Proc:
        env = dict(os.environ, PYTHONPATH=str(ROOT), DELAYED_TEST_REDIS_URL=self.results_url)
        return self.start(name, [sys.executable, "-m", module, "--redis-url", self.redis_url, *args], env=env)

    def py_worker(self, queue: str = "q", *flags: str, alive: bool = True) -> Proc:
        """python -m delayed.worker tests.tasks; returned once it logged that it is online
        (and, unless alive=False, checked to be still running)."""
        worker = self._python("pyworker", "delayed.worker", "--queue", queue, "--keep-alive-timeout", "1",
                              *flags, "tests.tasks")
        wait_for(lambda: " online " in worker.err() or not worker.alive(), what="python worker online")
        assert worker.alive() or not alive, worker.err()
        return worker

    def py_sweeper(self, *queues: str, interval: str = "0.2", max_crashes: Optional[int] = None) -> Proc:
        args = [a for q in (queues or ("q",)) for a in ("--queue", q)] + ["--interval", interval]
        if max_crashes is not None:
            args += ["--max-crashes", str(max_crashes)]
        return self._python("pysweeper", "delayed.sweeper", *args)

    def kill_all(self) -> None:
        for proc in self.started:
            proc.kill()


@pytest.fixture
def procs(go_bin, redis_server, conn, tmp_path) -> Procs:
    manager = Procs(redis_server.url, tmp_path)
    yield manager
    manager.kill_all()


def go_results(conn: redis.Redis, key: str = "go_results") -> List[dict]:
    """What the goworker handlers recorded, oldest first."""
    return [json.loads(item) for item in conn.lrange(key, 0, -1)]


def py_results(conn: redis.Redis) -> List[str]:
    """What tests.tasks.record recorded: repr((tag, args, kwargs)) strings, oldest first."""
    return [item.decode() for item in conn.lrange("results", 0, -1)]


def executions(conn: redis.Redis, counter: str = "executions") -> Dict[str, int]:
    """id -> how many times Count / Slow (Go) or tests.tasks.count (Python) ran it; with counter
    "starts", how many times ourgoworker's Slow started it."""
    return {k.decode(): int(v) for k, v in conn.hgetall(counter).items()}


def dequeue_errors(worker: Proc) -> List[str]:
    """go-delayed's "Failed to dequeue task" lines in a goworker's stderr."""
    return [line for line in worker.err().splitlines() if "Failed to dequeue task" in line]


SIGHUP, SIGKILL = signal.SIGHUP, signal.SIGKILL


def go_program(name: str, source: str):
    """interop/bin/name/main.go holding source, afresh (bin/ is gitignored, and inside the interop
    module, so go.mod pins go-delayed); its directory."""
    directory = gocommands.BIN / name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    (directory / "main.go").write_text(source)
    return directory


# One Redis for the whole session holding every kind of worker and sweeper at once: a mixed deployment.
# A worker of each kind has its queue, since each refuses the other kinds' tasks (ours dead-letter
# them, go-delayed's logs and drops them); both sweepers sweep all three. Two more queues have one
# sweeper each, for the tests of which sweeper recovers what a killed Go worker held.
PY, OURGO, STOCKGO = "py", "ourgo", "stockgo"
SWEPT_BY_PY, SWEPT_BY_GO = "swept-by-py", "swept-by-go"


class Deployment:
    """The mixed deployment's Redis (url, conn), and its long-running processes."""

    def __init__(self, server: RedisServer, procs: Procs) -> None:
        self.url, self.conn = server.url, redis.Redis.from_url(server.url)
        self.py_worker = procs.py_worker(PY)
        self.our_go_worker = procs.our_go_worker(OURGO)
        self.stock_go_worker = procs.go_worker(STOCKGO)
        self.py_sweeper = procs.py_sweeper(PY, OURGO, STOCKGO, SWEPT_BY_PY)
        self.go_sweeper = procs.go_sweeper(PY, OURGO, STOCKGO, SWEPT_BY_GO)
        self.procs = procs

    def cli(self, *args: str) -> str:
        """Run `python -m delayed ARGS` on the deployment's Redis, as an operator would; its stdout."""
        done = subprocess.run([sys.executable, "-m", "delayed", *args, "--redis-url", self.url], cwd=ROOT,
                              capture_output=True, text=True, timeout=WAIT)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def check_running(self) -> None:
        """Fail, with its stderr, if a process of the deployment is gone."""
        for proc in self.procs.started:
            assert proc.alive(), f"the deployment's {proc.name} exited ({proc.popen.returncode}): {proc.err()}"


@pytest.fixture(scope="session")
def deployment(go_bin, tmp_path_factory) -> Deployment:
    """The mixed deployment, started once; tests tell their tasks apart by ids of their own (it is never flushed)."""
    server = RedisServer(tmp_path_factory.mktemp("mixed")).start()
    procs = Procs(server.url, tmp_path_factory.mktemp("mixed-procs"))
    try:
        started = Deployment(server, procs)
        yield started
        started.conn.close()
    finally:
        procs.kill_all()
        server.stop()


@pytest.fixture
def mixed(deployment) -> Deployment:
    """The mixed deployment, checked to be all running."""
    deployment.check_running()
    return deployment


@pytest.fixture
def mixed_procs(mixed, tmp_path) -> Procs:
    """Processes of one test on the mixed deployment's Redis, killed at its end."""
    manager = Procs(mixed.url, tmp_path)
    yield manager
    manager.kill_all()
