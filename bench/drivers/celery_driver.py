"""Celery with its Redis broker (kombu), in bench/.venv-celery."""
import os
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402

# what Celery's docs advise where workers need not talk to each other: a faster start, no chatter
QUIET = ["--without-gossip", "--without-mingle", "--without-heartbeat"]


class Celery(common.System):
    version = version("celery")
    has_enqueue_many = False
    done_at_start = True  # see remaining()
    settings = ("`celery -A bench_celery_tasks worker -c 1|2` with its defaults (prefork pool, "
                "prefetch multiplier 4, early ack), `--without-gossip --without-mingle --without-heartbeat`")
    io_settings = "`-P threads -c N` (prefetch 4N); no coroutine tasks"
    workflow_settings = ("`celery -A bench_celery_tasks worker -c 1 --without-gossip --without-mingle "
                         "--without-heartbeat` (prefork, prefetch 4, early ack); no result backend (results "
                         "ignored), so no chord; `chain(step.s(), step.s(), flow_end.s()).delay()`, each task "
                         "given the result of the one before it")
    environ: dict = {}  # what bench_celery_tasks reads at import, beside BENCH_REDIS_URL

    def __init__(self, url: str) -> None:
        super().__init__(url)
        os.environ.update(self.environ, BENCH_REDIS_URL=url)  # read by bench_celery_tasks at import
        import bench_celery_tasks
        self.tasks = bench_celery_tasks

    def enqueue(self, enqueued_at=None):
        if enqueued_at is None:
            self.tasks.noop.delay()
        else:
            self.tasks.record.delay(enqueued_at)

    def enqueue_chain(self):
        from celery import chain
        chain(self.tasks.step.s(), self.tasks.step.s(), self.tasks.flow_end.s()).delay()

    def enqueue_group(self, members):
        from celery import chord
        chord([self.tasks.step.s() for _ in range(members)])(self.tasks.flow_end.s())

    def prefill(self, count, task="noop"):
        function = getattr(self.tasks, common.TASKS[task])
        for _ in range(count):
            function.delay()

    def remaining(self):
        # waiting in the list, plus delivered but not acked: with Celery's default early ack a task
        # leaves the count when it starts, not when it ends (at most one task's run early)
        return self.count_keys(("llen", common.QUEUE), ("hlen", "unacked"))

    def worker_commands(self, processes, slots=None):
        celery = str(Path(sys.executable).with_name("celery"))
        pool = ["-P", "threads", "-c", str(slots)] if slots else ["-c", str(processes)]
        return [[celery, "-A", "bench_celery_tasks", "worker", "-Q", common.QUEUE, "--loglevel", "WARNING",
                 *QUIET, *pool]]

    def worker_environ(self, slots=None):
        return self.environ

    def cannot_run(self, task, slots):
        if task == "asleep":
            return {"na": "no coroutine tasks"}
        return None


if __name__ == "__main__":
    common.main(Celery)
