"""Benchmark delayed against keakon/delayed 1.2.0b2, rq, dramatiq, huey, Celery, arq, saq, taskiq,
go-delayed's Go worker and producer, our Go worker and Asynq; see bench/README.md.

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
from importlib.metadata import version
from pathlib import Path
from typing import Callable, Dict, List, Optional

import redis

from delayed.testing import RedisServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for interop/
import limits as rate_limits  # noqa: E402  (bench/, this script's directory)
import scale  # noqa: E402
import workflows  # noqa: E402

from interop import gocommands  # noqa: E402

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
KEAKON_VENV = BENCH / ".venv-keakon"
PEERS_VENV = BENCH / ".venv-peers"


def own_venv(name: str) -> Path:
    """A peer whose pins conflict with the others' (redis-py 5, 7 and 8 among them) has its own."""
    return BENCH / f".venv-{name}"


class SystemSpec:
    def __init__(self, name: str, label: str, python: Path, drain_guess: int,
                 venv: Optional[Path] = None, requirements: List[str] = (),
                 prepare: Optional[Callable[[], Optional[str]]] = None, one_slot: bool = False,
                 context_reps: Optional[int] = None, io_rows: bool = True) -> None:
        self.name, self.label, self.python = name, label, python
        self.drain_guess = drain_guess  # first N of the 1-process drain; adapted after each run
        self.venv, self.requirements = venv, list(requirements)
        self.prepare = prepare  # makes what the driver needs (not a venv); returns why it could not
        self.one_slot = one_slot  # runs one task at a time per process: the io rows use that slot
        # runs of each row but the io rows (default: the run's repetitions): the peers added for the
        # io rows have one of each, so make bench stays near 20 minutes
        self.context_reps = context_reps
        self.io_rows = io_rows  # False: not in the io rows (one delayed column is enough there)
        self.driver = BENCH / "drivers" / f"{name}_driver.py"
        self.version = "?"
        self.settings = self.io_settings = self.workflow_settings = "?"  # how its workers run, from its driver
        self.skipped: Optional[str] = None


CELERY = ["celery[redis]==5.7.0", "hiredis"]

SYSTEMS = [
    SystemSpec("delayed", "delayed", Path(sys.executable), 300_000),
    SystemSpec("delayed1", "delayed --batch 1", Path(sys.executable), 20_000, io_rows=False),
    # what tracking costs (every task enqueued with result_ttl) and what --log-tasks costs, beside delayed
    SystemSpec("delayed_tracked", "delayed, tracked", Path(sys.executable), 150_000, io_rows=False),
    SystemSpec("delayed_logtasks", "delayed --log-tasks", Path(sys.executable), 200_000, io_rows=False,
               context_reps=1),
    SystemSpec("keakon", "keakon/delayed", KEAKON_VENV / "bin/python", 8_000,
               KEAKON_VENV, ["delayed==1.2.0b2", "redis", "hiredis", "msgpack"], one_slot=True),
    SystemSpec("rq", "rq", PEERS_VENV / "bin/python", 600, PEERS_VENV, ["rq==3.0.0", "redis", "hiredis"],
               one_slot=True),
    SystemSpec("dramatiq", "dramatiq", PEERS_VENV / "bin/python", 2_300, PEERS_VENV, ["dramatiq[redis]==2.2.1"]),
    SystemSpec("huey", "huey", own_venv("huey") / "bin/python", 4_000, own_venv("huey"),
               ["huey==3.5.4", "redis", "hiredis"], context_reps=1),
    SystemSpec("celery", "Celery", own_venv("celery") / "bin/python", 1_100, own_venv("celery"), CELERY,
               context_reps=1),
    SystemSpec("arq", "arq", own_venv("arq") / "bin/python", 2_400, own_venv("arq"), ["arq==0.28.0", "hiredis"],
               context_reps=1),
    # saq 0.26.4 imports typing_extensions without requiring it
    SystemSpec("saq", "saq", own_venv("saq") / "bin/python", 2_400, own_venv("saq"),
               ["saq[redis]==0.26.4", "hiredis", "typing_extensions"], context_reps=1),
    SystemSpec("taskiq", "taskiq", own_venv("taskiq") / "bin/python", 2_600, own_venv("taskiq"),
               ["taskiq==0.13.0", "taskiq-redis==1.2.4", "hiredis"], context_reps=1),
    # go-delayed's worker draining GoTasks our producer enqueued, and its producer's enqueue rate
    SystemSpec("godelayed", "go-delayed (Go)", Path(sys.executable), 60_000, prepare=lambda: go_commands("goworker")),
    # our Go worker (go/delayed) on the same GoTasks, and Asynq on its own tasks: GO_GOALS
    SystemSpec("delayed_go", "delayed (Go)", Path(sys.executable), 150_000,
               prepare=lambda: go_commands("ourgoworker")),
    SystemSpec("asynq", "Asynq (Go)", Path(sys.executable), 15_000,
               prepare=lambda: go_commands("asynqworker", "asynqproducer")),
]

# The workflow section's own (bench/workflows.py): Celery's canvas on its Redis result backend
CELERY_RESULTS = SystemSpec("celery_results", "Celery", own_venv("celery") / "bin/python", 0, own_venv("celery"),
                            CELERY, context_reps=1)

# The io rows: 10 ms tasks (bench_tasks.sleep10, asleep10) drained by one process with N slots;
# (key of the runs, --task, slots, processes). io_procs100 is delayed's own: 100 processes of one
# slot each, to set one process's memory at 100 slots against.
IO_RUNS = [
    ("io_sleep10", "sleep", 10, 1),
    ("io_asleep10", "asleep", 10, 1),
    ("io_asleep100", "asleep", 100, 1),
    ("io_procs100", "sleep", None, 100),
]

# (key, label, unit, the runs it is read from, the field of each run)
METRICS = [
    ("enqueue", "enqueue, one task per call", "tasks/s", "enqueue", "rate"),
    ("enqueue_many", "enqueue_many, batches of 1,000", "tasks/s", "enqueue_many", "rate"),
    ("drain1", "drain, 1 worker process", "tasks/s", "drain1", "rate"),
    ("drain2", "drain, 2 worker processes", "tasks/s", "drain2", "rate"),
    ("mem_drain1", "memory of the 1-process drain's worker (peak RSS)", "MB", "drain1", "rss_mb"),
    ("io_sleep10", "10 ms `time.sleep` tasks, 1 process, 10 slots", "tasks/s", "io_sleep10", "rate"),
    ("io_asleep10", "10 ms `asyncio.sleep` tasks, 1 process, 10 slots", "tasks/s", "io_asleep10", "rate"),
    ("io_asleep100", "10 ms `asyncio.sleep` tasks, 1 process, 100 slots", "tasks/s", "io_asleep100", "rate"),
    ("mem_asleep100", "memory of that 1 process at 100 slots (peak RSS)", "MB", "io_asleep100", "rss_mb"),
    ("mem_procs100", "memory of 100 processes of 1 slot (peak RSS, summed)", "MB", "io_procs100", "rss_mb"),
    ("p50", "start latency p50 at 200 tasks/s", "ms", "latency", "p50_ms"),
    ("p99", "start latency p99 at 200 tasks/s", "ms", "latency", "p99_ms"),
]
METRIC = {metric[0]: metric for metric in METRICS}
IO_GOALS = {"io_sleep10": 950, "io_asleep10": 950, "io_asleep100": 8_000}
# issue 29: our Go worker's 1-process no-op drain at least this many times each of these
GO_GOALS = {"godelayed": 3, "asynq": 2}


def go_commands(*names: str) -> Optional[str]:
    """Build interop/'s Go commands; why the ones named cannot run, or None."""
    reason = gocommands.build()
    return reason or next((gocommands.unavailable[name] for name in names if name in gocommands.unavailable), None)


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


def introduce(bench: Bench, spec: SystemSpec) -> bool:
    """Ask the system's driver its version and settings; False (and spec.skipped says why) if it does not start."""
    info = bench.driver(spec, "version")
    if "version" not in info:
        spec.skipped = f"its driver does not start: {info.get('error')}"
        return False
    spec.version = info["version"]
    spec.settings, spec.io_settings = info.get("settings", "?"), info.get("io_settings", "?")
    spec.workflow_settings = info.get("workflow_settings", "?")
    return True


def spec_named(name: str) -> SystemSpec:
    return CELERY_RESULTS if name == CELERY_RESULTS.name else next(s for s in SYSTEMS if s.name == name)


def measure_workflows(bench: Bench, cfg: Dict) -> Dict:
    """The workflow section's runs, on each of its systems that can be measured (workflows.PLAN)."""
    ready = {}
    for name in workflows.PLAN:
        spec = spec_named(name)
        if not spec.skipped and (spec.version != "?" or introduce(bench, spec)):
            ready[name] = spec
        else:
            log(f"workflows: {name} not measured: {spec.skipped}")
    log("workflows: chains, a group with a callback, and plain tasks against it ...")
    begun = time.monotonic()
    results = workflows.measure(bench.driver, ready, cfg, log)
    log(f"  (workflows: {time.monotonic() - begun:.0f} s)")
    return results


def measure_limits(bench: Bench, cfg: Dict) -> Dict:
    """The rate-limit section's run (bench/limits.py), on delayed."""
    spec = spec_named("delayed")
    if spec.version == "?" and not introduce(bench, spec):
        log(f"limits: not measured: {spec.skipped}")
        return {"error": spec.skipped}
    log(f"limits: one rate limit of {rate_limits.RATE}/s across {cfg['limit_processes']} worker processes ...")
    begun = time.monotonic()
    result = rate_limits.measure(bench.driver, spec, cfg, log)
    log(f"  (limits: {time.monotonic() - begun:.0f} s)")
    return result


def workflow_section(results: Dict, cfg: Dict) -> List[str]:
    specs = [spec_named(name) for name in results]
    return workflows.report(results, {s.name: f"{s.label} {s.version}" for s in specs},
                            {s.name: s.workflow_settings for s in specs}, cfg)


def measure(bench: Bench, spec: SystemSpec, cfg: Dict, results: Dict) -> None:
    reps = min(cfg["reps"], spec.context_reps or cfg["reps"])  # the io rows have cfg["reps"]
    runs = results[spec.name] = {}

    def repeat(key: str, *args: object) -> None:
        runs[key] = []
        for _ in range(reps):
            result = bench.driver(spec, *args)
            runs[key].append(result)
            log(f"  {spec.name} {key}: {json.dumps(result)}")
            if "error" in result or "na" in result or "skipped" in result:
                break

    repeat("enqueue", "enqueue", "--seconds", cfg["seconds"])
    repeat("enqueue_many", "enqueue_many", "--seconds", cfg["seconds"], "--batch", 1000)

    def drain(key: str, tasks: int, seconds: float, min_seconds: float, *args: object, times: int = reps) -> None:
        """`times` drains of about `seconds` each: N starts at `tasks` and follows the rate found."""
        runs[key] = []
        recalibrations = 0
        while len(runs[key]) < times:
            result = bench.driver(spec, "drain", "--tasks", tasks, *args)
            log(f"  {spec.name} {key} N={tasks}: {json.dumps(result)}")
            if "rate" not in result:  # an error, n/a, or not measurable yet
                runs[key].append(result)
                break
            too_short = result["seconds"] < min_seconds
            if too_short or result["seconds"] > 2 * seconds:
                tasks = max(200, int(result["rate"] * seconds))
            if too_short and recalibrations < 2:
                recalibrations += 1  # not counted: it only sized N
                continue
            runs[key].append(result)

    for processes in (1, 2):
        one_process = median(runs.get("drain1", []), "rate")
        if processes == 2 and one_process:
            tasks = int(one_process * 1.6 * cfg["drain_seconds"])  # a guess; adapted below
        else:
            tasks = int(spec.drain_guess * cfg["drain_seconds"] / 2.5)
        memory = ["--memory"] if processes == 1 else []  # read after the last task, so it costs the rate nothing
        drain(f"drain{processes}", tasks, cfg["drain_seconds"], cfg["drain_min_seconds"], "--processes", processes,
              *memory)

    for key, task, slots, processes in IO_RUNS if spec.io_rows else []:
        if key == "io_procs100" and spec.name != "delayed":
            continue  # delayed's own, and once: its memory is what it is there for
        if spec.one_slot and slots == 100:
            runs[key] = [{"na": "one slot: the 10-slot rows measure it"}]
            continue
        # at 10 ms a task, a slot's ceiling is 100 tasks/s
        ceiling = 100 * (1 if spec.one_slot else slots or processes)
        args = ["--task", task, "--processes", processes, *(["--slots", slots] if slots else [])]
        if slots == 100 or processes == 100:
            args.append("--memory")
        drain(key, max(100, int(0.95 * ceiling * cfg["io_seconds"])), cfg["io_seconds"], 0.6 * cfg["io_seconds"],
              *args, times=1 if processes == 100 else cfg["reps"])

    runs["latency"] = []
    repeat("latency", "latency", "--tasks", cfg["latency_tasks"], "--rate", 200)


def median(runs: List[Dict], field: str) -> Optional[float]:
    values = [run[field] for run in runs if field in run]
    return statistics.median(values) if values else None


def metric_value(runs: Dict[str, List[Dict]], key: str) -> Optional[float]:
    _, _, _, source, field = METRIC[key]
    return median(runs.get(source, []), field)


def metric_note(runs: Dict[str, List[Dict]], key: str) -> str:
    """What to show when a metric has no value."""
    for run in runs.get(METRIC[key][3], []):
        if "na" in run:
            return "n/a"
        if "skipped" in run:
            return f"not measured: {run['skipped']}"
        if "error" in run:
            return "error"
    return "—"


def fmt(value: float, unit: str) -> str:
    return f"{value:,.2f}" if unit == "ms" else f"{value:,.0f}"


def ratio(value: float) -> str:
    return f"{value:.0f}x" if value >= 10 else f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def target(key: str, ours: Optional[float], keakon: Optional[float], values: Dict[str, Optional[float]],
           ours_results: Dict) -> str:
    """The goal for delayed's row and whether it was met; `values` are the other systems' on the row."""
    if key in IO_GOALS:
        if ours is None:
            return f"≥ {IO_GOALS[key]:,}/s"
        text = f"≥ {IO_GOALS[key]:,}/s: {'met' if ours >= IO_GOALS[key] else 'not met'}"
        peers = {name: value for name, value in values.items() if value is not None}
        if key != "io_asleep100" and peers:
            best = max(peers, key=peers.get)
            text += f"; ahead of every peer: {'yes' if ours > peers[best] else 'no'} (best: {best})"
        return text
    if key == "mem_asleep100":
        one, many = ours_results.get("io_asleep100", []), ours_results.get("io_procs100", [])
        if median(one, "rss_mb") is None or median(many, "rss_mb") is None:
            return ""
        return ("1 process at 100 slots ÷ 100 processes: RSS "
                f"{median(one, 'rss_mb') / median(many, 'rss_mb'):.0%}, PSS "
                f"{median(one, 'pss_mb') / median(many, 'pss_mb'):.0%}")
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
        "Versions: " + (", ".join(f"{s.label} {s.version}" for s in measured) or f"delayed {version('delayed')}")
        + ".",
        "",
    ]
    if not systems:  # --only cluster: the scale section alone follows
        return "\n".join(lines)
    lines += [
        f"Medians of {cfg['reps']} runs{fewer_runs(cfg, measured)}; in brackets the ratio system ÷ "
        "delayed (for tasks/s above 1 "
        "means faster than delayed, for latencies above 1 means slower). Redis was FLUSHALLed "
        "before every run.",
        "",
        "| metric | " + " | ".join(f"{s.label} {s.version}" if not s.skipped else s.label for s in systems)
        + " | target (delayed) |",
        "|---|" + "---:|" * len(systems) + "---|",
    ]
    ours_runs = results["delayed"]
    for key, label, unit, source, _ in METRICS:
        if not any(source in results.get(s.name, {}) for s in systems):
            continue  # io_procs100 with --only, say
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
            if spec.one_slot and source.startswith("io_") and value is not None:
                cells[-1] += ", 1 slot"
        keakon = metric_value(results["keakon"], key) if "keakon" in results else None
        peers = {s.label: metric_value(results[s.name], key) for s in measured
                 if not s.name.startswith("delayed")}
        lines.append(f"| {label} ({unit}) | " + " | ".join(cells)
                     + f" | {target(key, ours, keakon, peers, ours_runs)} |")

    lines += ["", "What each of our modes guarantees: both run every task at least once and lose none "
              "when a worker is SIGKILLed at any Redis round trip (tests/test_kill_points.py). `delayed` "
              "(the default, `--batch 32`) claims up to 32 tasks per round trip, so a killed worker may "
              "leave up to 32 finished-but-unreleased tasks to run again; `delayed --batch 1` claims one "
              "at a time, as go-delayed and keakon/delayed do, and leaves at most one. go-delayed's worker "
              "claims one at a time too but never releases its last task, which runs again whenever that "
              "worker goes away, gracefully or not. Our Go worker (`delayed (Go)`) claims as `delayed` does, "
              "up to 32 tasks per round trip, runs them one at a time by default, and releases each "
              "finished one in its next round trip."]
    lines += ["", "The io rows: 10 ms tasks, `bench_tasks.sleep10` (`time.sleep(0.01)`) and `asleep10` "
              "(`await asyncio.sleep(0.01)`), stand in for a task waiting on the network; N slots make "
              "a ceiling of 100 N tasks/s. rq and keakon/delayed have one slot per process and are "
              "measured with it (\", 1 slot\"). Memory: the sum over the worker's processes (a "
              "supervisor's children included) of each one's peak RSS (VmHWM), read when the last task "
              "has run; the runs below give PSS too, where pages shared after fork count once. huey keeps "
              "no record of a running task and Celery acks one as it starts, so their count reaches 0 "
              "when the last task starts: their drains end 10 ms after that.",
              "", "How each system's workers ran (its defaults unless said):", "",
              "| system | no-op rows and latency | io rows, N slots |", "|---|---|---|"]
    for spec in measured:
        lines.append(f"| {spec.label} | {cell(spec.settings)} | {cell(spec.io_settings)} |")

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
              "RPUSHes time.time() − that at entry. Workers: see the settings above; go-delayed's "
              "`interop/bin/goworker` is one process per worker (its `NewWorker(...).Run()`), stopped "
              "with SIGHUP, draining `GoTask(\"main.Noop\")` that our `enqueue_many` queued and timed on "
              "the queue's length alone (it never releases its last task); its latency tasks are "
              "`GoTask(\"main.Elapsed\", ...)` from our `enqueue`, and its enqueue row is go-delayed's own "
              "producer in Go, `Queue.Enqueue(NewGoTask(\"main.Noop\"))` in a loop (interop/bin/goproducer "
              "-rate). Asynq's tasks are all enqueued by `interop/bin/asynqproducer`, `asynq.Client.Enqueue` "
              "in Go (Asynq has no Python client): 16 goroutines prefill the drain, its enqueue row is one "
              "loop, and its latency tasks are enqueued by one asynqproducer reading each task's "
              "time.time() from a line of its stdin; its remaining count is its pending and active lists. "
              "The drain's memory (1 process): the worker's peak RSS (VmHWM, summed over its processes) "
              "read when the last task has run. The io rows' N tasks, 10 ms each, are sized to last about "
              f"{cfg['io_seconds']} s at the ceiling. delayed's 100 processes (`--concurrency 100`) "
              "run once, for their memory. See bench/README.md.", ""]
    lines += go_workers(systems, results)
    return "\n".join(lines)


def go_workers(systems: List[SystemSpec], results: Dict) -> List[str]:
    """The Go workers' section: the no-op drain and memory of each, and whether ours met GO_GOALS."""
    go = [s for s in systems if s.name in ("delayed_go", *GO_GOALS) and not s.skipped]
    if not any(s.name == "delayed_go" for s in go):
        return []
    lines = ["## Go workers: issue 29's targets", "",
             "The no-op drain, one worker process each at its defaults (see the settings above; medians of "
             "the runs above): our Go worker (`delayed (Go)`) against go-delayed's and Asynq's. The targets: "
             + " and ".join(f"≥ {times}x {label(name)}" for name, times in GO_GOALS.items()) + ".", "",
             "| worker | drain, 1 process (tasks/s) | drain, 2 processes (tasks/s) | peak RSS of the 1-process "
             "drain's worker (MB) |", "|---|---:|---:|---:|"]
    for spec in go:
        lines.append(f"| {spec.label} | " + " | ".join(
            fmt(value, "") if value is not None else metric_note(results[spec.name], key)
            for key in ("drain1", "drain2", "mem_drain1")
            for value in [metric_value(results[spec.name], key)]) + " |")
    ours = metric_value(results["delayed_go"], "drain1")
    lines.append("")
    for name, times in GO_GOALS.items():
        theirs = metric_value(results[name], "drain1") if name in results else None
        if ours is None or theirs is None:
            lines.append(f"- ≥ {times}x {label(name)}: not measured")
        else:
            met = "met" if ours >= times * theirs else "not met"
            lines.append(f"- ≥ {times}x {label(name)}: {ours / theirs:.1f}x, {met}")
    return lines + [""]


def label(name: str) -> str:
    return next(s.label for s in SYSTEMS if s.name == name)


def cell(text: str) -> str:
    """Text for a markdown table's cell: a | would end the cell, even inside backticks."""
    return text.replace("|", "\\|")


def fewer_runs(cfg: Dict, measured: List[SystemSpec]) -> str:
    fewer = [s.label for s in measured if s.context_reps and s.context_reps < cfg["reps"]]
    if not fewer:
        return ""
    names = ", ".join(fewer[:-1]) + (" and " if len(fewer) > 1 else "") + fewer[-1]
    return (f" ({names}: one run of each row but the io rows, to keep `make bench` near 20 minutes; "
            "their every run is listed below)")


def describe(run: Dict) -> str:
    if "error" in run:
        return f"error: {run['error']}"
    if "na" in run:
        return f"n/a ({run['na']})"
    if "skipped" in run:
        return f"not measured: {run['skipped']}"
    if "p50_ms" in run:
        text = f"{run['p50_ms']:.2f}/{run['p99_ms']:.2f} ms (max {run['max_ms']:.1f})"
    else:
        text = f"{run['rate']:,.0f} (N={run['tasks']:,}, {run['seconds']:.1f} s)"
    if "rss_mb" in run:
        text += (f" RSS {run['rss_mb']:,.0f} MB, PSS {run['pss_mb']:,.0f} MB in "
                 f"{run['processes_seen']} processes")
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


def kill_leftovers(run_id: str) -> None:
    for pid in leftover_processes(run_id):
        log(f"killing left-over process {pid}")
        os.kill(pid, signal.SIGKILL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 repetition, smaller N; a smoke test")
    parser.add_argument("--output", type=Path,
                        help="markdown report (default: BENCHMARKS.md, none with --quick)")
    parser.add_argument("--only", nargs="+", choices=[s.name for s in SYSTEMS] + ["cluster", "workflows", "limits"],
                        help="measure only these systems (delayed is always measured), and the cluster scale "
                             "row only if `cluster` is named, the workflow section only if `workflows` is, the "
                             "rate-limit section only if `limits` is; `--only cluster`, `--only workflows` or "
                             "`--only limits` alone: just that section")
    args = parser.parse_args()
    output = args.output or (None if args.quick else ROOT / "BENCHMARKS.md")
    cfg = {"quick": args.quick, "reps": 1 if args.quick else 3, "seconds": 0.5 if args.quick else 2.0,
           "drain_seconds": 0.8 if args.quick else 2.5, "drain_min_seconds": 0.4 if args.quick else 2.0,
           "io_seconds": 0.8 if args.quick else 1.0, "latency_tasks": 400 if args.quick else 2000,
           "scale_seconds": 1.0 if args.quick else 2.0, "scale_guess": 5_000 if args.quick else 30_000,
           "group_members": 2_000 if args.quick else 10_000,
           "limit_seconds": 10 if args.quick else 60, "limit_processes": 10}
    started = time.monotonic()
    named = set(args.only or []) - {"cluster", "workflows", "limits"}
    systems = [s for s in SYSTEMS if not args.only or s.name in named or (s.name == "delayed" and named)]
    run_scale = not args.only or "cluster" in args.only
    run_workflows = not args.only or "workflows" in args.only
    run_limits = not args.only or "limits" in args.only
    extra = [spec_named(name) for name in workflows.PLAN if run_workflows and spec_named(name) not in systems]
    for spec in systems + extra:
        if spec.venv:
            spec.skipped = ensure_venv(spec)
        elif spec.prepare:
            spec.skipped = spec.prepare()
        if spec.skipped:
            log(f"{spec.label} not measured: {spec.skipped}")

    run_id = uuid.uuid4().hex
    results: Dict[str, Dict] = {}
    limits: Dict = {}
    scale_results = workflow_results = limit_result = None
    with tempfile.TemporaryDirectory(prefix="delayed-bench-") as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            bench = Bench(server.url, Path(tmp), run_id)
            if systems:  # the physical limit, beside the main table
                log(f"redis-server on port {server.port}; redis-benchmark ...")
                limits = redis_benchmark(server.port)
            for spec in systems:
                if spec.skipped or not introduce(bench, spec):
                    continue
                log(f"{spec.label} {spec.version}:")
                begun = time.monotonic()
                measure(bench, spec, cfg, results)
                log(f"  ({spec.label}: {time.monotonic() - begun:.0f} s)")
            if run_workflows:
                workflow_results = measure_workflows(bench, cfg)
            if run_limits:
                limit_result = measure_limits(bench, cfg)
        finally:
            kill_leftovers(run_id)
            server.stop()
    if run_scale:  # after the rest, on servers of its own: the bench's redis-server is stopped by then
        log("scale: 6 queues, 6 workers, on 1 redis-server and on a cluster of 3 primaries, "
            "without and with replicas ...")
        begun = time.monotonic()
        try:
            scale_results = scale.measure(cfg, log, run_id)
        finally:
            kill_leftovers(run_id)
        log(f"  (scale: {time.monotonic() - begun:.0f} s)")
    text = report(cfg, systems, results, limits, machine_facts(), time.monotonic() - started)
    if workflow_results is not None:
        text += "\n".join(workflow_section(workflow_results, cfg))
    if limit_result is not None:
        text += "\n".join(rate_limits.report(limit_result, f"delayed {spec_named('delayed').version}", cfg)) + "\n"
    if scale_results is not None:
        text += "\n".join(scale.report(scale_results, cfg)) + "\n"
    print(text)
    if output:
        output.write_text(text)
        log(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
