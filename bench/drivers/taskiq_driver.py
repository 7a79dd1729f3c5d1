"""taskiq with taskiq-redis's RedisStreamBroker, in bench/.venv-taskiq."""
import os
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402


class Taskiq(common.AsyncSystem):
    version = f"{version('taskiq')} (taskiq-redis {version('taskiq-redis')})"
    has_enqueue_many = False
    # Idle, its RedisStreamBroker worker does not exit on SIGTERM or SIGINT (its receiver waits
    # on a shielded XREADGROUP that the broker re-issues forever): the report shows "stop=NOT
    # graceful", and the bench SIGKILLs it after 1.5 s instead of 15 to save the wait.
    stop_grace = 1.5
    settings = ("`taskiq worker bench_taskiq_tasks:broker --workers 1|2`: its defaults "
                "(`--max-async-tasks 100`, ack when done, plain functions in a default `ThreadPoolExecutor`)")
    io_settings = "`--workers 1 --max-async-tasks N --max-threadpool-threads N`"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        os.environ["BENCH_REDIS_URL"] = url  # read by bench_taskiq_tasks at import
        import bench_taskiq_tasks
        self.tasks = bench_taskiq_tasks
        # makes the consumer group, from the stream's end ("$"): what is sent after it is delivered
        self.run(self.tasks.broker.startup())

    async def async_enqueue(self, task="noop", enqueued_at=None):
        if enqueued_at is None:
            await getattr(self.tasks, common.TASKS[task]).kiq()
        else:
            await self.tasks.record.kiq(enqueued_at)

    def remaining(self):
        # one reply: the group's entries not delivered yet (lag) and delivered but not acked (pending)
        groups = self.conn.xinfo_groups(common.QUEUE)
        return sum((group["lag"] or 0) + group["pending"] for group in groups)

    def worker_commands(self, processes, slots=None):
        taskiq = str(Path(sys.executable).with_name("taskiq"))
        limits = ["--max-async-tasks", str(slots), "--max-threadpool-threads", str(slots)] if slots else []
        return [[taskiq, "worker", "bench_taskiq_tasks:broker", "--workers", str(processes),
                 "--log-level", "WARNING", *limits]]


if __name__ == "__main__":
    common.main(Taskiq)
