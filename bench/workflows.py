"""The workflow section of the bench (issue 30): delayed's chains and groups against Celery's canvas,
and what a task in a group costs next to a plain task; measured in the bench's run, on its
redis-server, one worker process each at its defaults (bench/README.md says how).

- chains: N chains of 3 no-op steps (bench_tasks.step, step, flow_end), each step given the result
  of the one before it, enqueued one call per chain by one producer while one worker process runs
  them; from the first enqueue until the last chain's last step ran (flow_end writes when); N is
  sized so a run lasts about cfg["drain_seconds"].
- group: a group of cfg["group_members"] (10,000) no-op members and a callback given their results
  (Celery: a chord), enqueued in one call to one idle worker process; from the call until the
  callback ran.
- batch (delayed): as many plain no-op tasks in one `enqueue_many` call, tracked and untracked, to
  one idle worker process, until the last one ended: what a grouped task's cost is set against.
"""
import statistics
from typing import Callable, Dict, List, Optional

# What each system of this section measures (bench/drivers/<name>_driver.py), in the order they run:
# delayed_tracked is delayed with every plain task tracked; celery is the bench's Celery, without a
# result backend (a chain needs none), celery_results Celery with its Redis result backend (a chord
# needs one, and a chain's result is read from it)
PLAN = {
    "delayed": ("chains", "group", "batch"),
    "delayed_tracked": ("batch",),
    "celery": ("chains",),
    "celery_results": ("chains", "group"),
}
COLUMNS = ("delayed", "celery_results", "celery")
NOTES = {"celery_results": "Redis result backend", "celery": "no result backend"}  # after their label
CHAINS_GUESS = {"delayed": 1_400, "celery_results": 120, "celery": 150}  # chains/s, to size the first run
# issue 30's targets: delayed's chain rate and group time at least this many times Celery's ...
CELERY_TIMES = 5
# ... and a task in a group costs at most this many times a plain task (delayed_tracked's: see report)
GROUPED_PER_PLAIN = 1.5

Driver = Callable[..., Dict]  # Bench.driver: (spec, *args) -> the driver's JSON result


def measure(driver: Driver, specs: Dict[str, object], cfg: Dict, log: Callable[[str], None]) -> Dict:
    """Every run of this section: {system: {measurement: [runs]}}, for the systems of `specs` (by
    name; those not measurable are left out by the caller)."""
    results: Dict[str, Dict[str, List[Dict]]] = {}
    for name, spec in specs.items():
        runs = results[name] = {}
        # every system's chains are run cfg["reps"] times (a few seconds each: the target's ratio is of
        # medians); Celery's chord, up to a minute, as often as its other rows (once)
        reps = min(cfg["reps"], getattr(spec, "context_reps", None) or cfg["reps"])
        for measurement in PLAN[name]:
            if measurement == "chains":
                runs["chains"] = _chains(driver, spec, name, cfg["reps"], cfg, log)
                continue
            runs[measurement] = []
            for _ in range(reps):
                result = driver(spec, measurement, "--tasks", cfg["group_members"])
                log(f"  {name} {measurement} N={cfg['group_members']:,}: {result}")
                runs[measurement].append(result)
                if "seconds" not in result:
                    break
    return results


def _chains(driver: Driver, spec: object, name: str, reps: int, cfg: Dict, log: Callable[[str], None]) -> List[Dict]:
    """`reps` chain runs of about cfg["drain_seconds"]: N starts from CHAINS_GUESS, follows the rate found."""
    chains = max(20, int(CHAINS_GUESS[name] * cfg["drain_seconds"]))
    runs: List[Dict] = []
    recalibrations = 0
    while len(runs) < reps:
        result = driver(spec, "chains", "--tasks", chains)
        log(f"  {name} chains N={chains:,}: {result}")
        if "rate" not in result:
            runs.append(result)
            break
        too_short = result["seconds"] < cfg["drain_min_seconds"]
        if too_short or result["seconds"] > 2 * cfg["drain_seconds"]:
            chains = max(20, int(result["rate"] * cfg["drain_seconds"]))
        if too_short and recalibrations < 2:
            recalibrations += 1  # not counted: it only sized N
            continue
        runs.append(result)
    return runs


def _median(results: Dict, name: str, measurement: str, field: str) -> Optional[float]:
    values = [run[field] for run in results.get(name, {}).get(measurement, []) if field in run]
    return statistics.median(values) if values else None


def _missing(results: Dict, name: str, measurement: str) -> str:
    """A cell without a value: why."""
    if name not in results:
        return "not measured"
    if measurement not in PLAN[name]:
        return "n/a: a chord needs a result backend" if measurement == "group" else "n/a"
    for run in results[name].get(measurement, []):
        if "error" in run:
            return f"error: {run['error']}"
    return "—"


def _ratio(value: float) -> str:
    return f"{value:.0f}x" if value >= 10 else f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def report(results: Dict, labels: Dict[str, str], settings: Dict[str, str], cfg: Dict) -> List[str]:
    """The report's section: the rows against Celery and their targets, the per-task costs and theirs,
    how each system ran, every run."""
    members = cfg["group_members"]
    labels = {name: f"{label}, {NOTES[name]}" if name in NOTES else label for name, label in labels.items()}
    columns = [name for name in COLUMNS if name in labels]
    lines = ["", "## Workflows: issue 30's targets", "",
             "One worker process each, at its defaults, on the bench's redis-server (FLUSHALLed before each run); "
             f"medians of {cfg['reps']} runs (Celery's chord: one run); in brackets the ratio system ÷ delayed. "
             "Chains: N chains of 3 no-op steps, each step given the result of the one before it, enqueued one "
             "call per chain by one producer while the worker runs them, timed from the first enqueue until the "
             "last chain's last step ran (N sized for about "
             f"{cfg['drain_seconds']} s). Group: {members:,} no-op members and a callback given their results "
             "(Celery: a chord), enqueued in one call to an idle worker, timed from the call until the callback ran.",
             "", "| row | " + " | ".join(labels[name] for name in columns) + " | target (delayed) |",
             "|---|" + "---:|" * len(columns) + "---|"]
    rows = (("chains", "rate", "3-step chains (chains/s)"), ("chains", "steps_rate", "their steps (steps/s)"),
            ("group", "seconds", f"{members:,}-member group, enqueue to callback (s)"))
    for measurement, field, label in rows:
        ours = _median(results, "delayed", measurement, field)
        cells = []
        for name in columns:
            value = _median(results, name, measurement, field)
            if value is None:
                cells.append(_missing(results, name, measurement))
            else:
                text = f"{value:,.2f}" if field == "seconds" else f"{value:,.0f}"
                cells.append(text if name == "delayed" or not ours else f"{text} ({_ratio(value / ours)})")
        target = "" if field == "steps_rate" else _celery_target(results, measurement, field, labels)
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {target} |")
    lines += [""] + _per_task(results, members) + ["", "How each ran:", "", "| system | workflows |", "|---|---|"]
    for name in labels:
        lines.append(f"| {labels[name]} | {settings[name].replace('|', chr(92) + '|')} |")
    lines += ["", "Every run:", ""]
    for name, runs in results.items():
        for measurement, measured in runs.items():
            lines.append(f"- {labels[name]}, {measurement}: " + "; ".join(_describe(run) for run in measured))
    return lines + [""]


def _celery_target(results: Dict, measurement: str, field: str, labels: Dict[str, str]) -> str:
    """≥ CELERY_TIMES x Celery, against the faster of Celery's columns on the row: met or not."""
    goal = f"≥ {CELERY_TIMES}x Celery"
    ours = _median(results, "delayed", measurement, field)
    theirs = {name: _median(results, name, measurement, field) for name in ("celery_results", "celery")}
    theirs = {name: value for name, value in theirs.items() if value is not None}
    if ours is None or not theirs:
        return f"{goal}: not measured"
    if field == "seconds":  # a time: Celery's ÷ ours
        best = min(theirs, key=theirs.get)
        times = theirs[best] / ours
    else:  # a rate: ours ÷ Celery's
        best = max(theirs, key=theirs.get)
        times = ours / theirs[best]
    against = f" (against {labels[best]}, the faster)" if len(theirs) > 1 else ""
    return f"{goal}: {times:.1f}x{against}, {'met' if times >= CELERY_TIMES else 'not met'}"


def _per_task(results: Dict, members: int) -> List[str]:
    """The per-task costs, a grouped task's against each plain one, and the target."""
    grouped = _median(results, "delayed", "group", "per_task_us")
    plain = {"delayed_tracked": ("plain, tracked: `enqueue_many(tasks, result_ttl=3600)`", "tracked"),
             "delayed": ("plain, untracked: `enqueue_many(tasks)`", "untracked")}
    lines = [f"Per-task cost (delayed): {members:,} no-op tasks enqueued by one call to an idle worker process, "
             "from the call until the last one ended (the group: until its callback ran), divided by "
             f"{members:,}; each task its own record (tracked) or not.", "",
             "| tasks | µs per task | a grouped task ÷ this |", "|---|---:|---:|",
             "| in a group with a callback: `enqueue(group(tasks, callback=...), result_ttl=3600)` | "
             + (f"{grouped:,.1f} | — |" if grouped is not None else f"{_missing(results, 'delayed', 'group')} | |")]
    ratios = {}
    for name, (label, _) in plain.items():
        cost = _median(results, name, "batch", "per_task_us")
        if cost is None:
            lines.append(f"| {label} | {_missing(results, name, 'batch')} | |")
            continue
        if grouped is not None:
            ratios[name] = grouped / cost
        lines.append(f"| {label} | {cost:,.1f} | " + (f"{ratios[name]:.2f}x |" if name in ratios else "|"))
    goal = f"Target: a grouped task within {GROUPED_PER_PLAIN}x a plain task's cost."
    if "delayed_tracked" not in ratios:
        return lines + ["", f"{goal} Not measured."]
    verdict = (f"{goal} Against a plain tracked task (like for like: each step of a workflow is a tracked task, "
               f"whose record holds its status and result): {ratios['delayed_tracked']:.2f}x, "
               f"{'met' if ratios['delayed_tracked'] <= GROUPED_PER_PLAIN else 'not met'}.")
    if "delayed" in ratios:
        verdict += (f" Against a plain untracked task (no record): {ratios['delayed']:.2f}x, "
                    f"{'met' if ratios['delayed'] <= GROUPED_PER_PLAIN else 'not met'}.")
    return lines + ["", verdict]


def _describe(run: Dict) -> str:
    if "error" in run:
        return f"error: {run['error']}"
    if "rate" in run:
        text = (f"{run['rate']:,.0f} chains/s (N={run['tasks']:,}, {run['seconds']:.2f} s, the enqueue loop "
                f"{run['enqueue_seconds']:.2f} s)")
    else:
        text = (f"{run['seconds']:.3f} s, {run['per_task_us']:,.1f} µs per task (N={run['tasks']:,}, the enqueue "
                f"call {run['enqueue_seconds']:.3f} s)")
    if run.get("failed"):
        text += f" failed={run['failed']}"
    if run.get("graceful_stop") is False:
        text += " stop=NOT graceful"
    return text
