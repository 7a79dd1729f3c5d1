"""Chaos: producers, workers killed with SIGKILL and restarted, a sweeper, and Redis itself
killed and restarted (or every client connection dropped); then count. And durability:
producers alone, Redis SIGKILLed under each persistence setting; then count what survived.

    python -m tests.chaos [--tasks N] [--workers N] [--scenario SCENARIO]

Scenarios: `restart` (Redis SIGKILLed and restarted too), `client-kill` (every client
connection dropped too), `go-workers` (go-delayed's own workers, interop/bin/goworker, are the
ones killed, running GoTasks "main.Count" that our producer enqueues, with our sweeper),
`go-sweeper` (our workers killed, go-delayed's sweeper instead of ours) and `durability` (see
below); `both` is the first two, `all` (the default) all five. The Go scenarios need Go and
go-delayed's module (interop/gocommands.py builds the commands); under `all`, without them,
one line says so.

Prints enqueued, executed, lost (must be 0) and duplicated (must not exceed the tasks held
by killed workers plus enqueues whose reply was lost), and exits non-zero if either fails.
A go-delayed worker never releases its last task, so one it held when killed runs again:
at most one duplicate per kill.

Durability ignores --tasks and --workers: for each CASES entry, producer threads enqueue at a
steady rate into a fresh redis-server with that persistence setting (no workers), Redis is
SIGKILLed kill_at seconds after the writes began and restarted on its directory, and the tasks
still queued are matched against the acknowledged enqueues (calls that returned). Prints a
table, and fails on a loss the Guarantees page (docs/guarantees.md) rules out for that setting (about 2.5 minutes).
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
from itertools import count
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

import redis

from delayed import GoTask, PyTask, Queue
from delayed.protocol.connection import connect
from delayed.testing import RedisServer
from interop import gocommands

ROOT = Path(__file__).resolve().parent.parent
KEEP_ALIVE = "3"  # seconds; Redis restarts are shorter, so live workers are never taken for dead
SCENARIOS = ["restart", "client-kill", "go-workers", "go-sweeper", "durability"]
GO_SCENARIOS = ["go-workers", "go-sweeper"]

RDB_DEFAULT = ("--save", "3600 1 300 100 60 10000", "--appendonly", "no")  # as redis-server ships
AOF_EVERYSEC = ("--appendonly", "yes", "--appendfsync", "everysec")
AOF_ALWAYS = ("--appendonly", "yes", "--appendfsync", "always")
FIRST_SNAPSHOT = 60  # s after the start: RDB_DEFAULT's first snapshot, at 10,000 changes (3 an enqueue)
EVERYSEC_LAG = 2  # s: how long everysec may reply before writing while its background fsync runs
SLACK = 1.0  # s: Redis's save and fsync clocks tick in whole seconds


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
                if sweeper.poll() is not None:  # it started while Redis was down: as systemd would, start it again
                    sweeper = start_sweeper(server.url, go=scenario == "go-sweeper")
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


class Case(NamedTuple):
    """A persistence setting, when Redis is SIGKILLed (seconds after the writes began), and the
    docs/guarantees.md's claim: the kill loses only enqueues sent in its last may_lose seconds (None: every one)."""
    setting: str
    redis_args: Tuple[str, ...]
    kill_at: float
    may_lose: Optional[float]


CASES = (
    Case("RDB, default save points", RDB_DEFAULT, 30, None),  # before the first snapshot
    Case("RDB, default save points", RDB_DEFAULT, 75, 75 - FIRST_SNAPSHOT + SLACK),
    Case("AOF, appendfsync everysec", AOF_EVERYSEC, 20, EVERYSEC_LAG + SLACK),
    Case("AOF, appendfsync always", AOF_ALWAYS, 20, 0),
)
DURABILITY_RATE = 2000  # enqueues per second, all producers together
DURABILITY_PRODUCERS = 2


@dataclass
class Survival:
    """What a SIGKILL of Redis left of the acknowledged enqueues."""
    acknowledged: int
    lost: int
    extra: int  # tasks queued whose enqueue never returned: in flight at the kill
    lost_window: float  # how long before the kill the oldest lost enqueue was sent (0: none lost)
    unpaired: int  # tasks minus notifications after the restart: not 0 if the kill split an enqueue

    @property
    def lost_percent(self) -> float:
        return 100 * self.lost / self.acknowledged if self.acknowledged else 0.0


def produce_until_killed(url: str, first: int, step: int, rate: float, acked: List[Tuple[int, float]],
                         stop: threading.Event) -> None:
    """Enqueue tasks first, first + step, ... at rate per second, one call each, until Redis goes
    away; record (task, when its call was sent) for each call that returned."""
    queue = Queue("durability", connect(url))
    began = time.monotonic()
    for n, i in enumerate(count(first, step)):
        time.sleep(max(0.0, began + n / rate - time.monotonic()))
        if stop.is_set():
            return
        sent = time.monotonic()
        try:
            queue.enqueue(py_count(i))
        except (redis.ConnectionError, redis.TimeoutError):
            return
        acked.append((i, sent))


def queued_counts(conn: redis.Redis) -> Set[int]:
    """The ids (py_count's argument) of the tasks in the durability queue."""
    return {PyTask.deserialize(blob).args[0] for blob in conn.lrange("durability", 0, -1)}


def run_case(case: Case, rate: float = DURABILITY_RATE, producers: int = DURABILITY_PRODUCERS) -> Survival:
    """Produce into a fresh redis-server with case's setting, SIGKILL it at case.kill_at,
    restart it on the same directory and port, and compare the queue with what was acknowledged."""
    acked: List[Tuple[int, float]] = []  # list.append is atomic: the producers share it
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(Path(directory), list(case.redis_args)).start()
        threads = [threading.Thread(target=produce_until_killed,
                                    args=(server.url, first, producers, rate / producers, acked, stop))
                   for first in range(producers)]
        for thread in threads:
            thread.start()
        try:
            time.sleep(case.kill_at)
            killed = time.monotonic()
            server.process.kill()
            server.process.wait()
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        server.start()
        try:
            conn = redis.Redis.from_url(server.url, socket_timeout=10)
            queued = queued_counts(conn)
            unpaired = conn.llen("durability") - conn.llen("durability_noti")
        finally:
            server.stop()
    sent = dict(acked)
    lost = [when for i, when in sent.items() if i not in queued]
    return Survival(acknowledged=len(sent), lost=len(lost), extra=len(queued - sent.keys()),
                    lost_window=killed - min(lost) if lost else 0.0, unpaired=unpaired)


def contradiction(case: Case, survival: Survival) -> Optional[str]:
    """What in survival docs/guarantees.md's claim for case rules out, or None."""
    where = f"{case.setting}, killed at {case.kill_at:g} s"
    if not survival.acknowledged:
        return f"{where}: no enqueue was acknowledged"
    if survival.unpaired:
        return f"{where}: {survival.unpaired} more tasks than notifications: an enqueue was split"
    if case.may_lose is None and survival.lost < survival.acknowledged:
        return f"{where}: {survival.acknowledged - survival.lost} acknowledged enqueues survived, none should"
    if case.may_lose is not None and survival.lost_window > case.may_lose:
        return (f"{where}: lost an enqueue sent {survival.lost_window:.1f} s before the kill, "
                f"more than the {case.may_lose:g} s it may lose")
    return None


def durability(cases: Sequence[Case] = CASES) -> List[str]:
    """Run every case, print one row each, and return the contradictions."""
    print(f"{'setting':<26} {'kill at':>8} {'acknowledged':>12} {'lost':>8} {'lost %':>7} "
          f"{'lost window':>11} {'extra':>5}", flush=True)
    errors = []
    for case in cases:
        survival = run_case(case)
        print(f"{case.setting:<26} {case.kill_at:>6g} s {survival.acknowledged:>12,} {survival.lost:>8,} "
              f"{survival.lost_percent:>6.1f}% {survival.lost_window:>9.1f} s {survival.extra:>5}", flush=True)
        error = contradiction(case, survival)
        if error:
            errors.append(error)
    print("lost window: how long before the kill the oldest lost enqueue was sent; "
          "extra: tasks queued whose enqueue raised (in flight at the kill)", flush=True)
    return errors


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
        started = time.monotonic()
        if scenario == "durability":
            print("chaos: scenario durability: producers only, Redis SIGKILLed under each persistence setting",
                  flush=True)
            errors = durability()
        else:
            print(f"chaos: scenario {scenario}, {args.tasks} tasks, {args.workers} workers", flush=True)
            errors = run(args.tasks, args.workers, scenario, timeout=3600).errors
        print(f"chaos: {scenario} took {time.monotonic() - started:.0f} s; {'; '.join(errors) or 'OK'}", flush=True)
        failed = failed or bool(errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
