"""saq with its Redis queue, in bench/.venv-saq."""
import os
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402


class Saq(common.AsyncSystem):
    version = version("saq")
    has_enqueue_many = False
    # `saq --workers 2` runs a worker in its own process and one in a child that it never signals
    # (and waits for on exit): stopped as from a terminal, the signal to the whole group
    signal_group = True
    settings = "`saq bench_saq_tasks.settings --workers 1|2 --quiet`: its defaults (`concurrency=10`)"
    io_settings = ("`concurrency=N`; a plain function in saq's own thread pool, `ThreadPoolExecutor()`: "
                   "min(32, CPUs + 4) threads, 6 here, not settable")

    def __init__(self, url: str) -> None:
        super().__init__(url)
        os.environ["BENCH_REDIS_URL"] = url  # read by bench_saq_tasks at import
        import bench_saq_tasks
        self.queue = bench_saq_tasks.queue

    async def async_enqueue(self, task="noop", enqueued_at=None):
        if enqueued_at is None:
            await self.queue.enqueue(common.TASKS[task])
        else:
            await self.queue.enqueue("record", enqueued_at=enqueued_at)

    def remaining(self):
        # every job not finished yet, queued or active, is in this sorted set
        return self.count_keys(("zcard", self.queue.namespace("incomplete")))

    def worker_environ(self, slots=None):
        return {"BENCH_SLOTS": str(slots or "")}

    def worker_commands(self, processes, slots=None):
        saq = str(Path(sys.executable).with_name("saq"))
        return [[saq, "bench_saq_tasks.settings", "--workers", str(processes), "--quiet"]]

    def failed(self):
        return 0


if __name__ == "__main__":
    common.main(Saq)
