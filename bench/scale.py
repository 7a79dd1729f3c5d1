"""The scale row of the bench: 6 queues drained by 6 worker processes (one per queue), on one
redis-server, on a Redis Cluster of 3 primaries (2 queues on each), and on that cluster with a
replica per primary (the normal deployment), in one run; with the CPU each side used.

Each setup is started here (delayed.testing) and stopped after. Its 6 queues have hash tags chosen
by slot so that 2 land on each primary; the same names serve on the single server. One run: the
queues are filled under staging names (the same tags), the 6 workers (`python -m delayed.worker
--queue NAME bench_tasks`) start and wait on their empty queues, then each queue's two lists are
RENAMEd into place at once (a MULTI per queue; a blocked BLPOP wakes on it), so every worker is up
when the drain begins. The remaining count (waiting + held, all 6 queues) is polled every 2 ms and
timed from the first finished task to the last, as the drain row is. Between those two moments
the utime + stime of every redis-server, of the workers and of this poller are read from
/proc/<pid>/stat, and the whole machine's busy time from /proc/stat: what the report says about
where the scaling stops comes from those.
"""
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import common
import redis

from delayed import PyTask, Queue
from delayed.protocol.connection import connect
from delayed.testing import RedisCluster, RedisServer

QUEUES = 6
PER_PRIMARY = 2
PRIMARIES = 3
STAGING = "_staging"  # suffix of a queue's name while it is filled (same hash tag, so same slot)
TICK = os.sysconf("SC_CLK_TCK")
# (key, label, replicas per primary or None for one plain redis-server)
SETUPS = [
    ("single", "1 redis-server", None),
    ("cluster", "cluster, 3 primaries, no replicas", 0),
    ("cluster_replicas", "cluster, 3 primaries + 3 replicas", 1),
]


def queue_names(cluster: RedisCluster) -> Tuple[List[str], Dict[str, int]]:
    """QUEUES tagged names, PER_PRIMARY on each primary (chosen by slot), and each one's primary port."""
    names: List[str] = []
    port_of: Dict[str, int] = {}
    per_port: Dict[int, int] = {}
    i = 0
    while len(names) < QUEUES:
        name = f"{{scale{i}}}"
        port = cluster.primary_for(name).port
        if per_port.get(port, 0) < PER_PRIMARY:
            per_port[port] = per_port.get(port, 0) + 1
            names.append(name)
            port_of[name] = port
        i += 1
    return names, port_of


def cpu_seconds(pid: int) -> float:
    """utime + stime of pid so far (0 if gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def descendants(pids: List[int]) -> List[int]:
    """pids and every process below them (a supervisor's forked worker)."""
    children: Dict[int, List[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found = list(pids)
    for pid in found:
        found.extend(children.get(pid, []))
    return found


def machine_busy() -> Tuple[float, float]:
    """(busy, total) seconds over all cores so far, from /proc/stat's cpu line."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values) - idle) / TICK, sum(values) / TICK


class Setup:
    """One deployment under test: its servers, its queues' names and which node holds each."""

    def __init__(self, key: str, replicas: Optional[int], directory: Path) -> None:
        self.key = key
        self.cluster = self.server = None
        if replicas is None:
            self.server = RedisServer(directory).start()
            self.url = self.server.url
            self.names = [f"{{scale{i}}}" for i in range(QUEUES)]
            self.port_of = {name: self.server.port for name in self.names}
            self.redis_pids = [self.server.process.pid]
        else:
            self.cluster = RedisCluster(directory, PRIMARIES, replicas=replicas).start()
            self.url = self.cluster.url
            self.names, self.port_of = queue_names(self.cluster)
            self.redis_pids = [node.process.pid for node in self.cluster.nodes]
        self.nodes = {port: redis.Redis(port=port) for port in set(self.port_of.values())}
        self.client = connect(self.url)

    def stop(self) -> None:
        for node in self.nodes.values():
            node.close()
        self.client.close()
        (self.cluster or self.server).stop()

    def flush(self) -> None:
        for node in self.nodes.values():  # the primaries; replicas follow
            node.flushall()

    def fill(self, per_queue: int) -> None:
        """per_queue no-op tasks in each queue's staging copy (enqueue_many, not timed)."""
        for name in self.names:
            staging = Queue(name + STAGING, self.client)
            for start in range(0, per_queue, 10_000):
                staging.enqueue_many([PyTask("bench_tasks:noop") for _ in range(min(10_000, per_queue - start))])

    def release(self) -> None:
        """Each queue's tasks and notifications into place: a MULTI of two RENAMEs on its node."""
        for name in self.names:
            with self.nodes[self.port_of[name]].pipeline(transaction=True) as pipe:
                pipe.rename(name + STAGING, name)
                pipe.rename(name + STAGING + "_noti", name + "_noti")
                pipe.execute()

    def remaining(self, names: List[str]) -> int:
        """Waiting + held tasks of the queues named, one pipeline per node (a cluster refuses a MULTI
        across slots): LLEN then HLEN of each queue, so a task claimed between the two counts twice,
        never none (the workers give nothing back before they stop: no-op tasks never overrun a batch)."""
        total = 0
        for port, node in self.nodes.items():
            mine = [name for name in names if self.port_of[name] == port]
            if mine:
                with node.pipeline(transaction=False) as pipe:
                    for name in mine:
                        pipe.llen(name)
                        pipe.hlen(name + "_processing")
                    total += sum(pipe.execute())
        return total

    def online(self) -> bool:
        """Every queue has its worker registered (its _workers sorted set)."""
        return all(self.nodes[self.port_of[name]].zcard(name + "_workers") >= 1 for name in self.names)


def drain(setup: Setup, per_queue: int, log_path: Path, run_id: str, timeout: float = 120) -> Dict:
    """One timed drain of QUEUES x per_queue tasks by QUEUES worker processes."""
    setup.flush()
    setup.fill(per_queue)
    tasks = per_queue * QUEUES
    env = dict(common.worker_env(setup.url), BENCH_RUN_ID=run_id)  # run.py kills what outlives the run
    procs: List[subprocess.Popen] = []
    with open(log_path, "ab") as log:
        try:
            for name in setup.names:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "delayed.worker", "--redis-url", setup.url, "--queue", name, "bench_tasks"],
                    cwd=common.BENCH_DIR, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True))
            deadline = time.monotonic() + 60
            while not setup.online():
                check(procs, deadline, "the workers to come online")
                time.sleep(0.02)
            worker_pids = descendants([proc.pid for proc in procs])
            setup.release()
            t0 = left_at_t0 = None
            pending = list(setup.names)
            deadline = time.monotonic() + timeout
            while True:
                left = setup.remaining(pending)
                now = time.perf_counter()
                if t0 is None and left < tasks:
                    t0, left_at_t0 = now, left
                    cpu0 = sample(setup.redis_pids, worker_pids)
                if left == 0:
                    cpu1 = sample(setup.redis_pids, worker_pids)
                    break
                check(procs, deadline, f"{left} of {tasks} tasks left")
                time.sleep(0.002)
        finally:
            stop(procs)
    seconds = now - t0
    used = {key: (cpu1[key] - cpu0[key]) / seconds for key in cpu0}  # cores busy on average
    return {"rate": left_at_t0 / seconds, "tasks": tasks, "seconds": seconds,
            "redis_cores": used["redis"], "workers_cores": used["workers"], "poller_cores": used["poller"],
            "machine_cores": used["machine_busy"] / used["machine_total"] * os.cpu_count(),
            "graceful_stop": all(proc.returncode in (0, -signal.SIGTERM) for proc in procs)}


def sample(redis_pids: List[int], worker_pids: List[int]) -> Dict[str, float]:
    busy, total = machine_busy()
    return {"redis": sum(map(cpu_seconds, redis_pids)), "workers": sum(map(cpu_seconds, worker_pids)),
            "poller": cpu_seconds(os.getpid()), "machine_busy": busy, "machine_total": total}


def check(procs: List[subprocess.Popen], deadline: float, progress: str) -> None:
    for proc in procs:
        if proc.poll() is not None:
            raise common.BenchError(f"a worker exited with status {proc.returncode}; {progress}")
    if time.monotonic() > deadline:
        raise common.BenchError(f"timed out; {progress}")


def stop(procs: List[subprocess.Popen]) -> None:
    """SIGTERM (the worker's graceful stop), 15 s to exit, then SIGKILL to the group."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def measure(cfg: Dict, log, run_id: str) -> Dict[str, List[Dict]]:
    """Every setup's runs: cfg["reps"] drains of about cfg["scale_seconds"] each, N sized from the
    rate found (a run under half that is not counted, twice at most)."""
    results: Dict[str, List[Dict]] = {}
    per_queue = cfg["scale_guess"]
    with tempfile.TemporaryDirectory(prefix="delayed-scale-") as tmp:
        for key, label, replicas in SETUPS:
            runs = results[key] = []
            directory = Path(tmp) / key
            directory.mkdir()
            try:
                setup = Setup(key, replicas, directory)
            except Exception as exc:  # noqa: BLE001  (no cluster on this machine: say why, go on)
                runs.append({"error": f"{type(exc).__name__}: {exc}"})
                log(f"  scale {key}: {runs[-1]}")
                continue
            try:
                recalibrations = 0
                while len(runs) < cfg["reps"]:
                    try:
                        result = drain(setup, per_queue, Path(tmp) / "scale-workers.log", run_id)
                    except common.BenchError as exc:
                        runs.append({"error": str(exc)})
                        log(f"  scale {key}: {runs[-1]}")
                        break
                    log(f"  scale {key} N={per_queue * QUEUES}: " + ", ".join(
                        f"{k}={v:,.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()))
                    too_short = result["seconds"] < 0.5 * cfg["scale_seconds"]
                    if too_short or result["seconds"] > 2 * cfg["scale_seconds"]:
                        per_queue = max(1000, int(result["rate"] * cfg["scale_seconds"] / QUEUES))
                    if too_short and recalibrations < 2:
                        recalibrations += 1
                        continue
                    runs.append(result)
            finally:
                setup.stop()
    return results


def _median(runs: List[Dict], field: str) -> Optional[float]:
    values = [run[field] for run in runs if field in run]
    return statistics.median(values) if values else None


def report(results: Dict[str, List[Dict]], cfg: Dict) -> List[str]:
    """The report's section: a table of the setups, where the scaling stops and why, every run."""
    cores = os.cpu_count() or 1
    lines = ["", f"## Scale: {QUEUES} queues, {QUEUES} worker processes, one Redis against a cluster", "",
             f"{QUEUES} queues of no-op tasks, {PER_PRIMARY} on each of the cluster's {PRIMARIES} primaries (hash tags "
             "chosen by slot), each drained by its own `python -m delayed.worker --queue NAME` (defaults: "
             "`--batch 32`); the same queues and workers on one redis-server, in the same run. Timed from the "
             "first finished task to the last; every worker is up before the tasks appear (they are RENAMEd "
             "into place). CPU: cores busy on average during the drain, from /proc (utime + stime); "
             "\"others\" is the whole machine's busy time less ours (the poller included).", "",
             f"| setup | tasks/s | ÷ 1 redis-server | redis-servers | workers | poller | others | whole machine (of {cores}) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    single = _median(results.get("single", []), "rate")
    for key, label, _ in SETUPS:
        runs = results.get(key, [])
        rate = _median(runs, "rate")
        if rate is None:
            why = next((run["error"] for run in runs if "error" in run), "not run")
            lines.append(f"| {label} | error: {why} | | | | | | |")
            continue
        cpu = {field: _median(runs, field) for field in ("redis_cores", "workers_cores", "poller_cores", "machine_cores")}
        others = max(0.0, cpu["machine_cores"] - cpu["redis_cores"] - cpu["workers_cores"] - cpu["poller_cores"])
        lines.append(f"| {label} | {rate:,.0f} | {rate / single:.2f}x | {cpu['redis_cores']:.2f} | "
                     f"{cpu['workers_cores']:.2f} | {cpu['poller_cores']:.2f} | {others:.2f} | {cpu['machine_cores']:.2f} |"
                     if single else f"| {label} | {rate:,.0f} | — | | | | | |")
    lines += ["", where_it_stops(results, cores), "", "Every run:", ""]
    for key, label, _ in SETUPS:
        for run in results.get(key, []):
            if "error" in run:
                lines.append(f"- {label}: error: {run['error']}")
                continue
            lines.append(f"- {label}: {run['rate']:,.0f} tasks/s (N={run['tasks']:,}, {run['seconds']:.2f} s); cores busy: "
                         f"redis {run['redis_cores']:.2f}, workers {run['workers_cores']:.2f}, poller "
                         f"{run['poller_cores']:.2f}, machine {run['machine_cores']:.2f}"
                         + ("" if run["graceful_stop"] else "; a worker did NOT stop gracefully"))
    return lines


def where_it_stops(results: Dict[str, List[Dict]], cores: int) -> str:
    """One paragraph from the medians: whether the machine was full, and who used it."""
    measured = {key: results[key] for key, _, _ in SETUPS if _median(results.get(key, []), "rate")}
    if "single" not in measured or len(measured) < 2:
        return "Where it stops: not enough setups measured to say."
    parts = []
    for key, label, _ in SETUPS:
        if key in measured:
            runs = measured[key]
            parts.append(f"{label}: machine {_median(runs, 'machine_cores'):.2f} of {cores} cores busy, "
                         f"workers {_median(runs, 'workers_cores'):.2f}, redis {_median(runs, 'redis_cores'):.2f}")
    full = all(_median(runs, "machine_cores") >= 0.9 * cores for runs in measured.values())
    workers_lead = all(_median(runs, "workers_cores") > _median(runs, "redis_cores") for runs in measured.values())
    single = _median(measured["single"], "rate")
    ratios = ", ".join(f"{label} {_median(measured[key], 'rate') / single:.2f}x" for key, label, _ in SETUPS[1:]
                       if key in measured)
    verdict = (f"Every setup kept the {cores} cores busy, so adding primaries cannot add throughput on this "
               f"machine (against 1 redis-server: {ratios}). " if full else
               f"The machine was not full in every setup (against 1 redis-server: {ratios}). ")
    verdict += ("The worker processes used most of the CPU, the redis-servers much less: it is the "
                "Python side that fills the machine, and extra redis-servers (and the replication "
                "stream to replicas) only take cores from the workers. On separate machines each "
                "primary would bring its own cores; here the machine's cores are the limit." if workers_lead else
                "The redis-servers used more CPU than the workers: Redis is the side that is short of cores.")
    return "Where it stops: " + "; ".join(parts) + ". " + verdict
