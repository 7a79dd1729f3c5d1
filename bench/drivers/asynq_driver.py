"""Asynq (github.com/hibiken/asynq), the Go task queue: interop/cmd/asynqworker and asynqproducer.

Runs in the project's virtualenv, but every task is Asynq's own: its producer, asynq.Client in Go
(asynqproducer), enqueues them, since Asynq has no Python client and its tasks are protobuf
messages in keys of its own. bench/run.py builds the commands first (interop/gocommands.py) and
skips this system, saying why, where Go or Asynq's module is not available.

The remaining count is Asynq's pending list plus its active list: a dequeued task moves from the
first to the second, and leaves it when its handler returns (with no Retention, the default, its
record is deleted then).
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
import common  # noqa: E402

from interop import gocommands  # noqa: E402

KEYS = f"asynq:{{{common.QUEUE}}}:"  # Asynq's keys of the queue: KEYS + "pending", "active", ...
PREFILL_GOROUTINES = 16  # the prefill's asynq.Client calls in flight (not timed)


class Asynq(common.System):
    version = f"{gocommands.dependency('asynqworker', gocommands.ASYNQ)} ({gocommands.toolchain('asynqworker')})"
    stop_signal = signal.SIGTERM  # Server.Run's graceful stop
    has_enqueue_many = False  # asynq.Client enqueues one task per call
    settings = ("`interop/bin/asynqworker` per process: `asynq.NewServer` at its default `Concurrency`, "
                f"the number of CPUs ({len(os.sched_getaffinity(0))} here), serving one queue; an idle server "
                "looks for tasks every `TaskCheckInterval`, by default 1 s, which its start latency shows")
    io_settings = "not measured"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.latency_producer = None

    def measure_enqueue(self, seconds: float):
        """asynq.Client.Enqueue(asynq.NewTask("noop", nil)) in a Go loop."""
        argv = gocommands.asynq_producer_argv(self.url, common.QUEUE, "-rate", f"{seconds}s")
        result = json.loads(self._run(argv, seconds + 60))
        return {"rate": result["tasks_per_s"], "tasks": result["tasks"], "seconds": result["seconds"]}

    def measure_latency(self, rate: float, count: int, timeout: float):
        """As every system's, each task enqueued by one asynqproducer reading the times from its stdin."""
        argv = gocommands.asynq_producer_argv(self.url, common.QUEUE, "-latency-key", common.LATENCY_KEY)
        with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True) as producer:
            self.latency_producer = producer
            try:
                return super().measure_latency(rate, count, timeout)
            finally:
                producer.stdin.close()

    def enqueue(self, enqueued_at=None):
        # only the latency measurement calls this here: one line, one elapsed task
        self.latency_producer.stdin.write(f"{enqueued_at!r}\n")
        self.latency_producer.stdin.flush()

    def prefill(self, count, task="noop"):
        argv = gocommands.asynq_producer_argv(self.url, common.QUEUE, "-n", str(count),
                                              "-concurrency", str(PREFILL_GOROUTINES))
        self._run(argv, 120)

    def remaining(self):
        return self.count_keys(("llen", KEYS + "pending"), ("llen", KEYS + "active"))

    def failed(self):
        return self.count_keys(("zcard", KEYS + "retry"), ("zcard", KEYS + "archived"))

    def worker_commands(self, processes, slots=None):
        return [gocommands.asynq_worker_argv(self.url, common.QUEUE, "-log-level", "warn")] * processes

    def cannot_run(self, task, slots):
        if task != "noop":
            return {"na": "no 10 ms handler in asynqworker"}
        return None

    @staticmethod
    def _run(argv, timeout):
        """Run an asynqproducer to its end; its last line."""
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if done.returncode:
            raise common.BenchError(f"asynqproducer: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        return done.stdout.strip().splitlines()[-1]


if __name__ == "__main__":
    common.main(Asynq)
