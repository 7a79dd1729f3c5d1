"""delayed (this project), in /work/main/.venv."""
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402


from delayed import PyTask, Queue  # noqa: E402


class Delayed(common.System):
    version = version("delayed")
    worker_options: list = []  # the defaults: batches of up to 32 tasks per round trip

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.queue = Queue(common.QUEUE, self.conn)

    def enqueue(self, enqueued_at=None):
        if enqueued_at is None:
            self.queue.enqueue(PyTask("bench_tasks:noop"))
        else:
            self.queue.enqueue(PyTask("bench_tasks:record", [enqueued_at]))

    def enqueue_many(self, count):
        self.queue.enqueue_many([PyTask("bench_tasks:noop") for _ in range(count)])

    def prefill(self, count):
        for start in range(0, count, 10_000):
            self.enqueue_many(min(10_000, count - start))

    def remaining(self):
        return self.count_keys(("llen", common.QUEUE), ("hlen", common.QUEUE + "_processing"))

    def worker_commands(self, processes):
        return [[sys.executable, "-m", "delayed.worker", "--redis-url", self.url, "--queue", common.QUEUE,
                 "--concurrency", str(processes), *self.worker_options, "bench_tasks"]]

    def failed(self):
        return self.conn.llen(common.QUEUE + "_dead")


if __name__ == "__main__":
    common.main(Delayed)
