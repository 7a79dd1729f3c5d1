"""Chaos: producers, workers killed with SIGKILL and restarted, a sweeper, and Redis itself
killed and restarted (or every client connection dropped); then count.

    python -m tests.chaos [--tasks N] [--workers N] [--scenario restart|client-kill]

Prints enqueued, executed, lost (must be 0) and duplicated (must not exceed the tasks held
by killed workers plus enqueues whose reply was lost), and exits non-zero if either fails.
Go workers are not included: go-delayed's module cannot be fetched here.
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
from typing import Dict, List, Optional

import redis

from delayed import PyTask, Queue
from delayed.connection import connect
from delayed.testing import RedisServer

ROOT = Path(__file__).resolve().parent.parent
KEEP_ALIVE = "3"  # seconds; Redis restarts are shorter, so live workers are never taken for dead
ONLINE = re.compile(r"worker (delayed-py-[0-9a-f]{32}) online")


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
    """Worker processes that can be killed and replaced; each logs to its own file."""

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
            [sys.executable, "-m", "delayed.worker", "--redis-url", self.url, "--queue", "chaos",
             "--keep-alive-timeout", KEEP_ALIVE, "tests.tasks"],
            cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT,
            env={"PYTHONPATH": str(ROOT), "DELAYED_TEST_REDIS_URL": self.url, "PATH": "/usr/bin:/bin"})

    def worker_id(self, slot: int) -> Optional[str]:
        """The id the worker in slot logged when it went online (None if it has not yet)."""
        match = ONLINE.search(self.logs[slot].read_text())
        return match.group(1) if match else None

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
            process.send_signal(signal.SIGTERM)
        for process in self.processes:
            process.wait(30)


def produce(url: str, tasks: int, tally: Tally, stop: threading.Event) -> None:
    """Enqueue tasks with unique ids in batches, retrying a batch whose reply was lost."""
    queue = Queue("chaos", connect(url))  # no hidden resends: every lost reply is counted
    for start in range(0, tasks, 50):
        batch = [PyTask("tests.tasks:count", [i]) for i in range(start, min(start + 50, tasks))]
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
    tally = Tally()
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(Path(directory), ["--appendonly", "yes", "--appendfsync", "always"]).start()
        conn = redis.Redis.from_url(server.url, socket_timeout=5)
        pool = Workers(server.url, workers, Path(directory))
        sweeper = subprocess.Popen([sys.executable, "-m", "delayed.sweeper", "--redis-url", server.url,
                                    "--queue", "chaos", "--interval", "0.5", "--log-level", "WARNING"], cwd=ROOT)
        stop = threading.Event()
        producer = threading.Thread(target=produce, args=(server.url, tasks, tally, stop))
        producer.start()
        deadline = time.monotonic() + timeout
        rounds = 0
        try:
            while time.monotonic() < deadline:
                rounds += 1
                time.sleep(random.uniform(0.1, 0.6))
                try:
                    if finished(conn, tasks, producer):
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
            pool.stop()
            sweeper.send_signal(signal.SIGTERM)
            sweeper.wait(30)
            report(conn, tasks, tally)
            server.stop()
    return tally


def finished(conn: redis.Redis, tasks: int, producer: threading.Thread) -> bool:
    return (not producer.is_alive() and conn.hlen("executions") == tasks
            and conn.llen("chaos") == 0 and conn.hlen("chaos_processing") == 0)


def report(conn: redis.Redis, tasks: int, tally: Tally) -> None:
    counts = [int(value) for value in conn.hvals("executions")]
    executed, runs = len(counts), sum(counts)
    lost, duplicated = tasks - executed, runs - executed
    bound = tally.held_by_killed + tally.ambiguous_enqueues
    print(f"chaos: enqueued {tally.enqueued}, executed {executed}, lost {lost}, duplicated {duplicated} "
          f"(bound {bound}: {tally.held_by_killed} held by {tally.killed} killed workers, "
          f"{tally.ambiguous_enqueues} ambiguous enqueues), redis restarts {tally.redis_restarts}, "
          f"client kills {tally.client_kills}, dead letters {conn.llen('chaos_dead')}")
    if lost:
        tally.errors.append(f"{lost} tasks lost")
    if duplicated > bound:
        tally.errors.append(f"{duplicated} duplicates, more than the bound of {bound}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--scenario", choices=["restart", "client-kill", "both"], default="both")
    args = parser.parse_args()
    failed = False
    for scenario in (["restart", "client-kill"] if args.scenario == "both" else [args.scenario]):
        print(f"chaos: scenario {scenario}, {args.tasks} tasks, {args.workers} workers", flush=True)
        started = time.monotonic()
        tally = run(args.tasks, args.workers, scenario, timeout=3600)
        print(f"chaos: {scenario} took {time.monotonic() - started:.0f} s; "
              f"{'; '.join(tally.errors) or 'OK'}", flush=True)
        failed = failed or bool(tally.errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
