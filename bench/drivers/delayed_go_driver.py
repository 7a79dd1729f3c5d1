"""Our Go worker (interop/cmd/ourgoworker, on go/delayed), fed by our Python producer.

The tasks are go-delayed's driver's, GoTasks `main.Noop` and `main.Elapsed` that OUR Python
producer enqueues, so the rows set our Go worker beside go-delayed's on the same work. It holds
and releases tasks as our Python worker does, on the same keys: the remaining count and the
failures are read as delayed's driver reads them. bench/run.py builds the commands first
(interop/gocommands.py) and skips this system, saying why, where Go or a module is not available.
"""
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
import common  # noqa: E402
from delayed_driver import Delayed  # noqa: E402
from godelayed_driver import GoDelayed  # noqa: E402

from interop import gocommands  # noqa: E402

# the enqueue rows' cells: this column measures our Go worker, on tasks our Python producer enqueued
NO_PRODUCER = "a worker's column: its tasks come from our Python producer"


class DelayedGo(GoDelayed):
    version = f"{Delayed.version} ({gocommands.toolchain('ourgoworker')})"  # versioned with the Python package
    command = "ourgoworker"
    stop_signal = signal.SIGTERM  # our Go worker stops gracefully on SIGTERM, SIGINT and SIGHUP
    settings = ("`interop/bin/ourgoworker` per process: go/delayed's `NewWorker(NewQueue(..., NewRedisPool(...)))"
                ".Run()` at its defaults: one task at a time (`Concurrency` 1), claims of up to 32 (`Batch` 32)")

    remaining = Delayed.remaining  # waiting + held, as our Python worker holds them
    failed = Delayed.failed

    def measure_enqueue(self, seconds: float):
        return {"na": NO_PRODUCER}

    def measure_enqueue_many(self, seconds: float, batch: int):
        return {"na": NO_PRODUCER}

    def worker_commands(self, processes, slots=None):
        return [gocommands.our_worker_argv(self.url, common.QUEUE, "-log-level", "warn")] * processes


if __name__ == "__main__":
    common.main(DelayedGo)
