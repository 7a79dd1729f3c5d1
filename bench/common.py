"""What every driver shares: the measurements themselves and the worker processes.

Imported by path from each system's own virtualenv, so it may use only the standard
library and redis-py, never a task-queue library. A driver subclasses `System`, fills in
the few hooks that differ between queues, and calls `main(MySystem)`; it then prints one
JSON line with the result of the one measurement asked for on its command line.
"""
import argparse
import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import bench_tasks
import redis

BENCH_DIR = Path(__file__).resolve().parent
LATENCY_KEY = "bench:latency"  # bench_tasks.record RPUSHes each start latency (seconds) here
QUEUE = "bench"  # the queue name every system uses
# the drain's kinds of task: bench_tasks.noop, sleep10 (time.sleep(0.01)), asleep10 (asyncio.sleep(0.01))
TASKS = {"noop": "noop", "sleep": "sleep10", "asleep": "asleep10"}


class BenchError(Exception):
    """A measurement that could not be made; reported instead of a number."""


class System:
    """One task queue under test. Subclasses fill in the hooks below."""

    version = "?"  # the library's version, for the report
    stop_signal = signal.SIGTERM  # what makes one of its workers stop gracefully
    stop_grace = 15.0  # seconds its workers get to exit on stop_signal before SIGKILL
    signal_group = False  # True: the stop signal goes to each worker's process group, as Ctrl-C does
    has_enqueue_many = True
    # True where a task leaves the remaining count when it starts (no record of a running task, or an
    # ack before the run): the drain then ends one task's run after the count reaches 0
    done_at_start = False
    # how its workers are run, for the report: the no-op rows, and the io rows with N slots
    settings = "?"
    io_settings = "?"
    workflow_settings = "?"  # and the workflow section's rows (bench/workflows.py), where it has them

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn = redis.Redis.from_url(url)

    # Hooks

    def enqueue(self, enqueued_at: Optional[float] = None) -> None:
        """One producer call: a no-op task, or a latency task carrying `enqueued_at`."""
        raise NotImplementedError

    def enqueue_many(self, count: int) -> None:
        """One bulk call enqueuing `count` no-op tasks."""
        raise NotImplementedError

    def prefill(self, count: int, task: str = "noop") -> None:
        """Enqueue `count` tasks of kind `task` (a key of TASKS) as fast as the library allows
        (not timed)."""
        raise NotImplementedError

    def remaining(self) -> int:
        """Tasks not finished yet: waiting plus held by a worker, read atomically."""
        raise NotImplementedError

    def worker_commands(self, processes: int, slots: Optional[int] = None) -> List[List[str]]:
        """argv of each worker process to start to get `processes` worker processes, each running
        up to `slots` tasks at once (None: the setting of the no-op rows)."""
        raise NotImplementedError

    def enqueue_chain(self) -> None:
        """One producer call: a chain of bench_tasks.step, step and flow_end, each taking the result of
        the one before it."""
        raise NotImplementedError

    def enqueue_group(self, members: int) -> None:
        """One producer call: `members` bench_tasks.step tasks at once, and bench_tasks.flow_end as their
        callback, given the list of their results."""
        raise NotImplementedError

    def worker_environ(self, slots: Optional[int] = None) -> Dict[str, str]:
        """Extra environment of the worker processes (for systems configured in a module)."""
        return {}

    def cannot_run(self, task: str, slots: Optional[int]) -> Optional[Dict]:
        """Why this system cannot run `task` with `slots`: {"na": why} where it has no way to,
        {"skipped": why} where this version cannot yet; None when it can."""
        return None

    def failed(self) -> int:
        """Tasks the system recorded as failed or dead-lettered."""
        return 0

    # Helpers for the hooks

    def count_keys(self, *commands: Sequence[str]) -> int:
        """Sum of counting commands such as ("llen", key), run in one MULTI."""
        with self.conn.pipeline(transaction=True) as pipe:
            for name, key in commands:
                getattr(pipe, name)(key)
            return sum(pipe.execute())

    # Measurements

    def measure_enqueue(self, seconds: float) -> Dict:
        count, start = 0, time.perf_counter()
        while True:
            self.enqueue()
            count += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return {"rate": count / elapsed, "tasks": count, "seconds": elapsed}

    def measure_enqueue_many(self, seconds: float, batch: int) -> Dict:
        if not self.has_enqueue_many:
            return {"na": "no bulk enqueue API"}
        count, start = 0, time.perf_counter()
        while True:
            self.enqueue_many(batch)
            count += batch
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return {"rate": count / elapsed, "tasks": count, "seconds": elapsed, "batch": batch}

    def measure_drain(self, tasks: int, processes: int, timeout: float, task: str = "noop",
                      slots: Optional[int] = None, memory: bool = False) -> Dict:
        reason = self.cannot_run(task, slots)
        if reason:
            return reason
        self.prefill(tasks, task)
        if self.remaining() != tasks:
            raise BenchError(f"prefilled {tasks} tasks but {self.remaining()} are queued")
        with Workers(self, processes, slots) as workers:
            t0 = left_at_t0 = None
            deadline = time.monotonic() + timeout
            while True:
                left = self.remaining()
                now = time.perf_counter()
                if t0 is None and left < tasks:
                    t0, left_at_t0 = now, left
                if left == 0:
                    break
                workers.check(deadline, f"{left} of {tasks} tasks left")
                time.sleep(0.002)
            # read before the stop signal, while every worker process is still up
            used = workers.memory() if memory else {}
        if self.done_at_start and task != "noop":
            now += bench_tasks.IO_SECONDS  # the last task started at `now` and ran that long
        # t0 is the first moment a task was finished: the left_at_t0 tasks then left all ran in [t0, now]
        return {"rate": left_at_t0 / (now - t0), "tasks": tasks, "seconds": now - t0, **used,
                "failed": self.failed(), "graceful_stop": workers.graceful}

    def measure_latency(self, rate: float, count: int, timeout: float) -> Dict:
        with Workers(self, 1) as workers:
            self.enqueue(time.time())  # one task to learn that the worker is up and idle
            self._wait_for_latencies(1, workers, time.monotonic() + timeout)
            self.conn.delete(LATENCY_KEY)
            start = time.perf_counter()
            for i in range(count):
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                self.enqueue(time.time())
            offered = count / (time.perf_counter() - start)
            self._wait_for_latencies(count, workers, time.monotonic() + timeout)
        ms = sorted(float(value) * 1000 for value in self.conn.lrange(LATENCY_KEY, 0, -1))
        return {"p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99), "max_ms": ms[-1],
                "tasks": count, "offered_rate": offered, "failed": self.failed(),
                "graceful_stop": workers.graceful}

    def measure_chains(self, chains: int, timeout: float) -> Dict:
        """`chains` chains enqueued one call each, in a loop, while one worker process runs them: from the
        first enqueue until the last chain's last step ran (it writes when)."""
        with Workers(self, 1) as workers:
            deadline = time.monotonic() + timeout
            self.enqueue_chain()  # one chain to learn that the worker is up and idle
            self._wait_for_flows(1, workers, deadline)
            self.conn.delete(bench_tasks.FLOW_ENDED)
            start = time.time()
            for _ in range(chains):
                self.enqueue_chain()
            enqueued = time.time() - start
            self._wait_for_flows(chains, workers, deadline)
        seconds = float(self.conn.get(bench_tasks.FLOW_ENDED_AT)) - start
        return {"rate": chains / seconds, "steps_rate": 3 * chains / seconds, "tasks": chains, "seconds": seconds,
                "enqueue_seconds": enqueued, "failed": self.failed(), "graceful_stop": workers.graceful}

    def measure_group(self, members: int, timeout: float) -> Dict:
        """One group of `members` tasks with a callback, enqueued to one idle worker process: from the
        enqueue call until the callback ran (it writes when, and how many results it was given)."""
        with Workers(self, 1) as workers:
            deadline = time.monotonic() + timeout
            self.enqueue_group(2)  # a small one to learn that the worker is up and idle
            self._wait_for_flows(1, workers, deadline)
            self.conn.delete(bench_tasks.FLOW_ENDED)
            start = time.time()
            self.enqueue_group(members)
            enqueued = time.time() - start
            self._wait_for_flows(1, workers, deadline)
        ended, given = self.conn.mget(bench_tasks.FLOW_ENDED_AT, bench_tasks.FLOW_INPUTS)
        if int(given) != members:
            raise BenchError(f"the callback was given {int(given)} results, not {members}")
        seconds = float(ended) - start
        return {"seconds": seconds, "per_task_us": 1e6 * seconds / members, "tasks": members,
                "enqueue_seconds": enqueued, "failed": self.failed(), "graceful_stop": workers.graceful}

    def measure_batch(self, tasks: int, timeout: float) -> Dict:
        """`tasks` plain no-op tasks in one enqueue_many call to one idle worker process: from the call
        until the last one ended (the remaining count polled every 2 ms), what a group is set against."""
        with Workers(self, 1) as workers:
            deadline = time.monotonic() + timeout
            self.enqueue_many(1)  # one task to learn that the worker is up and idle
            self._wait_for_empty(workers, deadline)
            start = time.perf_counter()
            self.enqueue_many(tasks)
            enqueued = time.perf_counter() - start
            self._wait_for_empty(workers, deadline)
            seconds = time.perf_counter() - start
        return {"seconds": seconds, "per_task_us": 1e6 * seconds / tasks, "tasks": tasks, "enqueue_seconds": enqueued,
                "failed": self.failed(), "graceful_stop": workers.graceful}

    def enqueue_limited(self, count: int, rate: int) -> None:
        """count bench_tasks.started tasks, sharing one rate limit of `rate` starts per second."""
        raise BenchError("no rate limit shared by every worker")

    def measure_rate_limit(self, processes: int, rate: int, seconds: float, timeout: float) -> Dict:
        """A backlog of tasks under one limit of `rate` starts per second, run by `processes` worker
        processes: the starts counted over `seconds` from the first (the admitted rate, and the most
        in any one-second window), then every task waited for (none may be lost)."""
        tasks = int(rate * (seconds + 10))  # a backlog until the window's end, and some
        self.enqueue_limited(tasks, rate)
        with Workers(self, processes) as workers:
            deadline = time.monotonic() + timeout
            while self.conn.llen(bench_tasks.STARTED) < tasks:
                workers.check(deadline, f"{self.conn.llen(bench_tasks.STARTED)} of {tasks} started")
                time.sleep(0.05)
        starts = sorted(float(value) for value in self.conn.lrange(bench_tasks.STARTED, 0, -1))
        first = starts[0]
        admitted = sum(1 for at in starts if at < first + seconds)
        busiest, low = 0, 0
        for high, at in enumerate(starts):  # the most starts in any window of one second
            while starts[low] <= at - 1.0:
                low += 1
            busiest = max(busiest, high - low + 1)
        return {"rate": admitted / seconds, "limit": rate, "error_pct": 100 * (admitted / seconds - rate) / rate,
                "busiest_second": busiest, "tasks": tasks, "ran": len(starts), "failed": self.failed(),
                "seconds": seconds, "processes": processes, "graceful_stop": workers.graceful}

    def _wait_for_flows(self, count: int, workers: "Workers", deadline: float) -> None:
        """Until bench_tasks.flow_end ran `count` times."""
        while int(self.conn.get(bench_tasks.FLOW_ENDED) or 0) < count:
            workers.check(deadline, f"{int(self.conn.get(bench_tasks.FLOW_ENDED) or 0)} of {count} workflows ended")
            time.sleep(0.01)

    def _wait_for_empty(self, workers: "Workers", deadline: float) -> None:
        while True:
            left = self.remaining()
            if left == 0:
                return
            workers.check(deadline, f"{left} tasks left")
            time.sleep(0.002)

    def _wait_for_latencies(self, count: int, workers: "Workers", deadline: float) -> None:
        while self.conn.llen(LATENCY_KEY) < count:
            workers.check(deadline, f"{self.conn.llen(LATENCY_KEY)} of {count} latency tasks ran")
            time.sleep(0.01)


class AsyncSystem(System):
    """A system whose producer API is asyncio only: the hooks below run on one event loop."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.loop = asyncio.new_event_loop()

    def run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    async def async_enqueue(self, task: str = "noop", enqueued_at: Optional[float] = None) -> None:
        """One producer call: a task of kind `task`, or a latency task carrying `enqueued_at`."""
        raise NotImplementedError

    def enqueue(self, enqueued_at=None):
        self.run(self.async_enqueue("noop", enqueued_at))

    def prefill(self, count, task="noop"):
        async def chunk(size: int) -> None:
            await asyncio.gather(*(self.async_enqueue(task) for _ in range(size)))
        for start in range(0, count, 100):  # 100 calls in flight: the library's own enqueue, not timed
            self.run(chunk(min(100, count - start)))


def percentile(sorted_values: List[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return sorted_values[max(0, math.ceil(pct / 100 * len(sorted_values)) - 1)]


def worker_env(url: str) -> Dict[str, str]:
    """Environment of worker processes: bench/ importable, the Redis URL for bench_tasks."""
    env = dict(os.environ, BENCH_REDIS_URL=url, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH_DIR), env.get("PYTHONPATH")]))
    return env


class Workers:
    """The worker processes of one measurement, each in its own process group.

    On exit: the system's stop signal, up to its stop_grace (15 s) to exit, then SIGKILL to the
    whole group, so nothing outlives the measurement. `graceful` tells whether they all stopped by themselves.
    """

    def __init__(self, system: System, processes: int, slots: Optional[int] = None) -> None:
        self.system = system
        self.commands = system.worker_commands(processes, slots)
        self.environ = system.worker_environ(slots)
        self.procs: List[subprocess.Popen] = []
        self.graceful = True
        self.log = open(os.environ.get("BENCH_WORKER_LOG", os.devnull), "ab")

    def __enter__(self) -> "Workers":
        env = dict(worker_env(self.system.url), **self.environ)
        for argv in self.commands:
            self.procs.append(subprocess.Popen(argv, cwd=BENCH_DIR, env=env, stdin=subprocess.DEVNULL,
                                               stdout=self.log, stderr=self.log, start_new_session=True))
        return self

    def check(self, deadline: float, progress: str) -> None:
        """Raise if a worker died or time ran out."""
        for proc in self.procs:
            if proc.poll() is not None:
                raise BenchError(f"worker {proc.args} exited with status {proc.returncode}; {progress}")
        if time.monotonic() > deadline:
            raise BenchError(f"timed out; {progress}")

    def memory(self) -> Dict:
        """Memory of every process of these workers and their descendants (a supervisor's
        children): the sum of their peak RSS (VmHWM) and of their PSS now, where pages shared
        after fork count once, in MB."""
        children: Dict[int, List[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:  # the parent is the 4th field; the command may hold spaces, so split after ')'
                    parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue  # gone meanwhile
                children.setdefault(parent, []).append(int(entry.name))
        pids = [proc.pid for proc in self.procs]
        for pid in pids:  # grows as it goes: breadth first
            pids.extend(children.get(pid, []))
        rss_kb = pss_kb = count = 0
        for pid in pids:
            try:
                rss_kb += _kb_field(Path(f"/proc/{pid}/status").read_text(), "VmHWM:")
                pss_kb += _kb_field(Path(f"/proc/{pid}/smaps_rollup").read_text(), "Pss:")
                count += 1
            except OSError:
                pass
        return {"rss_mb": rss_kb / 1024, "pss_mb": pss_kb / 1024, "processes_seen": count}

    def __exit__(self, *exc_info: object) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                if self.system.signal_group:
                    os.killpg(proc.pid, self.system.stop_signal)
                else:
                    proc.send_signal(self.system.stop_signal)
        deadline = time.monotonic() + self.system.stop_grace
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.graceful = False
            if proc.returncode not in (0, None, -self.system.stop_signal):
                self.graceful = False
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # children of a worker (a supervisor's, dramatiq's)
            except ProcessLookupError:
                pass
            proc.wait()
        self.log.close()


def _kb_field(text: str, name: str) -> int:
    for line in text.splitlines():
        if line.startswith(name):
            return int(line.split()[1])
    return 0


def main(system_class: Callable[[str], System]) -> None:
    """Command line of a driver: run one measurement, print one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("measure", choices=["version", "enqueue", "enqueue_many", "drain", "latency", "chains",
                                            "group", "batch", "rate_limit"])
    parser.add_argument("--seconds", type=float, default=2.0, help="enqueue, enqueue_many: how long")
    parser.add_argument("--batch", type=int, default=1000, help="enqueue_many: tasks per call")
    parser.add_argument("--tasks", type=int, default=2000,
                        help="drain: prefilled; latency: sent; chains: chains; group: members; batch: enqueued")
    parser.add_argument("--processes", type=int, default=1, help="drain: worker processes")
    parser.add_argument("--task", choices=sorted(TASKS), default="noop", help="drain: the kind of task")
    parser.add_argument("--slots", type=int, help="drain: tasks each process runs at once")
    parser.add_argument("--memory", action="store_true", help="drain: the workers' memory too")
    parser.add_argument("--rate", type=float, default=200, help="latency: tasks per second; rate_limit: the limit")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    # the orchestrator's SIGTERM (its timeout) must still stop the workers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    system = system_class(args.url)
    try:
        if args.measure == "version":
            result = {"version": system.version, "python": sys.version.split()[0],
                      "settings": system.settings, "io_settings": system.io_settings,
                      "workflow_settings": system.workflow_settings}
        elif args.measure == "enqueue":
            result = system.measure_enqueue(args.seconds)
        elif args.measure == "enqueue_many":
            result = system.measure_enqueue_many(args.seconds, args.batch)
        elif args.measure == "drain":
            result = system.measure_drain(args.tasks, args.processes, args.timeout, args.task, args.slots,
                                          args.memory)
        elif args.measure == "latency":
            result = system.measure_latency(args.rate, args.tasks, args.timeout)
        elif args.measure == "chains":
            result = system.measure_chains(args.tasks, args.timeout)
        elif args.measure == "group":
            result = system.measure_group(args.tasks, args.timeout)
        elif args.measure == "rate_limit":
            result = system.measure_rate_limit(args.processes, int(args.rate), args.seconds, args.timeout)
        else:
            result = system.measure_batch(args.tasks, args.timeout)
    except BenchError as exc:
        result = {"error": str(exc)}
    print(json.dumps(result), flush=True)

