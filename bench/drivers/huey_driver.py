"""huey with RedisHuey, in bench/.venv-huey."""
import os
import signal
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402


class Huey(common.System):
    version = version("huey")
    stop_signal = signal.SIGINT  # huey_consumer's graceful stop; SIGTERM stops at once
    has_enqueue_many = False
    done_at_start = True  # see remaining()
    settings = ("`huey_consumer bench_huey_tasks.huey`: its defaults (`-w 1 -k thread`, a blocking "
                "BRPOP) for 1 process; `-w 2 -k process` for 2")
    io_settings = "`-w N -k thread`: N worker threads in the consumer's process; no coroutine tasks"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        os.environ["BENCH_REDIS_URL"] = url  # read by bench_huey_tasks at import
        import bench_huey_tasks
        self.tasks = bench_huey_tasks

    def enqueue(self, enqueued_at=None):
        if enqueued_at is None:
            self.tasks.noop()
        else:
            self.tasks.record(enqueued_at)

    def prefill(self, count, task="noop"):
        function = getattr(self.tasks, common.TASKS[task])
        for _ in range(count):
            function()

    def remaining(self):
        # huey keeps no record of a task a consumer popped: the running ones are not counted
        return self.count_keys(("llen", self.tasks.huey.storage.queue_key))

    def worker_commands(self, processes, slots=None):
        consumer = str(Path(sys.executable).with_name("huey_consumer"))
        if slots:
            workers = ["-w", str(slots), "-k", "thread"]
        else:
            workers = ["-w", str(processes), "-k", "thread" if processes == 1 else "process"]
        return [[consumer, "bench_huey_tasks.huey", *workers, "--quiet"]]

    def cannot_run(self, task, slots):
        if task == "asleep":
            return {"na": "no coroutine tasks"}
        return None


if __name__ == "__main__":
    common.main(Huey)
