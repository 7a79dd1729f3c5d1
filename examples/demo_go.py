"""`make demo`'s Go half: go-delayed's own worker and producer (interop/cmd/) beside ours.

Our Python producer enqueues GoTasks that a real go-delayed worker runs (its handlers record
what they received, Go types included, in a Redis list), and go-delayed's producer enqueues a
PyTask that our worker runs. Where Go or go-delayed's module is not available, one line says
so and the demo goes on without it.
"""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for interop/
from delayed import GoTask, Queue  # noqa: E402
from interop import gocommands  # noqa: E402

RESULTS = "demo:go"  # goworker's -results list
GO_TASKS = [
    GoTask("main.Several", [3, "from Python", 2.5]),  # func(n int, s string, f float64)
    GoTask("main.Struct", [1, 2, "origin"]),            # func(v Point): a struct is the list of its fields
    GoTask("main.MapInt", {"apples": 3}),               # func(v map[string]int)
]
FROM_GO = "add(40, 2) = 42"  # what demo_tasks:add logs for the PyTask go-delayed's producer sends


def run(url: str, conn: redis.Redis) -> bool:
    """The Go half against the demo's Redis and Python worker (on queue "demo"); True if it all
    happened, or if Go is not available (then it says so in one line)."""
    reason = gocommands.build()
    if reason:
        print(f"demo: the Go half (go-delayed's worker and producer) is skipped: {reason}")
        return True
    worker = subprocess.Popen(gocommands.worker_argv(url, "demo_go", "-results", RESULTS,
                                                     "-dequeue-timeout", "100ms", "-log-level", "warn"),
                              stdout=subprocess.DEVNULL)
    try:
        Queue("demo_go", conn).enqueue_many(GO_TASKS)
        print(f"demo: our producer enqueued {len(GO_TASKS)} GoTasks for a go-delayed worker, and "
              "go-delayed's producer a PyTask for ours: NewPyTask(\"demo_tasks:add\", [40, 2], nil)")
        subprocess.run(gocommands.producer_argv(url, "demo", "-kind", "py", "-func", "demo_tasks:add",
                                                "-args", "[40, 2]", "-log-level", "warn"),
                       check=True, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not done(conn) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGHUP)  # go-delayed's only stop signal
        worker.wait(10)
    print("demo: what the go-delayed worker's handlers received:")
    for record in map(json.loads, conn.lrange(RESULTS, 0, -1)):
        print(f"    main.{record['func']}({', '.join(map(go_value, record['args']))})")
    ran = FROM_GO.encode() in conn.lrange("demo:log", 0, -1)
    print(f"demo: our worker ran go-delayed's PyTask: {FROM_GO if ran else 'NOT RUN'}")
    print(f"demo: go-delayed worker exited with {worker.returncode}")
    return done(conn) and worker.returncode == 0


def done(conn: redis.Redis) -> bool:
    return conn.llen(RESULTS) == len(GO_TASKS) and FROM_GO.encode() in conn.lrange("demo:log", 0, -1)


def go_value(arg: dict) -> str:
    """One received argument in Go syntax: `int(3)`, or `%#v` alone when it names its type."""
    return arg["go"] if arg["go"].startswith(arg["type"]) else f"{arg['type']}({arg['go']})"
