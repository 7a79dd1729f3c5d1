"""delayed with every task tracked (enqueued with result_ttl): what the record costs the producer,
which writes it, and the worker, whose claim and release round trips carry its status and result."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402
from delayed_driver import RESULT_TTL, Delayed  # noqa: E402

from delayed import PyTask  # noqa: E402


class DelayedTracked(Delayed):
    settings = ("`python -m delayed.worker --concurrency 1|2`, every task enqueued with "
                f"`result_ttl={RESULT_TTL}`")
    io_settings = "not in the io rows: delayed's column measures the slots"
    workflow_settings = f"as delayed's; the plain tasks by `enqueue_many(tasks, result_ttl={RESULT_TTL})`"

    def enqueue(self, enqueued_at=None):
        if enqueued_at is None:
            self.queue.enqueue(PyTask("bench_tasks:noop"), result_ttl=RESULT_TTL)
        else:
            self.queue.enqueue(PyTask("bench_tasks:record", [enqueued_at]), result_ttl=RESULT_TTL)

    def enqueue_many(self, count):
        self.queue.enqueue_many([PyTask("bench_tasks:noop") for _ in range(count)], result_ttl=RESULT_TTL)

    def prefill(self, count, task="noop"):
        func = f"bench_tasks:{common.TASKS[task]}"
        for start in range(0, count, 10_000):
            self.queue.enqueue_many([PyTask(func) for _ in range(min(10_000, count - start))], result_ttl=RESULT_TTL)


if __name__ == "__main__":
    common.main(DelayedTracked)
