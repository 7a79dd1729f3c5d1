"""Benchmark delayed against keakon/delayed 1.2.0b2, rq, dramatiq and go-delayed's Go worker and
producer; see bench/README.md.

Run from the repository root with the project's virtualenv:
    .venv/bin/python bench/run.py [--quick] [--output PATH]
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, List, Optional

import redis

from delayed.testing import RedisServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for interop/
from interop import gocommands  # noqa: E402

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
KEAKON_VENV = BENCH / ".venv-keakon"
PEERS_VENV = BENCH / ".venv-peers"


class SystemSpec:
    def __init__(self, name: str, label: str, python: Path, drain_guess: int,
                 venv: Optional[Path] = None, requirements: List[str] = (),
                 prepare: Optional[Callable[[], Optional[str]]] = None) -> None:
        self.name, self.label, self.python = name, label, python
        self.drain_guess = drain_guess  # first N of the 1-process drain; adapted after each run
        self.venv, self.requirements = venv, list(requirements)
        self.prepare = prepare  # makes what the driver needs (not a venv); returns why it could not
        self.driver = BENCH / "drivers" / f"{name}_driver.py"
        self.version = "?"
        self.skipped: Optional[str] = None


SYSTEMS = [
    SystemSpec("delayed", "delayed", Path(sys.executable), 300_000),
    SystemSpec("delayed1", "delayed --batch 1", Path(sys.executable), 20_000),
    SystemSpec("keakon", "keakon/delayed", KEAKON_VENV / "bin/python", 8_000,
               KEAKON_VENV, ["delayed==1.2.0b2", "redis", "hiredis", "msgpack"]),
    SystemSpec("rq", "rq", PEERS_VENV / "bin/python", 600, PEERS_VENV, ["rq==3.0.0", "redis", "hiredis"]),
    SystemSpec("dramatiq", "dramatiq", PEERS_VENV / "bin/python", 700, PEERS_VENV, ["dramatiq[redis]==2.2.1"]),
    # go-delayed's worker draining GoTasks our producer enqueued, and its producer's enqueue rate
    SystemSpec("godelayed", "go-delayed (Go)", Path(sys.executable), 60_000, prepare=gocommands.build),
]

# (key, label, unit, higher is better)
METRICS = [
    ("enqueue", "enqueue, one task per call", "tasks/s", True),
    ("enqueue_many", "enqueue_many, batches of 1,000", "tasks/s", True),
    ("drain1", "drain, 1 worker process", "tasks/s", True),
    ("drain2", "drain, 2 worker processes", "tasks/s", True),
    ("p50", "start latency p50 at 200 tasks/s", "ms", False),
    ("p99", "start latency p99 at 200 tasks/s", "ms", False),
]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ensure_venv(spec: SystemSpec) -> Optional[str]:
    """Create spec.venv and install its requirements once; the reason it failed, or None."""
    marker = spec.venv / ".bench-installed"
    installed = set(marker.read_text().split()) if marker.exists() else set()
    missing = [req for req in spec.requirements if req not in installed]
    if not missing:
        return None
    log(f"installing {' '.join(missing)} into {spec.venv.relative_to(ROOT)} ...")
    steps = [] if (spec.venv / "bin/python").exists() else [["python3", "-m", "venv", str(spec.venv)]]
    steps.append([str(spec.venv / "bin/pip"), "install", "-q", "--disable-pip-version-check", *missing])
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode:
            return f"`{' '.join(step[:3])} ...` failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    marker.write_text("\n".join(sorted(installed | set(missing))) + "\n")
    return None


class Bench:
    def __init__(self, url: str, workdir: Path, run_id: str) -> None:
        self.url = url
        self.conn = redis.Redis.from_url(url)
        self.workdir = workdir
        self.run_id = run_id

    def driver(self, spec: SystemSpec, *args: object, timeout: float = 180) -> Dict:
        """FLUSHALL, then one driver run in the system's own interpreter; its JSON result."""
        self.conn.flushall()
        env = dict(os.environ, BENCH_RUN_ID=self.run_id,
                   BENCH_WORKER_LOG=str(self.workdir / f"{spec.name}-workers.log"))
        argv = [str(spec.python), str(spec.driver), "--url", self.url, *map(str, args)]
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()  # the driver stops its workers on SIGTERM
            out, err = proc.communicate()
            return {"error": f"driver timed out after {timeout:.0f} s"}
        lines = out.strip().splitlines()
        try:
            return json.loads(lines[-1])
        except (IndexError, ValueError):
            tail = (err.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            return {"error": tail}


def redis_benchmark(port: int) -> Dict[str, Dict[str, float]]:
    """Requests/s of redis-benchmark, one client, unpipelined and with -P 100."""
    results: Dict[str, Dict[str, float]] = {}
    for mode, extra in (("plain", []), ("pipelined", ["-P", "100"])):
        out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", "1", "-n", "50000", "-q",
                              "-t", "ping,rpush,lpop", *extra], capture_output=True, text=True).stdout
        for name, rate in re.findall(r"([A-Z_]+): ([\d.]+) requests per second", out.replace("\r", "\n")):
            results.setdefault(name, {})[mode] = float(rate)
    return results


def measure(bench: Bench, spec: SystemSpec, cfg: Dict, results: Dict) -> None:
    reps = cfg["reps"]
    runs = results[spec.name] = {}

    def repeat(key: str, *args: object) -> None:
        runs[key] = []
        for _ in range(reps):
            result = bench.driver(spec, *args)
            runs[key].append(result)
            log(f"  {spec.name} {key}: {json.dumps(result)}")
            if "error" in result or "na" in result:
                break

    repeat("enqueue", "enqueue", "--seconds", cfg["seconds"])
    repeat("enqueue_many", "enqueue_many", "--seconds", cfg["seconds"], "--batch", 1000)

    for processes in (1, 2):
        key = f"drain{processes}"
        runs[key] = []
        one_process = median(runs.get("drain1", []), "rate")
        if processes == 2 and one_process:
            tasks = int(one_process * 1.6 * cfg["drain_seconds"])  # a guess; adapted below
        else:
            tasks = int(spec.drain_guess * cfg["drain_seconds"] / 2.5)
        recalibrations = 0
        while len(runs[key]) < reps:
            result = bench.driver(spec, "drain", "--tasks", tasks, "--processes", processes)
            log(f"  {spec.name} {key} N={tasks}: {json.dumps(result)}")
            if "error" in result:
                runs[key].append(result)
                break
            too_short = result["seconds"] < cfg["drain_min_seconds"]
            if too_short or result["seconds"] > 2 * cfg["drain_seconds"]:
                tasks = max(200, int(result["rate"] * cfg["drain_seconds"]))
            if too_short and recalibrations < 2:
                recalibrations += 1  # not counted: it only sized N
                continue
            runs[key].append(result)

    runs["latency"] = []
    repeat("latency", "latency", "--tasks", cfg["latency_tasks"], "--rate", 200)


def median(runs: List[Dict], field: str) -> Optional[float]:
    values = [run[field] for run in runs if field in run]
    return statistics.median(values) if values else None


def metric_value(runs: Dict[str, List[Dict]], key: str) -> Optional[float]:
    if key in ("p50", "p99"):
        return median(runs["latency"], f"{key}_ms")
    return median(runs[key], "rate")


def metric_note(runs: Dict[str, List[Dict]], key: str) -> str:
    """What to show when a metric has no value."""
    source = runs["latency" if key in ("p50", "p99") else key]
    for run in source:
        if "na" in run:
            return "n/a"
        if "error" in run:
            return "error"
    return "—"


def fmt(value: float, unit: str) -> str:
    return f"{value:,.2f}" if unit == "ms" else f"{value:,.0f}"


def ratio(value: float) -> str:
    return f"{value:.0f}x" if value >= 10 else f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def target(key: str, ours: Optional[float], keakon: Optional[float]) -> str:
    if key == "enqueue_many":
        return "—" if ours is None else f"≥ 100,000/s: {'met' if ours >= 100_000 else 'not met'}"
    goals = {"enqueue": 3, "drain1": 10}
    if key in goals:
        if not ours or not keakon:
            return "—"
        ratio = ours / keakon
        return f"≥ {goals[key]}x keakon: {ratio:.1f}x, {'met' if ratio >= goals[key] else 'not met'}"
    if key in ("p50", "p99"):
        if ours is None or keakon is None:
            return "—"
        return f"≤ keakon: {'met' if ours <= keakon else 'not met'}"
    return ""


def report(cfg: Dict, systems: List[SystemSpec], results: Dict, limits: Dict, facts: Dict,
           wall: float) -> str:
    measured = [s for s in systems if not s.skipped]
    lines = [
        "# Benchmarks",
        "",
        f"Made by `{facts['command']}` on {facts['date']}"
        + (" with `--quick`: 1 repetition, smaller N, indicative only." if cfg["quick"] else "."),
        f"Took {wall:.0f} s. Machine: `nproc` = {facts['nproc']} ({facts['cpu']}), {facts['os']}; "
        f"Python {facts['python']}; {facts['redis']}.",
        "Versions: " + ", ".join(f"{s.label} {s.version}" for s in measured) + ".",
        "",
        f"Medians of {cfg['reps']} runs; in brackets the ratio system ÷ delayed (for tasks/s above 1 "
        "means faster than delayed, for latencies above 1 means slower). Redis was FLUSHALLed "
        "before every run.",
        "",
        "| metric | " + " | ".join(f"{s.label} {s.version}" if not s.skipped else s.label for s in systems)
        + " | target (delayed) |",
        "|---|" + "---:|" * len(systems) + "---|",
    ]
    ours_runs = results["delayed"]
    for key, label, unit, _ in METRICS:
        ours = metric_value(ours_runs, key)
        cells = []
        for spec in systems:
            if spec.skipped:  # the first row says why, once
                cells.append(f"not measured: {spec.skipped}" if key == METRICS[0][0] else "—")
                continue
            value = metric_value(results[spec.name], key)
            if value is None:
                cells.append(metric_note(results[spec.name], key))
            elif spec.name == "delayed" or not ours:
                cells.append(fmt(value, unit))
            else:
                cells.append(f"{fmt(value, unit)} ({ratio(value / ours)})")
        keakon = metric_value(results["keakon"], key) if "keakon" in results else None
        lines.append(f"| {label} ({unit}) | " + " | ".join(cells) + f" | {target(key, ours, keakon)} |")

    lines += ["", "What each of our modes guarantees: both run every task at least once and lose none "
              "when a worker is SIGKILLed at any Redis round trip (tests/test_kill_points.py). `delayed` "
              "(the default, `--batch 32`) claims up to 32 tasks per round trip, so a killed worker may "
              "leave up to 32 finished-but-unreleased tasks to run again; `delayed --batch 1` claims one "
              "at a time, as go-delayed and keakon/delayed do, and leaves at most one. go-delayed's worker "
              "claims one at a time too but never releases its last task, which runs again whenever that "
              "worker goes away, gracefully or not."]
    lines += ["", "Physical limit: `redis-benchmark -c 1 -n 50000 -q -t ping,rpush,lpop` on the same "
              "redis-server, one client (requests/s):", "",
              "| command | one at a time | pipelined, `-P 100` |", "|---|---:|---:|"]
    for name, modes in limits.items():
        lines.append(f"| {name} | {modes.get('plain', 0):,.0f} | {modes.get('pipelined', 0):,.0f} |")

    lines += ["", "Every run (rate in tasks/s or p50/p99 in ms; N = tasks; failed = tasks the system "
              "recorded as failed or dead-lettered; stop = workers stopped gracefully on their stop "
              "signal):", "", "| system | measurement | runs |", "|---|---|---|"]
    for spec in measured:
        for key, runs in results[spec.name].items():
            lines.append(f"| {spec.label} | {key} | " + "; ".join(describe(run) for run in runs) + " |")

    lines += ["", "Method: one producer process in a Python loop; enqueue and enqueue_many run for "
              f"{cfg['seconds']} s each. Drain: N no-op tasks are queued first, then the workers start; "
              "the remaining count (waiting + held) is polled every 2 ms, t0 = the first moment it is "
              "below N (start-up excluded), t1 = when it is 0, rate = remaining at t0 / (t1 − t0); N is "
              f"sized so a run lasts about {cfg['drain_seconds']} s. Latency: one idle worker, "
              f"{cfg['latency_tasks']} tasks at 200/s, each carrying time.time() at enqueue; the task "
              "RPUSHes time.time() − that at entry. Workers: delayed `python -m delayed.worker "
              "[--concurrency 2] [--batch 1]`; keakon `Worker(queue).run()` per process; rq `rq worker "
              "--worker-class rq.worker.SimpleWorker --quiet` per process; dramatiq `dramatiq "
              "--processes 1|2 --threads 1`; go-delayed `interop/bin/goworker` per process (its "
              "`NewWorker(...).Run()`), stopped with SIGHUP, draining `GoTask(\"main.Noop\")` that our "
              "`enqueue_many` queued and timed on the queue's length alone (it never releases its last "
              "task); its latency tasks are `GoTask(\"main.Elapsed\", ...)` from our `enqueue`, and its "
              "enqueue row is go-delayed's own producer in Go, `Queue.Enqueue(NewGoTask(\"main.Noop\"))` "
              "in a loop (interop/bin/goproducer -rate). See bench/README.md.", ""]
    return "\n".join(lines)


def describe(run: Dict) -> str:
    if "error" in run:
        return f"error: {run['error']}"
    if "na" in run:
        return f"n/a ({run['na']})"
    if "p50_ms" in run:
        text = f"{run['p50_ms']:.2f}/{run['p99_ms']:.2f} ms (max {run['max_ms']:.1f})"
    else:
        text = f"{run['rate']:,.0f} (N={run['tasks']:,}, {run['seconds']:.1f} s)"
    if run.get("failed"):
        text += f" failed={run['failed']}"
    if run.get("graceful_stop") is False:
        text += " stop=NOT graceful"
    return text


def machine_facts() -> Dict[str, str]:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    command = os.environ.get("BENCH_COMMAND") or " ".join(["python", *sys.argv])  # `make bench` names itself
    return {
        "command": command,
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "nproc": subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip(),
        "cpu": cpu,
        "os": platform.platform(),
        "python": platform.python_version(),
        "redis": " ".join(subprocess.run(["redis-server", "--version"], capture_output=True,
                                         text=True).stdout.split()[:3]),
    }


def leftover_processes(run_id: str) -> List[int]:
    """Processes still carrying this run's BENCH_RUN_ID (workers that outlived their driver)."""
    pids = []
    needle = f"BENCH_RUN_ID={run_id}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 repetition, smaller N; a smoke test")
    parser.add_argument("--output", type=Path,
                        help="markdown report (default: BENCHMARKS.md, none with --quick)")
    parser.add_argument("--only", nargs="+", choices=[s.name for s in SYSTEMS],
                        help="measure only these systems (delayed is always measured)")
    args = parser.parse_args()
    output = args.output or (None if args.quick else ROOT / "BENCHMARKS.md")
    cfg = {"quick": args.quick, "reps": 1 if args.quick else 3, "seconds": 0.5 if args.quick else 2.0,
           "drain_seconds": 0.8 if args.quick else 2.5, "drain_min_seconds": 0.4 if args.quick else 2.0,
           "latency_tasks": 400 if args.quick else 2000}
    started = time.monotonic()
    systems = [s for s in SYSTEMS if not args.only or s.name in args.only or s.name == "delayed"]
    for spec in systems:
        if spec.venv:
            spec.skipped = ensure_venv(spec)
        elif spec.prepare:
            spec.skipped = spec.prepare()
        if spec.skipped:
            log(f"{spec.label} not measured: {spec.skipped}")

    run_id = uuid.uuid4().hex
    results: Dict[str, Dict] = {}
    with tempfile.TemporaryDirectory(prefix="delayed-bench-") as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            bench = Bench(server.url, Path(tmp), run_id)
            log(f"redis-server on port {server.port}; redis-benchmark ...")
            limits = redis_benchmark(server.port)
            for spec in systems:
                if spec.skipped:
                    continue
                info = bench.driver(spec, "version")
                if "version" not in info:
                    spec.skipped = f"its driver does not start: {info.get('error')}"
                    continue
                spec.version = info["version"]
                log(f"{spec.label} {spec.version}:")
                measure(bench, spec, cfg, results)
        finally:
            for pid in leftover_processes(run_id):
                log(f"killing left-over process {pid}")
                os.kill(pid, signal.SIGKILL)
            server.stop()
    text = report(cfg, systems, results, limits, machine_facts(), time.monotonic() - started)
    print(text)
    if output:
        output.write_text(text)
        log(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
