"""In-process A/B of delayed's drain: the same no-op tasks drained by one Worker in two trees of this
repository (a base ref against the working tree, or another ref), alternating runs; see bench/README.md.

Run from the repository root with the project's virtualenv:
    .venv/bin/python bench/ab.py --base REF [--head REF] [--runs K] [--n N]
"""
import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import redis

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

# row: (what the table calls it, the bench driver class whose producer enqueues its tasks, share of --n)
ROWS = {"noop": ("no-op drain", "delayed_driver:Delayed", 1.0),
        "tracked": ("tracked drain", "delayed_tracked_driver:DelayedTracked", 0.5)}


def child(row: str, tasks: int, url: str) -> None:
    """One measurement, in a fresh interpreter whose cwd and PYTHONPATH are the tree under test:
    enqueue `tasks` tasks as the row's bench driver does, drain them with one in-process burst
    Worker as `python -m delayed.worker bench_tasks` would, and print one JSON line."""
    import delayed
    if Path.cwd().resolve() not in Path(delayed.__file__).resolve().parents:
        raise SystemExit(f"delayed imported from {delayed.__file__}, not from {Path.cwd()}")
    sys.path.insert(0, str(BENCH / "drivers"))
    import bench_tasks
    import common
    module, name = ROWS[row][1].split(":")
    system = getattr(__import__(module), name)(url)
    system.prefill(tasks)
    if system.remaining() != tasks:
        raise SystemExit(f"enqueued {tasks} tasks but {system.remaining()} are queued")

    marks: Dict[str, float] = {}

    class Marks(logging.Handler):
        """Times the worker's "online" line (its work starts) and its "burst done" line (queue empty)."""

        def emit(self, record: logging.LogRecord) -> None:
            for mark, text in (("start", " online on "), ("end", ": burst done")):
                if text in record.getMessage():
                    marks[mark] = time.perf_counter()

    logging.basicConfig(level=logging.INFO)  # as the worker's command line logs (INFO, no per-task lines)
    logging.getLogger("delayed").addHandler(Marks())
    worker = delayed.Worker(delayed.Queue(common.QUEUE, redis.Redis.from_url(url)), allow=[bench_tasks], burst=True)
    worker.run(handle_signals=False)
    if set(marks) != {"start", "end"} or system.remaining() or system.failed():
        raise SystemExit(f"drain not timed or not clean: marks {sorted(marks)}, {system.remaining()} left, "
                         f"{system.failed()} failed")
    seconds = marks["end"] - marks["start"]
    print(json.dumps({"file": delayed.__file__, "rate": tasks / seconds, "tasks": tasks, "seconds": seconds}))


def git(*args: str) -> str:
    """git's output, run on this repository; a failure exits with git's message."""
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


@contextmanager
def tree(ref: Optional[str], path: Path) -> Iterator[Path]:
    """The repository root for None (the working tree), else `ref` checked out at `path` in a
    detached worktree, removed on exit."""
    if ref is None:
        yield ROOT
        return
    git("worktree", "add", "--detach", str(path), ref)
    try:
        yield path
    finally:
        git("worktree", "remove", "--force", str(path))


def measure(row: str, tasks: int, url: str, where: Path) -> Dict:
    """One run of `row` in a fresh python whose `import delayed` is `where`'s."""
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "child", row, str(tasks), url],
                          cwd=where, env={**os.environ, "PYTHONPATH": str(where)}, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{row} in {where} failed:\n{done.stderr}{done.stdout}")
    return json.loads(done.stdout.splitlines()[-1])


def label(ref: Optional[str]) -> str:
    """What a side runs: the ref and its commit, or the working tree and the commit it is on."""
    commit = git("rev-parse", "--short", ("HEAD" if ref is None else ref) + "^{commit}")
    if ref is None:
        changes = ", with uncommitted changes" if git("status", "--porcelain") else ""
        return f"working tree {ROOT} (on {commit}{changes})"
    return commit if ref == commit else f"{ref} ({commit})"


def pair_ratios(sides: Dict[str, List[float]]) -> List[float]:
    """head/base of each pair: a base run and the head run right after it."""
    return [head / base for base, head in zip(sides["base"], sides["head"])]


def report(rates: Dict[str, Dict[str, List[float]]], labels: Dict[str, str]) -> None:
    """The table: per row, each side's median and spread (max/min - 1), head/base of the medians and
    the median of head/base of each pair, then the runs."""
    print(f"\nbase: {labels['base']}\nhead: {labels['head']}\n"
          f"(tasks/s, median of {len(rates['noop']['base'])} runs each)\n")
    print(f"{'row':<14} {'base':>9} {'head':>9} {'head/base':>9} {'pairs':>6} {'spread base':>11} {'spread head':>11}")
    for row, sides in rates.items():
        base, head = (statistics.median(sides[side]) for side in ("base", "head"))
        pairs = statistics.median(pair_ratios(sides))
        spread = [f"{max(sides[side]) / min(sides[side]) - 1:.1%}" for side in ("base", "head")]
        print(f"{ROWS[row][0]:<14} {base:>9,.0f} {head:>9,.0f} {head / base:>9.3f} {pairs:>6.3f} "
              f"{spread[0]:>11} {spread[1]:>11}")
    print()
    for row, sides in rates.items():
        for side, runs in sides.items():
            print(f"{ROWS[row][0]}, {side}: {', '.join(f'{rate:,.0f}' for rate in runs)}")
        print(f"{ROWS[row][0]}, head/base of each pair: {', '.join(f'{ratio:.3f}' for ratio in pair_ratios(sides))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git ref of the code before the change (e.g. fc1c7ee)")
    parser.add_argument("--head", help="git ref to compare with it (default: the working tree)")
    parser.add_argument("--runs", type=int, default=7, help="runs of each row on each side (default: %(default)s)")
    parser.add_argument("--n", type=int, default=120_000,
                        help="no-op tasks per run, about 1.5 s; the tracked row drains half as many "
                             "(default: %(default)s)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # this tree's delayed.testing (here only: a child imports its own tree's delayed)
    from delayed.testing import RedisServer
    refs = {"base": args.base, "head": args.head}
    labels = {side: label(ref) for side, ref in refs.items()}
    rates: Dict[str, Dict[str, List[float]]] = {row: {"base": [], "head": []} for row in ROWS}
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="delayed-ab-")))
        trees = {side: stack.enter_context(tree(ref, tmp / side)) for side, ref in refs.items()}
        server = stack.enter_context(RedisServer(tmp))
        conn = redis.Redis.from_url(server.url)
        for run in range(1, args.runs + 1):
            for row, (name, _, share) in ROWS.items():
                for side in ("base", "head"):
                    conn.flushall()
                    result = measure(row, int(args.n * share), server.url, trees[side])
                    rates[row][side].append(result["rate"])
                    print(f"run {run}/{args.runs} {name}, {side}: {result['rate']:,.0f} tasks/s "
                          f"({result['tasks']:,} in {result['seconds']:.2f} s; {result['file']})", flush=True)
    report(rates, labels)


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        main()
