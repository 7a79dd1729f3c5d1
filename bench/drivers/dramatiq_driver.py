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

    def remaining(self):
        # a message's body stays in the .msgs hash until a worker acks it
        return self.count_keys(("hlen", f"dramatiq:{common.QUEUE}.msgs"))

    def worker_commands(self, processes):
        dramatiq = str(Path(sys.executable).with_name("dramatiq"))
        return [[dramatiq, "bench_dramatiq_tasks", "--processes", str(processes), "--threads", "1"]]

    def failed(self):
        return self.conn.zcard(f"dramatiq:{common.QUEUE}.XQ")


if __name__ == "__main__":
    common.main(Dramatiq)
