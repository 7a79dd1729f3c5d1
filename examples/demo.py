"""`make demo`: a throwaway Redis, a worker, and tasks going through it, good and bad; then
go-delayed's own worker and producer trading tasks with ours (demo_go.py), and our Go worker running
a tracked GoTask whose result Python reads (demo_go_worker.py)."""
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from delayed import GoTask, PyTask, Queue, delayed
from delayed.testing import RedisServer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import demo_go  # noqa: E402
import demo_go_worker  # noqa: E402


def main() -> int:
    with tempfile.TemporaryDirectory() as directory, RedisServer(Path(directory)) as server:
        print(f"demo: throwaway redis-server at {server.url}")
        env = dict(os.environ, DELAYED_REDIS_URL=server.url)
        os.environ["DELAYED_REDIS_URL"] = server.url
        worker = subprocess.Popen([sys.executable, "-m", "delayed.worker", "--queue", "demo", "demo_tasks"],
                                  cwd=HERE, env=env)
        try:
            conn = redis.Redis.from_url(server.url)
            ok = produce(conn)
            ok = demo_go.run(server.url, conn) and ok
            ok = demo_go_worker.run(server.url, conn) and ok
            print("demo: OK" if ok else "demo: FAILED")
            return 0 if ok else 1
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(10)
            print(f"demo: worker exited with {worker.returncode}")


def produce(conn: redis.Redis) -> bool:
    """The Python half: good and bad tasks through our worker; True if each did what it should."""
    import demo_tasks

    queue = Queue("demo", conn)
    greet = delayed(queue)(demo_tasks.greet)
    queue.enqueue(PyTask(demo_tasks.add, [2, 3]))
    greet.delay("Go peers", greeting="Hi")
    queue.enqueue(PyTask("demo_tasks:flaky", ["flaky-calls"], retry=3))
    queue.enqueue_many([PyTask("demo_tasks:add", [i, i]) for i in range(3)])
    print("demo: enqueued 6 good tasks, now 3 bad ones: os:system (not allowed), garbage bytes, a GoTask")
    queue.enqueue(PyTask("os:system", ["echo this never runs"]))
    conn.rpush("demo", b"\xc1 not msgpack")
    conn.rpush("demo_noti", 1)
    queue.enqueue(GoTask("main.Add", [1, 2]))

    deadline = time.monotonic() + 20
    while (conn.llen("demo:log") < 6 or queue.dead.count() < 3) and time.monotonic() < deadline:
        time.sleep(0.05)
    print("demo: what the tasks did:")
    for line in conn.lrange("demo:log", 0, -1):
        print("   ", line.decode())
    print("demo: the dead letters (python -m delayed dead list --queue demo):")
    for entry in queue.dead.list():
        print(f"    {entry['id']}  {entry['reason']:<12} {entry['error']}")
    return conn.llen("demo:log") == 6 and queue.dead.count() == 3


if __name__ == "__main__":
    sys.exit(main())
