"""dramatiq with its Redis broker, in bench/.venv-peers."""
import os
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402


class Dramatiq(common.System):
    version = version("dramatiq")
    has_enqueue_many = False
    # Its defaults: 8 threads per process, each consumer prefetching 2 per thread. `--threads 1`
    # (what this bench ran before) leaves a prefetch of 2 and a 5-10 ms backoff sleep whenever both
    # are out, which is that setting's speed, not dramatiq's.
    settings = "`dramatiq bench_dramatiq_tasks --processes 1|2` (its defaults: `--threads 8`, prefetch 16)"
    io_settings = ("`--processes 1 --threads N` (prefetch 2N); async actors through its AsyncIO "
                   "middleware, one event loop per process, each awaited by one of the N threads")

    def __init__(self, url: str) -> None:
        super().__init__(url)
        os.environ["BENCH_REDIS_URL"] = url  # read by bench_dramatiq_tasks at import
        import bench_dramatiq_tasks
        self.tasks = bench_dramatiq_tasks

    def enqueue(self, enqueued_at=None):
        if enqueued_at is None:
            self.tasks.noop.send()
        else:
            self.tasks.record.send(enqueued_at)

    def prefill(self, count, task="noop"):
        actor = getattr(self.tasks, common.TASKS[task])
        for _ in range(count):
            actor.send()

    def remaining(self):
        # a message's body stays in the .msgs hash until a worker acks it
        return self.count_keys(("hlen", f"dramatiq:{common.QUEUE}.msgs"))

    def worker_commands(self, processes, slots=None):
        dramatiq = str(Path(sys.executable).with_name("dramatiq"))
        threads = ["--threads", str(slots)] if slots else []  # else its default, 8
        return [[dramatiq, "bench_dramatiq_tasks", "--processes", str(processes), *threads]]

    def failed(self):
        return self.conn.zcard(f"dramatiq:{common.QUEUE}.XQ")


if __name__ == "__main__":
    common.main(Dramatiq)
