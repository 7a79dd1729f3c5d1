"""Prometheus metrics: real worker processes and the queue exporter scraped by a real Prometheus
server (Debian's `prometheus`, which `make test` installs), and the /metrics text in detail."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable, Dict, List, Set, Tuple, Union

import pytest
import redis
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from delayed import PyTask, Queue, Worker
from delayed.ops import admin
from delayed.ops.metrics.queues import SERIES as QUEUE_SERIES
from delayed.ops.metrics.queues import STATES, QueueCollector
from delayed.protocol.sweeper_ops import SweeperOps
from delayed.testing import RedisServer, free_port
from delayed.worker.cli import main as worker_main
from delayed.worker.metrics import BUCKETS, TaskMetrics, serve
from delayed.worker.metrics import SERIES as WORKER_SERIES

from . import docs_examples
from .conftest import ROOT, WAIT, results, spawn, wait_for
from .test_counters import run_workflows

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


class Prometheus:
    """A prometheus server scraping targets every second, with its data in directory."""

    def __init__(self, directory: Path, targets: List[str]) -> None:
        if not os.access(PROMETHEUS, os.X_OK):
            pytest.fail("prometheus is not installed: these tests need a real Prometheus server "
                        "(`make test` installs Debian's `prometheus` package; or apt-get install prometheus)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = directory / "prometheus.yml"
        config.write_text(json.dumps({  # YAML is a superset of JSON
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": "delayed", "static_configs": [{"targets": targets}]}],
        }))
        self.log = directory / "prometheus.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"], stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._ready, what=f"prometheus to be ready (see {self.log})", interval=0.1)

    def _ready(self) -> bool:
        assert self.process.poll() is None, self.log.read_text()
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as reply:
                return reply.status == 200
        except OSError:
            return False

    def query(self, promql: str) -> Dict[Tuple[str, ...], float]:
        """An instant query: each series' labels (sorted; its name, job and instance left out) -> its value."""
        url = f"{self.url}/api/v1/query?query={urllib.parse.quote(promql)}"
        with urllib.request.urlopen(url, timeout=WAIT) as reply:
            data = json.load(reply)
        assert data["status"] == "success", data
        return {tuple(f"{k}={v}" for k, v in sorted(r["metric"].items()) if k not in ("__name__", "job", "instance")):
                float(r["value"][1]) for r in data["data"]["result"]}

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


@pytest.fixture
def prometheus(tmp_path):
    """start(targets) -> a Prometheus scraping those host:port targets every second; stopped after the test."""
    started = []

    def start(*targets: str) -> Prometheus:
        directory = tmp_path / f"prometheus-{len(started)}"
        directory.mkdir()
        started.append(Prometheus(directory, list(targets)))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def settled(read: Callable[[], object], expected: object, timeout: float = WAIT) -> object:
    """read() once it equals expected, or its last value after timeout seconds (for the assert's diff)."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if value == expected or time.monotonic() > deadline:
            return value
        time.sleep(0.25)


def scrape(port: int) -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]:
    """GET /metrics: sample name and sorted labels -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT) as reply:
        text = reply.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def help_texts(port: int) -> Dict[str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT) as reply:
        return {family.name: family.documentation for family in text_string_to_metric_families(reply.read().decode())}


def enqueue_the_mix(conn: redis.Redis, ok: int = 30) -> None:
    """`ok` tasks that return, 5 that fail and are dead-lettered, 3 that fail twice then succeed on
    their retries, one whose arguments do not fit, one not allowed and one malformed blob."""
    queue = Queue("default", conn)
    queue.enqueue_many(PyTask("tests.tasks:record", ["ok", i]) for i in range(ok))
    for i in range(5):
        queue.enqueue(PyTask("tests.tasks:always_fail", [f"bad{i}"]))
    for i in range(3):
        queue.enqueue(PyTask("tests.tasks:fail_until", [f"flaky{i}", 2], retry=3))
    queue.enqueue(PyTask("tests.tasks:record"))  # record(tag) without its tag: bad_arguments
    queue.enqueue(PyTask("tests.tasks:_private", ["x"]))  # not_allowed
    conn.rpush("default", b"\xc1 not msgpack")  # malformed
    conn.rpush("default_noti", "1")


def mix_counts(ok: int) -> Dict[Tuple[str, str], float]:
    """delayed_tasks_total by (function, outcome) once enqueue_the_mix(ok) has run."""
    return {("tests.tasks:record", "done"): ok, ("tests.tasks:record", "failed"): 1,
            ("tests.tasks:always_fail", "failed"): 5,
            ("tests.tasks:fail_until", "retried"): 6, ("tests.tasks:fail_until", "done"): 3,
            ("", "dead"): 2}


def mix_runs(ok: int) -> Dict[str, float]:
    """delayed_task_duration_seconds_count by function: every run, the failed and retried ones too."""
    return {"tests.tasks:record": ok + 1, "tests.tasks:always_fail": 5, "tests.tasks:fail_until": 9}


def wait_for_the_mix(conn: redis.Redis, ok: int) -> None:
    wait_for(lambda: len(results(conn)) == ok + 3 and Queue("default", conn).dead.count() == 8,
             what="every task of the mix to be settled")


def prometheus_counts(server: Prometheus) -> Dict[Tuple[str, str], float]:
    """delayed_tasks_total by (function, outcome), as Prometheus has it (it drops the empty function label)."""
    rows = server.query('sum by (function, outcome) (delayed_tasks_total{queue="default"})')
    labels = {key: dict(label.split("=", 1) for label in key) for key in rows}
    return {(labels[key].get("function", ""), labels[key]["outcome"]): value for key, value in rows.items()}


def prometheus_runs(server: Prometheus) -> Dict[str, float]:
    rows = server.query('sum by (function) (delayed_task_duration_seconds_count{queue="default"})')
    return {key[0].split("=", 1)[1]: value for key, value in rows.items()}


def children(pid: int) -> List[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_one_endpoint_counts_every_process_of_a_supervisor_even_one_that_died(
        conn, redis_server, prometheus, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the supervisor makes its multiprocess directory
    port = free_port()
    worker = spawn("delayed.worker", "--concurrency", "2", "--metrics-port", str(port), "--keep-alive-timeout", "1",
                   "tests.imports_prometheus", "tests.tasks", redis_url=redis_server.url)
    try:
        server = prometheus(f"127.0.0.1:{port}")
        assert settled(lambda: server.query("up"), {(): 1.0}) == {(): 1.0}
        enqueue_the_mix(conn, ok=30)
        wait_for_the_mix(conn, ok=30)
        assert settled(lambda: prometheus_counts(server), mix_counts(30)) == mix_counts(30)
        assert settled(lambda: prometheus_runs(server), mix_runs(30)) == mix_runs(30)

        # A worker process that dies takes nothing away: its counts stay, its replacement adds to them.
        killed = children(worker.pid)[0]
        os.kill(killed, signal.SIGKILL)
        wait_for(lambda: len(children(worker.pid)) == 2 and killed not in children(worker.pid),
                 what="the supervisor to restart the killed worker")
        Queue("default", conn).enqueue_many(PyTask("tests.tasks:record", ["more", i]) for i in range(10))
        wait_for(lambda: len(results(conn)) == 43, what="the second wave")
        expected = {**mix_counts(30), ("tests.tasks:record", "done"): 40}
        assert settled(lambda: prometheus_counts(server), expected) == expected
        runs = {**mix_runs(30), "tests.tasks:record": 41}
        assert settled(lambda: prometheus_runs(server), runs) == runs
        assert server.query('delayed_task_duration_seconds_bucket{le="+Inf",function="tests.tasks:record"}') \
            == {("function=tests.tasks:record", "le=+Inf", "queue=default"): 41.0}
        assert len(list(tmp_path.glob("delayed-metrics-*"))) == 1
    finally:
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0, output
    assert list(tmp_path.glob("delayed-metrics-*")) == []  # the supervisor removed its directory


def test_a_threaded_worker_process_counts_on_its_own_endpoint(conn, redis_server, prometheus):
    port = free_port()
    worker = spawn("delayed.worker", "--threads", "3", "--metrics-port", str(port), "tests.tasks",
                   redis_url=redis_server.url)
    try:
        server = prometheus(f"127.0.0.1:{port}")
        enqueue_the_mix(conn, ok=20)
        wait_for_the_mix(conn, ok=20)
        assert settled(lambda: prometheus_counts(server), mix_counts(20)) == mix_counts(20)
        assert settled(lambda: prometheus_runs(server), mix_runs(20)) == mix_runs(20)
    finally:
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0, output


def test_the_queue_exporter_reports_each_state_and_survives_redis_going_away(tmp_path, prometheus):
    with RedisServer(tmp_path) as own:
        client = redis.Redis.from_url(own.url)
        alpha = Queue("alpha", client)
        for i in range(5):
            alpha.enqueue(PyTask("tests.tasks:record", ["a", i]))
        client.hset("alpha_processing", mapping={"delayed-py-x": b"blob", "delayed-py-y": b"blob"})
        client.lpop("alpha", 2)
        alpha.enqueue(PyTask("tests.tasks:record", ["later"]), delay=3600)
        client.rpush("alpha_dead", b"{}")
        client.zadd("alpha_workers", {"delayed-py-live": time.time() + 3600, "delayed-py-lapsed": time.time() - 1})
        client.rpush("beta_dead", b"{}", b"{}")
        waiting = Queue("gamma", client).enqueue(PyTask("tests.tasks:record", ["tracked"]), result_ttl=60)
        client.hset(f"gamma_task:{waiting.id}", "enqueued", float("%d.%06d" % client.time()) - 600)
        port = free_port()
        exporter = spawn("delayed.metrics", "--port", str(port), "--queue", "alpha", "--queue", "beta",
                         "--queue", "gamma", redis_url=own.url)
        try:
            server = prometheus(f"127.0.0.1:{port}")
            expected = {("queue=alpha", "state=pending"): 3.0, ("queue=alpha", "state=processing"): 2.0,
                        ("queue=alpha", "state=scheduled"): 1.0, ("queue=alpha", "state=dead"): 1.0,
                        ("queue=beta", "state=pending"): 0.0, ("queue=beta", "state=processing"): 0.0,
                        ("queue=beta", "state=scheduled"): 0.0, ("queue=beta", "state=dead"): 2.0,
                        ("queue=gamma", "state=pending"): 1.0, ("queue=gamma", "state=processing"): 0.0,
                        ("queue=gamma", "state=scheduled"): 0.0, ("queue=gamma", "state=dead"): 0.0}
            assert settled(lambda: server.query("sum by (queue, state) (delayed_queue_tasks)"), expected) == expected
            workers = {("queue=alpha",): 1.0, ("queue=beta",): 0.0, ("queue=gamma",): 0.0}
            assert settled(lambda: server.query("sum by (queue) (delayed_workers)"), workers) == workers
            assert server.query("delayed_up") == {(): 1.0}
            # the head of alpha stays put: its age grows, from 0 at the first scrape
            wait_for(lambda: server.query("delayed_queue_oldest_pending_seconds{queue='alpha'}").get(
                ("queue=alpha",), 0) >= 2, what="the oldest pending age to grow")
            assert server.query("delayed_queue_oldest_pending_seconds{queue='beta'}") == {("queue=beta",): 0.0}
            # gamma's head is tracked: its record says it was enqueued 10 minutes ago, from the first scrape on
            age = server.query("delayed_queue_oldest_pending_seconds{queue='gamma'}")[("queue=gamma",)]
            waited = float("%d.%06d" % client.time()) - float(client.hget(f"gamma_task:{waiting.id}", "enqueued"))
            assert 600 <= age <= waited + 0.1  # the most it can have waited when scraped (to 0.1 s)

            own.stop()
            down = {(): 0.0}
            assert settled(lambda: server.query("delayed_up"), down) == down
            assert server.query("up") == {(): 1.0}  # the exporter still answers its scrapes
            own.start()
            up = {(): 1.0}
            assert settled(lambda: server.query("delayed_up"), up) == up
        finally:
            exporter.send_signal(signal.SIGTERM)
            output, _ = exporter.communicate(timeout=30)
        assert exporter.returncode == 0, output
        assert output.count("cannot read the queues from Redis") == 1, output  # said once, not per scrape
        client.close()


def test_prometheus_reads_the_workflows_started_done_and_failed_per_queue_from_the_exporter(
        conn, redis_server, prometheus):
    """The exporter, finding the queues itself, serves each queue's workflow counters as one counter
    family; a queue with no workflow has them at 0."""
    Queue("plain", conn).enqueue(PyTask("tests.tasks:record", ["no workflow"]))
    run_workflows(conn, Queue("q", conn))
    port = free_port()
    exporter = spawn("delayed.metrics", "--port", str(port), redis_url=redis_server.url)
    try:
        server = prometheus(f"127.0.0.1:{port}")
        expected = {("event=started", "queue=q"): 4.0, ("event=done", "queue=q"): 2.0,
                    ("event=failed", "queue=q"): 2.0, ("event=started", "queue=plain"): 0.0,
                    ("event=done", "queue=plain"): 0.0, ("event=failed", "queue=plain"): 0.0}
        query = "sum by (queue, event) (delayed_queue_workflows_total)"
        assert settled(lambda: server.query(query), expected) == expected
    finally:
        exporter.send_signal(signal.SIGTERM)
        output, _ = exporter.communicate(timeout=30)
    assert exporter.returncode == 0, output


@pytest.mark.parametrize("threads", [1, 3])
def test_metrics_text_in_detail(conn, threads):
    name = f"detail{threads}"  # the registry is the process's: a queue of its own keeps counts apart
    queue = Queue(name, conn)
    queue.enqueue(PyTask("tests.tasks:slow", ["slow", 0.06]))
    queue.enqueue(PyTask("tests.tasks:record", ["quick"]))
    queue.enqueue(PyTask("tests.tasks:always_fail", ["no"]))
    queue.enqueue(PyTask("tests.tasks:fail_until", [f"again{threads}", 1], max_retries=1, backoff=0.01))
    queue.enqueue(PyTask("os:system", ["true"]))
    port = free_port()
    server = serve(port)
    worker = Worker(queue, ["tests.tasks"], keep_alive_interval=1, threads=threads, observe=TaskMetrics())
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: Queue(name, conn).dead.count() == 2 and len(results(conn)) == 3,
                 what="the tasks to run")  # (a task records before the worker settles it: the counts may lag)
        outcomes = [("tests.tasks:slow", "done"), ("tests.tasks:record", "done"),
                    ("tests.tasks:always_fail", "failed"), ("tests.tasks:fail_until", "retried"),
                    ("tests.tasks:fail_until", "done"), ("", "dead")]

        def counted():
            samples.update(scrape(port))
            return [samples.get(("delayed_tasks_total", (("function", f), ("outcome", o), ("queue", name))))
                    for f, o in outcomes]

        samples: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float] = {}
        assert settled(counted, [1] * len(outcomes)) == [1] * len(outcomes)
    finally:
        worker.stop()
        thread.join(WAIT)
        server.shutdown()
        server.server_close()

    assert not any(dict(labels).get("function") == "os:system" for _, labels in samples)  # never a label value
    histogram = {dict(labels).get("le"): value for (sample, labels), value in samples.items()
                 if sample == "delayed_task_duration_seconds_bucket" and dict(labels)["queue"] == name
                 and dict(labels)["function"] == "tests.tasks:slow"}
    assert sorted(float(le) for le in histogram) == sorted([*BUCKETS, float("inf")])
    assert histogram["0.05"] == 0 and histogram["+Inf"] == 1  # it slept 0.06 s
    slow_sum = samples[("delayed_task_duration_seconds_sum", (("function", "tests.tasks:slow"), ("queue", name)))]
    assert slow_sum >= 0.06
    runs = samples[("delayed_task_duration_seconds_count", (("function", "tests.tasks:fail_until"), ("queue", name)))]
    assert runs == 2
    assert ("delayed_task_duration_seconds_count", (("function", ""), ("queue", name))) not in samples


def test_help_says_what_each_outcome_means():
    port = free_port()
    TaskMetrics()("help", "tests.tasks:record", "done", 0.001)
    server = serve(port)
    try:
        texts = help_texts(port)
    finally:
        server.shutdown()
        server.server_close()
    assert "done (returned), retried (raised, runs again), failed" in texts["delayed_tasks"]
    assert "Run time" in texts["delayed_task_duration_seconds"]


def test_every_family_a_worker_or_the_exporter_serves_is_declared_for_the_docs(conn):
    """The docs' metrics list is made from SERIES: each endpoint serves exactly the families declared there."""
    port = free_port()
    TaskMetrics()("declared", "tests.tasks:record", "done", 0.001)
    server = serve(port)
    try:
        # (prometheus_client adds a *_created family of its own to each counter and histogram)
        served = {name for name in help_texts(port) if name.startswith("delayed_") and not name.endswith("_created")}
    finally:
        server.shutdown()
        server.server_close()
    assert served == {series.name.removesuffix("_total") for series in WORKER_SERIES}
    registry = CollectorRegistry()
    registry.register(QueueCollector(conn, ["declared"]))
    families = {family.name: (family.type, family.documentation) for family in registry.collect()}
    assert families == {series.name.removesuffix("_total"): (series.kind, series.help) for series in QUEUE_SERIES}


def queue_samples(registry: CollectorRegistry, name: str) -> Dict[str, float]:
    """One scrape: the queue's counts by state, workers, paused, oldest pending age; and delayed_up."""
    samples = {(s.name, s.labels.get("state")): s.value for family in registry.collect() for s in family.samples
               if s.labels.get("queue") in (name, None)}
    return {**{state: samples[("delayed_queue_tasks", state)] for state in STATES},
            "workers": samples[("delayed_workers", None)],
            "paused": samples[("delayed_queue_paused", None)],
            "oldest": samples[("delayed_queue_oldest_pending_seconds", None)],
            "up": samples[("delayed_up", None)]}


def test_the_queue_collector_finds_queues_and_bounds_the_oldest_pending_age(conn):
    queue = Queue("found", conn)
    queue.enqueue(PyTask("tests.tasks:record", ["first"]))
    queue.enqueue(PyTask("tests.tasks:record", ["second"]))
    registry = CollectorRegistry()
    registry.register(QueueCollector(conn))  # no names: found with SCAN
    assert queue_samples(registry, "found") == {"pending": 2, "processing": 0, "scheduled": 0, "dead": 0,
                                                "workers": 0, "paused": 0, "oldest": 0, "up": 1}
    queue.pause()
    assert queue_samples(registry, "found")["paused"] == 1
    queue.resume()
    time.sleep(1.1)
    assert queue_samples(registry, "found")["oldest"] >= 1.1  # the same head, seen 1.1 s ago at least
    conn.lpop("found")  # the head was taken: the next one was first seen just now
    assert queue_samples(registry, "found")["oldest"] == 0

    # identical blobs: the head looks the same, but the queue shrank, so its head was taken
    conn.delete("found")
    same = PyTask("tests.tasks:record", ["same"])
    for _ in range(3):
        queue.enqueue(same)
    assert queue_samples(registry, "found")["oldest"] == 0
    time.sleep(1.1)
    assert queue_samples(registry, "found")["oldest"] >= 1.1
    conn.lpop("found")
    assert queue_samples(registry, "found")["oldest"] == 0
    conn.delete("found")
    assert queue_samples(registry, "found")["oldest"] == 0  # empty


def test_the_queue_collector_agrees_with_stats_on_workers_and_on_a_swept_heads_age(conn):
    """delayed_workers counts go-delayed's live workers as `delayed stats` does, and an untracked head a
    sweep noted 30 s ago is at least 30 s old from the first scrape."""
    go_id = "0123456789abcdef0123456789abcdef"
    conn.hset("go_processing", go_id, b"a go-delayed worker's last task")
    conn.set(go_id, "1", ex=60)
    queue = Queue("go", conn)
    queue.enqueue(PyTask("tests.tasks:record", ["waiting"]))
    SweeperOps(queue).sweep()
    digest, _, since_ms = conn.get("go_head_since").partition(b":")
    conn.set("go_head_since", digest + b":" + str(int(since_ms) - 30_000).encode())
    registry = CollectorRegistry()
    registry.register(QueueCollector(conn, ["go"]))
    scraped = queue_samples(registry, "go")
    [row] = admin.stats(conn, ["go"])
    assert scraped["workers"] == row["workers"] == 1
    assert row["latency_basis"] == "sweep" and scraped["oldest"] >= row["latency"] >= 30


def test_the_queue_collector_reports_up_0_while_redis_is_away(tmp_path):
    with RedisServer(tmp_path) as own:
        client = redis.Redis.from_url(own.url)
        Queue("q", client).enqueue(PyTask("tests.tasks:record", ["x"]))
        registry = CollectorRegistry()
        own.stop()
        registry.register(QueueCollector(client, ["q"]))  # registering reads nothing from Redis
        assert registry.get_sample_value("delayed_up") == 0
        assert registry.get_sample_value("delayed_queue_tasks", {"queue": "q", "state": "pending"}) is None
        own.start()
        assert registry.get_sample_value("delayed_up") == 1
        assert registry.get_sample_value("delayed_queue_tasks", {"queue": "q", "state": "pending"}) == 0
        client.close()


def test_the_worker_runs_without_prometheus_client(conn, redis_server):
    script = ("import sys; sys.modules['prometheus_client'] = None\n"  # import prometheus_client now fails
              "from delayed.worker.cli import main as worker_main\n"
              "sys.exit(worker_main(sys.argv[1:]))")
    env = dict(os.environ, PYTHONPATH=str(ROOT), DELAYED_TEST_REDIS_URL=redis_server.url)
    command = [sys.executable, "-c", script, "--redis-url", redis_server.url]
    worker = subprocess.Popen([*command, "--concurrency", "2", "tests.tasks"], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        Queue("default", conn).enqueue(PyTask("tests.tasks:record", ["without"]))
        wait_for(lambda: results(conn) == [repr(("without", (), {}))], what="the task to run")
    finally:
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0, output
    asked = subprocess.run([*command, "--metrics-port", str(free_port()), "tests.tasks"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=30)
    assert asked.returncode == 2
    assert asked.stderr.strip() == "delayed.worker: metrics need prometheus-client: pip install 'delayed[metrics]'"


def test_a_taken_metrics_port_is_a_one_line_error(capsys):
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        status = worker_main(["--metrics-port", str(taken.getsockname()[1]), "tests.tasks"])
    assert status == 2
    assert capsys.readouterr().err.startswith("delayed.worker: cannot serve metrics on 127.0.0.1:")


def test_a_metrics_host_that_is_no_address_here_is_a_one_line_error(capsys):
    status = worker_main(["--metrics-port", str(free_port()), "--metrics-host", "192.0.2.1", "tests.tasks"])
    assert status == 2
    assert capsys.readouterr().err.startswith("delayed.worker: cannot serve metrics on 192.0.2.1:")


def listening(port: int) -> Set[str]:
    """The addresses TCP sockets listen on at port, as the kernel's tables (/proc/net/tcp, tcp6) say."""
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                words = bytes.fromhex(address)
                # each 32-bit word of the address is in host order
                native = b"".join(words[i:i + 4][::-1] for i in range(0, len(words), 4))
                found.add(socket.inet_ntop(family, native))
    return found


@pytest.mark.parametrize("command", [
    ("delayed.worker", "--metrics-port", "{port}", "tests.tasks"),
    ("delayed.worker", "--concurrency", "2", "--metrics-port", "{port}", "tests.tasks"),
    ("delayed", "metrics", "--port", "{port}"),
], ids=["worker", "supervisor", "exporter"])
def test_metrics_listen_on_loopback_unless_told_otherwise(redis_server, command):
    host_flag = "--host" if "metrics" in command else "--metrics-host"
    for extra, addresses in (((), {"127.0.0.1"}), ((host_flag, "0.0.0.0"), {"0.0.0.0"})):
        port = free_port()
        process = spawn(command[0], *(arg.format(port=port) for arg in command[1:]), *extra,
                        redis_url=redis_server.url)
        try:
            wait_for(lambda: listening(port), what=f"{' '.join(command)} to listen on {port}")
            assert listening(port) == addresses
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
                assert reply.status == 200
        finally:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=30)
        assert process.returncode == 0, output


# The metrics page's queries (docs/metrics.md), run on a real Prometheus


METRICS_PAGE = ROOT / "docs" / "metrics.md"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def page_queries() -> List[str]:
    """The ```promql blocks of the metrics page, each one query."""
    return [block.source.strip() for block in docs_examples.blocks(METRICS_PAGE) if block.language == "promql"]


def page_rule_files() -> List[str]:
    """The ```yaml blocks of the metrics page that are Prometheus rule files (they have `groups`)."""
    return [block.source for block in docs_examples.blocks(METRICS_PAGE)
            if block.language == "yaml" and "groups" in (yaml.safe_load(block.source) or {})]


def run_query(server: Prometheus, promql: str) -> Union[Dict[Tuple[str, ...], float], str]:
    """server.query(promql), or Prometheus's error for a query it refuses (HTTP 400: it does not parse)."""
    try:
        return server.query(promql)
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}: {json.load(exc).get('error')}"


def unknown_metrics(server: Prometheus, promql: str) -> List[str]:
    """The delayed_* names in promql that no series Prometheus scraped has (a typo, or a metric gone)."""
    with urllib.request.urlopen(f"{server.url}/api/v1/label/__name__/values", timeout=WAIT) as reply:
        known = set(json.load(reply)["data"])
    return sorted(name for name in set(re.findall(r"\bdelayed_\w+", promql)) if name not in known)


def test_every_query_and_alert_of_the_metrics_page_runs_on_prometheus(conn, redis_server, prometheus, tmp_path):
    """Each ```promql block of docs/metrics.md, run on a Prometheus scraping a real worker and a real
    exporter fed with the mix (done, retried, failed and dead tasks; a paused queue with a task pending),
    parses and returns at least one series; the alert rules pass promtool, and each rule's expression
    parses and names only metrics the targets serve."""
    queries, rule_files = page_queries(), page_rule_files()
    assert queries and rule_files, "the metrics page has no promql block, or no alert rules"
    held = Queue("held", conn)
    held.enqueue(PyTask("tests.tasks:record", ["held"]))
    held.pause()
    worker_port, exporter_port = free_port(), free_port()
    worker = spawn("delayed.worker", "--metrics-port", str(worker_port), "tests.tasks", redis_url=redis_server.url)
    exporter = spawn("delayed.metrics", "--port", str(exporter_port), "--queue", "default", "--queue", "held",
                     redis_url=redis_server.url)
    try:
        server = prometheus(f"127.0.0.1:{worker_port}", f"127.0.0.1:{exporter_port}")
        enqueue_the_mix(conn, ok=10)
        wait_for_the_mix(conn, ok=10)
        deadline = time.monotonic() + WAIT  # rate() needs two scrapes of a series: wait until every query answers
        while True:
            answers = {query: run_query(server, query) for query in queries}
            if all(answers.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        problems = [f"{query!r} is refused: {answer}" if isinstance(answer, str) else
                    f"{query!r} returns no series (metrics no target serves: {unknown_metrics(server, query)})"
                    for query, answer in answers.items() if isinstance(answer, str) or not answer]
        for number, rules in enumerate(rule_files):
            path = tmp_path / f"rules-{number}.yml"
            path.write_text(rules)
            checked = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True,
                                     timeout=30)
            if checked.returncode != 0:
                problems.append(f"promtool check rules refuses the alert rules: {checked.stdout}{checked.stderr}")
            for rule in (rule for group in yaml.safe_load(rules)["groups"] for rule in group["rules"]):
                answer = run_query(server, rule["expr"])
                if isinstance(answer, str):
                    problems.append(f"alert {rule['alert']}: {rule['expr']!r} is refused: {answer}")
                elif unknown_metrics(server, rule["expr"]):
                    problems.append(f"alert {rule['alert']} names metrics no target serves: "
                                    f"{unknown_metrics(server, rule['expr'])}")
        assert not problems, "\n".join(problems)
    finally:
        for process in (worker, exporter):
            process.send_signal(signal.SIGTERM)
        outputs = [process.communicate(timeout=30)[0] for process in (worker, exporter)]
    assert (worker.returncode, exporter.returncode) == (0, 0), outputs
