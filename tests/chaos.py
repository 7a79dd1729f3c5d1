"""Chaos: producers, workers killed with SIGKILL and restarted, a sweeper, and Redis itself
killed and restarted (or every client connection dropped); then count.

    python -m tests.chaos [--tasks N] [--workers N] [--scenario SCENARIO]

Scenarios: `restart` (Redis SIGKILLed and restarted too), `client-kill` (every client
connection dropped too), `go-workers` (go-delayed's own workers, interop/bin/goworker, are the
ones killed, running GoTasks "main.Count" that our producer enqueues, with our sweeper) and
`go-sweeper` (our workers killed, go-delayed's sweeper instead of ours); `both` is the first
two, `all` (the default) all four. The Go scenarios need Go and go-delayed's module
(interop/gocommands.py builds the commands); under `all`, without them, one line says so.

Prints enqueued, executed, lost (must be 0) and duplicated (must not exceed the tasks held
by killed workers plus enqueues whose reply was lost), and exits non-zero if either fails.
A go-delayed worker never releases its last task, so one it held when killed runs again:
at most one duplicate per kill.
"""
import argparse
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set

import redis

from delayed import GoTask, PyTask, Queue
from delayed.connection import connect
from delayed.testing import RedisServer
from interop import gocommands

ROOT = Path(__file__).resolve().parent.parent
KEEP_ALIVE = "3"  # seconds; Redis restarts are shorter, so live workers are never taken for dead
SCENARIOS = ["restart", "client-kill", "go-workers", "go-sweeper"]
GO_SCENARIOS = ["go-workers", "go-sweeper"]


@dataclass
class Tally:
    enqueued: int = 0
    ambiguous_enqueues: int = 0  # batches whose reply was lost: they may have landed twice
    killed: int = 0
    held_by_killed: int = 0
    redis_restarts: int = 0
    client_kills: int = 0
    errors: List[str] = field(default_factory=list)


class Workers:
    """Our worker processes, which can be killed and replaced; each logs to its own file."""

    online = re.compile(r"worker (delayed-py-[0-9a-f]{32}) online")
    stop_signal = signal.SIGTERM
    keeps_last_task = False  # whether a worker still holds its last task once it finished it

    def __init__(self, url: str, count: int, directory: Path) -> None:
        self.url, self.directory = url, directory
        self.processes: List[Optional[subprocess.Popen]] = [None] * count
        self.logs: Dict[int, Path] = {}
        for slot in range(count):
            self.start(slot)

    def start(self, slot: int) -> None:
        log = self.directory / f"worker-{slot}-{time.monotonic_ns()}.log"
        self.logs[slot] = log
        self.processes[slot] = subprocess.Popen(
            self.argv(), cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT,
            env={"PYTHONPATH": str(ROOT), "DELAYED_TEST_REDIS_URL": self.url, "PATH": "/usr/bin:/bin"})

    def argv(self) -> List[str]:
        return [sys.executable, "-m", "delayed.worker", "--redis-url", self.url, "--queue", "chaos",
                "--keep-alive-timeout", KEEP_ALIVE, "tests.tasks"]

    def worker_id(self, slot: int) -> Optional[str]:
        """The id the worker in slot logged when it went online (None if it has not yet)."""
        match = self.online.search(self.logs[slot].read_text())
        return match.group(1) if match else None

    def live_ids(self) -> Set[bytes]:
        return {worker_id.encode() for worker_id in map(self.worker_id, range(len(self.processes))) if worker_id}

    def kill_one(self, conn: redis.Redis, tally: Tally) -> None:
        """SIGKILL a random worker, count the tasks it held, start a replacement."""
        slot = random.randrange(len(self.processes))
        worker_id = self.worker_id(slot)
        self.processes[slot].kill()
        self.processes[slot].wait()
        tally.killed += 1
        if worker_id:
            held = [f for f in conn.hkeys("chaos_processing") if f.decode().startswith(worker_id)]
            tally.held_by_killed += len(held)
        self.start(slot)

    def stop(self) -> None:
        for process in self.processes:
            process.send_signal(self.stop_signal)
        for process in self.processes:
            process.wait(30)


class GoWorkers(Workers):
    """go-delayed's workers (interop/bin/goworker) running GoTask("main.Count", id).

    They stop only on SIGHUP and keep their last task in chaos_processing after running it,
    so a killed one's last task runs again once its keep-alive key expires.
    """

    online = re.compile(r'"event":"starting","id":"([0-9a-f]{32})"')  # printed before it claims anything
    stop_signal = signal.SIGHUP
    keeps_last_task = True

    def argv(self) -> List[str]:
        # 4 s, not KEEP_ALIVE: go-delayed's float32 arithmetic makes 3 s an invalid SETEX (interop/README.md)
        return gocommands.worker_argv(self.url, "chaos", "-keep-alive-timeout", "4s",
                                      "-keep-alive-duration", "1s", "-log-level", "warn")


def start_sweeper(url: str, go: bool) -> subprocess.Popen:
    """Our sweeper, or go-delayed's (which handles no signal: SIGTERM ends it at once)."""
    if go:
        argv = gocommands.sweeper_argv(url, ["chaos"], "-interval", "500ms", "-log-level", "warn")
    else:
        argv = [sys.executable, "-m", "delayed.sweeper", "--redis-url", url, "--queue", "chaos",
                "--interval", "0.5", "--log-level", "WARNING"]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL)


def py_count(i: int) -> PyTask:
    return PyTask("tests.tasks:count", [i])


def go_count(i: int) -> GoTask:
    return GoTask("main.Count", str(i))  # HINCRBY executions i 1, as tests.tasks:count does


def produce(url: str, tasks: int, tally: Tally, stop: threading.Event,
            make_task: Callable[[int], object] = py_count) -> None:
    """Enqueue tasks with unique ids in batches, retrying a batch whose reply was lost."""
    queue = Queue("chaos", connect(url))  # no hidden resends: every lost reply is counted
    for start in range(0, tasks, 50):
        batch = [make_task(i) for i in range(start, min(start + 50, tasks))]
        while not stop.is_set():
            try:
                queue.enqueue_many(batch)
                break
            except redis.ConnectionError:
                tally.ambiguous_enqueues += len(batch)
                time.sleep(0.05)
        tally.enqueued = start + len(batch)
        time.sleep(random.random() * 0.01)


def run(tasks: int = 5000, workers: int = 3, scenario: str = "restart", timeout: float = 600) -> Tally:
    if scenario in GO_SCENARIOS:
        reason = gocommands.build()
        if reason:
            raise RuntimeError(f"scenario {scenario} needs go-delayed's commands: {reason}")
    go_workers = scenario == "go-workers"
    tally = Tally()
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(Path(directory), ["--appendonly", "yes", "--appendfsync", "always"]).start()
        conn = redis.Redis.from_url(server.url, socket_timeout=5)
        pool = (GoWorkers if go_workers else Workers)(server.url, workers, Path(directory))
        sweeper = start_sweeper(server.url, go=scenario == "go-sweeper")
        stop = threading.Event()
        producer = threading.Thread(target=produce, args=(server.url, tasks, tally, stop,
                                                          go_count if go_workers else py_count))
        producer.start()
        deadline = time.monotonic() + timeout
        rounds = 0
        try:
            while time.monotonic() < deadline:
                rounds += 1
                time.sleep(random.uniform(0.1, 0.6))
                try:
                    if finished(conn, tasks, producer, pool):
                        break
                    pool.kill_one(conn, tally)
                    if scenario == "restart" and rounds % 6 == 3:
                        server.process.kill()  # SIGKILL: appendfsync always must lose nothing
                        server.process.wait()
                        time.sleep(random.uniform(0.1, 1.0))
                        server.start()
                        tally.redis_restarts += 1
                    elif scenario == "client-kill" and rounds % 2:
                        conn.client_kill_filter(_type="normal", skipme=True)
                        tally.client_kills += 1
                except redis.ConnectionError:
                    continue  # Redis is on its way back
            else:
                tally.errors.append(f"not finished within {timeout} s")
        finally:
            stop.set()
            producer.join()
            # the sweeper first: a go-delayed worker stopping cleanly leaves its last task behind,
            # which a live sweeper would hand to a worker not yet stopped, a duplicate of no kill
            sweeper.send_signal(signal.SIGTERM)
            sweeper.wait(30)
            pool.stop()
            report(conn, tasks, tally)
            server.stop()
    return tally


def finished(conn: redis.Redis, tasks: int, producer: threading.Thread, pool: Workers) -> bool:
    """Every task ran and none waits; what is still held is a live Go worker's finished last task."""
    if producer.is_alive() or conn.hlen("executions") != tasks or conn.llen("chaos"):
        return False
    held = set(conn.hkeys("chaos_processing"))
    return not held or (pool.keeps_last_task and held <= pool.live_ids())


def report(conn: redis.Redis, tasks: int, tally: Tally) -> None:
    counts = [int(value) for value in conn.hvals("executions")]
    executed, runs = len(counts), sum(counts)
    lost, duplicated = tasks - executed, runs - executed
    bound = tally.held_by_killed + tally.ambiguous_enqueues
    print(f"chaos: enqueued {tally.enqueued}, executed {executed}, lost {lost}, duplicated {duplicated} "
          f"(bound {bound}: {tally.held_by_killed} held by {tally.killed} killed workers, "
          f"{tally.ambiguous_enqueues} ambiguous enqueues), redis restarts {tally.redis_restarts}, "
          f"client kills {tally.client_kills}, dead letters {conn.xlen('chaos_dead_letters')}")
    if lost:
        tally.errors.append(f"{lost} tasks lost")
    if duplicated > bound:
        tally.errors.append(f"{duplicated} duplicates, more than the bound of {bound}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--scenario", choices=[*SCENARIOS, "both", "all"], default="all")
    args = parser.parse_args()
    scenarios = {"both": SCENARIOS[:2], "all": SCENARIOS}.get(args.scenario, [args.scenario])
    go_wanted = [s for s in scenarios if s in GO_SCENARIOS]
    reason = gocommands.build() if go_wanted else None
    if reason:
        print(f"chaos: {', '.join(go_wanted)} not run: {reason}", flush=True)
        if args.scenario != "all":
            return 2
        scenarios = [s for s in scenarios if s not in GO_SCENARIOS]
    failed = False
    for scenario in scenarios:
        print(f"chaos: scenario {scenario}, {args.tasks} tasks, {args.workers} workers", flush=True)
        started = time.monotonic()
        tally = run(args.tasks, args.workers, scenario, timeout=3600)
        print(f"chaos: {scenario} took {time.monotonic() - started:.0f} s; "
              f"{'; '.join(tally.errors) or 'OK'}", flush=True)
        failed = failed or bool(tally.errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
