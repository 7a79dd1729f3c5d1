"""keakon/delayed 1.2.0b2, in bench/.venv-keakon (it also imports as `delayed`).

Run as `keakon_driver.py worker URL` it is one keakon worker process.
"""
import signal
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402
import redis  # noqa: E402

from delayed.queue import Queue  # noqa: E402
from delayed.task import PyTask  # noqa: E402
from delayed.worker import Worker  # noqa: E402


class Keakon(common.System):
    version = version("delayed")
    stop_signal = signal.SIGHUP  # keakon's Worker stops gracefully only on SIGHUP
    has_enqueue_many = False
    settings = "`Worker(queue).run()` per process"
    io_settings = "its one slot: one task at a time per process"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.queue = Queue(name=common.QUEUE, conn=self.conn)

    def enqueue(self, enqueued_at=None):
        if enqueued_at is None:
            self.queue.enqueue(PyTask(func="bench_tasks:noop"))
        else:
            self.queue.enqueue(PyTask(func="bench_tasks:record", args=(enqueued_at,)))

    def prefill(self, count, task="noop"):
        # exactly the two RPUSHes of keakon's Queue.enqueue, pipelined: it has no bulk call
        blob = PyTask(func=f"bench_tasks:{common.TASKS[task]}").serialize()
        for start in range(0, count, 10_000):
            size = min(10_000, count - start)
            with self.conn.pipeline() as pipe:
                pipe.rpush(common.QUEUE, *[blob] * size)
                pipe.rpush(common.QUEUE + "_noti", *["1"] * size)
                pipe.execute()

    def remaining(self):
        return self.count_keys(("llen", common.QUEUE), ("hlen", common.QUEUE + "_processing"))

    def worker_commands(self, processes, slots=None):
        return [[sys.executable, __file__, "worker", self.url]] * processes  # one slot each, always

    def cannot_run(self, task, slots):
        if task == "asleep":  # it would call the function and drop the coroutine, never awaited
            return {"na": "runs no coroutine functions"}
        return None


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        Worker(queue=Queue(name=common.QUEUE, conn=redis.Redis.from_url(sys.argv[2]))).run()
    else:
        common.main(Keakon)
