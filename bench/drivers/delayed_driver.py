"""delayed (this project), in /work/main/.venv."""
import functools
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402

from delayed import PyTask, Queue  # noqa: E402

RESULT_TTL = 3600  # seconds a tracked task's record (and a workflow's) is kept once it ended


@functools.lru_cache(maxsize=None)
def has_threads_option() -> bool:
    """Whether this delayed's worker has `--threads N` (in-process slots) yet."""
    done = subprocess.run([sys.executable, "-m", "delayed.worker", "--help"], capture_output=True, text=True)
    return "--threads" in done.stdout


class Delayed(common.System):
    version = version("delayed")
    worker_options: list = []  # the defaults: batches of up to 32 tasks per round trip
    settings = "`python -m delayed.worker --concurrency 1|2` (its defaults: `--batch 32`)"
    io_settings = ("`--threads N`: plain functions in a pool of N threads, coroutine functions N at "
                   "a time on the process's one event loop")
    workflow_settings = ("`python -m delayed.worker --concurrency 1` (its defaults); each chain or group "
                         f"enqueued by one `queue.enqueue(..., result_ttl={RESULT_TTL})`, every step tracked, a "
                         "chain's steps after the first `Step(..., takes_result=True)`; the plain tasks by "
                         "`enqueue_many(tasks)`")

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

    def enqueue_chain(self):
        from delayed import Step, chain  # here: bench/ab.py runs this producer on commits from before workflows
        self.queue.enqueue(chain(PyTask("bench_tasks:step"), Step(PyTask("bench_tasks:step"), takes_result=True),
                                 Step(PyTask("bench_tasks:flow_end"), takes_result=True)), result_ttl=RESULT_TTL)

    def enqueue_group(self, members):
        from delayed import group
        self.queue.enqueue(group([PyTask("bench_tasks:step") for _ in range(members)],
                                 callback=PyTask("bench_tasks:flow_end")), result_ttl=RESULT_TTL)

    def enqueue_limited(self, count, rate):
        for start in range(0, count, 10_000):
            self.queue.enqueue_many([PyTask("bench_tasks:started", rate_limit=f"{rate}/s")
                                     for _ in range(min(10_000, count - start))])

    def prefill(self, count, task="noop"):
        func = f"bench_tasks:{common.TASKS[task]}"
        for start in range(0, count, 10_000):
            self.queue.enqueue_many([PyTask(func) for _ in range(min(10_000, count - start))])

    def remaining(self):
        return self.count_keys(("llen", common.QUEUE), ("hlen", common.QUEUE + "_processing"))

    def worker_commands(self, processes, slots=None):
        threads = ["--threads", str(slots)] if slots else []
        return [[sys.executable, "-m", "delayed.worker", "--redis-url", self.url, "--queue", common.QUEUE,
                 "--concurrency", str(processes), *threads, *self.worker_options, "bench_tasks"]]

    def cannot_run(self, task, slots):
        if slots and not has_threads_option():
            return {"skipped": "--threads not available"}
        return None

    def failed(self):
        return self.conn.xlen(common.QUEUE + "_dead_letters")


if __name__ == "__main__":
    common.main(Delayed)
