"""go-delayed's Go worker and Go producer (interop/cmd/goworker, goproducer), fed by our producer.

Runs in the project's virtualenv: the drain and the latency tasks are GoTasks that OUR Python
producer enqueues (so the rows measure go-delayed's worker on what a Python service sends it),
while the enqueue row is go-delayed's own producer, one `Queue.Enqueue` per call, in Go. bench/
run.py builds the commands first (interop/gocommands.py) and skips this system, saying why,
where Go or go-delayed is not available.

Two go-delayed traits shape the hooks: its worker stops gracefully only on SIGHUP, and it never
releases its last task, so `_processing` never empties. The remaining count is therefore the
queue's length alone: a task leaves the list when a worker claims it, and a no-op claimed is a
no-op finished a few microseconds later.
"""
import json
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
import common  # noqa: E402


from delayed import GoTask, Queue  # noqa: E402
from interop import gocommands  # noqa: E402


class GoDelayed(common.System):
    version = gocommands.version()
    stop_signal = signal.SIGHUP  # go-delayed's only stop signal; SIGTERM kills it like a crash
    has_enqueue_many = False  # go-delayed's Queue has no bulk enqueue
    settings = "`interop/bin/goworker` per process: go-delayed's `NewWorker(...).Run()`"
    io_settings = "not measured"
    command = "goworker"  # the worker's command in interop/bin/, whose handlers the tasks name

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.queue = Queue(common.QUEUE, self.conn)

    def measure_enqueue(self, seconds: float):
        """go-delayed's producer in Go: `Queue.Enqueue(NewGoTask("main.Noop"))` in a loop."""
        argv = gocommands.producer_argv(self.url, common.QUEUE, "-rate", f"{seconds}s", "-log-level", "error")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
        if done.returncode:
            raise common.BenchError(f"goproducer: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        return {"rate": result["tasks_per_s"], "tasks": result["tasks"], "seconds": result["seconds"]}

    def enqueue(self, enqueued_at=None):
        # only the latency measurement calls this here; the drain is prefilled below
        self.queue.enqueue(GoTask("main.Elapsed", [common.LATENCY_KEY, enqueued_at]))

    def prefill(self, count, task="noop"):
        for start in range(0, count, 10_000):
            self.queue.enqueue_many([GoTask("main.Noop")] * min(10_000, count - start))

    def remaining(self):
        return self.conn.llen(common.QUEUE)

    def worker_commands(self, processes, slots=None):
        return [gocommands.worker_argv(self.url, common.QUEUE, "-log-level", "warn")] * processes

    def cannot_run(self, task, slots):
        if task != "noop":  # the rows are Python's 10 ms tasks; the Go worker has no 10 ms handler
            return {"na": f"no 10 ms handler in {self.command}"}
        return None


if __name__ == "__main__":
    common.main(GoDelayed)
