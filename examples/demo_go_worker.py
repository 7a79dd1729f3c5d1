"""`make demo`'s part for our own Go worker (interop/cmd/ourgoworker, built on go/delayed): a
Python producer enqueues a tracked GoTask, a Go handler runs it, and Python reads what the handler
returned with TaskHandle.result(). Where Go is not available, one line says so and the demo goes on
without it.
"""
import signal
import subprocess
import sys
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for interop/
from delayed import GoTask, Queue, TaskFailedError  # noqa: E402
from interop import gocommands  # noqa: E402

QUEUE = "demo_go_worker"
# func Add(ctx context.Context, a, b int) (int, error), in interop/cmd/ourgoworker/handlers.go
TASK = GoTask("main.Add", [40, 2])
EXPECTED = 42


def run(url: str, conn: redis.Redis) -> bool:
    """Our Go worker runs a tracked GoTask from our producer; True if Python got the handler's
    result and the worker stopped cleanly, or if Go is not available (then it says so in one line)."""
    reason = gocommands.build()
    if reason:
        print(f"demo: the Go part with our Go worker did not run: {reason}")
        return True
    worker = subprocess.Popen(gocommands.our_worker_argv(url, QUEUE, "-log-level", "warn"),
                              stdout=subprocess.DEVNULL)
    try:
        handle = Queue(QUEUE, conn).enqueue(TASK, result_ttl=60)
        print(f"demo: our producer enqueued a tracked GoTask for our Go worker: {TASK.func_path}(40, 2)")
        try:
            result = handle.result(timeout=30)
        except (TaskFailedError, TimeoutError) as exc:
            print(f"demo: TaskHandle.result() raised {exc!r}")
            result = None
        else:
            print(f"demo: TaskHandle.result() read what the Go handler returned: {result!r}")
    finally:
        worker.send_signal(signal.SIGTERM)  # our Go worker's graceful stop
        worker.wait(30)
    print(f"demo: our Go worker exited with {worker.returncode}")
    return result == EXPECTED and worker.returncode == 0
