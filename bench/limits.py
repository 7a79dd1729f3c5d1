"""The rate-limit section of the bench (issue 31): how exactly one `rate_limit` shared by every worker
holds, measured in the bench's run, on its redis-server.

A backlog of bench_tasks.started tasks (each RPUSHes when it started), all with `rate_limit="50/s"`
and so one limit key, enqueued before cfg["limit_processes"] (10) worker processes start; the starts
counted over cfg["limit_seconds"] (60 s) from the first: the admitted rate, its error against the
limit, and the most starts in any one-second window. Then every task is waited for: none may be lost
or run twice, none dead-lettered.
"""
from typing import Callable, Dict, List

RATE = 50  # starts per second: issue 31's figure
TOLERANCE_PCT = 2.0  # issue 31's target: the admitted rate within this of the limit

Driver = Callable[..., Dict]  # Bench.driver: (spec, *args) -> the driver's JSON result


def measure(driver: Driver, spec: object, cfg: Dict, log: Callable[[str], None]) -> Dict:
    """The section's one run, on delayed."""
    seconds, processes = cfg["limit_seconds"], cfg["limit_processes"]
    result = driver(spec, "rate_limit", "--processes", processes, "--rate", RATE, "--seconds", seconds,
                    "--timeout", 3 * seconds + 60, timeout=4 * seconds + 90)
    log(f"  rate limit {RATE}/s, {processes} worker processes, {seconds} s: {result}")
    return result


def report(result: Dict, label: str, cfg: Dict) -> List[str]:
    """The report's section: the admitted rate against the limit and the target, and the run."""
    lines = ["", "## Rate limits: issue 31's target", "",
             f"One `rate_limit=\"{RATE}/s\"` on every task of a backlog (so one limit key), run by "
             f"{cfg['limit_processes']} worker processes (`python -m delayed.worker --concurrency "
             f"{cfg['limit_processes']}`) on the bench's redis-server; the starts counted over "
             f"{cfg['limit_seconds']} s from the first, then every task waited for.", ""]
    if "rate" not in result:
        return lines + [f"Not measured: {result.get('error', result)}"]
    met = abs(result["error_pct"]) <= TOLERANCE_PCT and result["ran"] == result["tasks"] and not result["failed"]
    lines += ["| system | admitted (starts/s) | error | most in any 1 s | tasks run / enqueued | dead letters "
              f"| target: {RATE}/s ±{TOLERANCE_PCT:g}%, none lost |", "|---|---:|---:|---:|---:|---:|---|",
              f"| {label} | {result['rate']:.2f} | {result['error_pct']:+.2f}% | {result['busiest_second']} "
              f"| {result['ran']:,} / {result['tasks']:,} | {result['failed']} | {'met' if met else 'NOT MET'} |"]
    return lines
