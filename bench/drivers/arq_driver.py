"""arq, in bench/.venv-arq: one `arq bench_arq_tasks.WorkerSettings` process per worker."""
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402
from arq import create_pool  # noqa: E402
from arq.connections import RedisSettings  # noqa: E402

# arq polls its queue every poll_delay (default 0.5 s): a poll starts jobs until max_jobs run,
# then the worker sleeps out the poll_delay, whatever is queued, so 10 ms jobs run in waves of
# max_jobs. Measured here with 10 slots: 20 tasks/s at the default 0.5 s, 470/s at 0.01 s,
# 670/s at 0.001 s. Its documented knob for a busy queue is a shorter poll_delay; 0.01 s (the
# length of a task) rather than a 1 ms poll loop when idle.
POLL_DELAY = "0.01"


class Arq(common.AsyncSystem):
    version = version("arq")
    has_enqueue_many = False
    settings = (f"one `arq bench_arq_tasks.WorkerSettings` per process: its defaults (`max_jobs=10`, "
                f"results kept 1 h) but `poll_delay={POLL_DELAY}` (default 0.5 s)")
    io_settings = (f"`max_jobs=N`, `poll_delay={POLL_DELAY}` (at the default 0.5 s: 20 tasks/s with 10 "
                   "slots); a plain function through `run_in_executor` on an N-thread pool made in "
                   "on_startup (arq's docs' way)")

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.pool = self.run(create_pool(RedisSettings.from_dsn(url), default_queue_name=common.QUEUE))

    async def async_enqueue(self, task="noop", enqueued_at=None):
        if enqueued_at is None:
            await self.pool.enqueue_job(common.TASKS[task])
        else:
            await self.pool.enqueue_job("record", enqueued_at)

    def remaining(self):
        return self.count_keys(("zcard", common.QUEUE))  # a job leaves the queue's zset when it ends

    def worker_environ(self, slots=None):
        return {"BENCH_SLOTS": str(slots or ""), "BENCH_ARQ_POLL_DELAY": POLL_DELAY}

    def worker_commands(self, processes, slots=None):
        arq = str(Path(sys.executable).with_name("arq"))
        quiet = ["--custom-log-dict", "bench_arq_tasks.LOG_CONFIG"]  # as the others: warnings only
        return [[arq, "bench_arq_tasks.WorkerSettings", *quiet]] * processes


if __name__ == "__main__":
    common.main(Arq)
