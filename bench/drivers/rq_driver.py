"""rq with SimpleWorker (jobs run in the worker process, no fork per job), in bench/.venv-peers."""
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402
from rq import Queue  # noqa: E402
from rq.registry import StartedJobRegistry  # noqa: E402


class Rq(common.System):
    version = version("rq")
    settings = "`rq worker --worker-class rq.worker.SimpleWorker` per process (jobs run in the worker process)"
    io_settings = "its one slot: one job at a time per process (a coroutine function through `asyncio.run`)"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.queue = Queue(common.QUEUE, connection=self.conn)
        self.started = StartedJobRegistry(queue=self.queue)

    def enqueue(self, enqueued_at=None):
        if enqueued_at is None:
            self.queue.enqueue("bench_tasks.noop")
        else:
            self.queue.enqueue("bench_tasks.record", enqueued_at)

    def enqueue_many(self, count, func="bench_tasks.noop"):
        self.queue.enqueue_many([Queue.prepare_data(func) for _ in range(count)])

    def prefill(self, count, task="noop"):
        for start in range(0, count, 1000):
            self.enqueue_many(min(1000, count - start), f"bench_tasks.{common.TASKS[task]}")

    def remaining(self):
        return self.count_keys(("llen", self.queue.key), ("zcard", self.started.key))

    def worker_commands(self, processes, slots=None):  # one slot each, always
        rq = str(Path(sys.executable).with_name("rq"))
        return [[rq, "worker", "--url", self.url, "--worker-class", "rq.worker.SimpleWorker",
                 "--quiet", common.QUEUE]] * processes

    def failed(self):
        return self.queue.failed_job_registry.count


if __name__ == "__main__":
    common.main(Rq)
