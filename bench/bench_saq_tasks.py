"""bench_tasks as saq jobs, queue "bench"; `saq bench_saq_tasks.settings` runs them.

$BENCH_SLOTS sets concurrency (saq's default: 10). saq runs plain functions in its worker's
thread pool (`ThreadPoolExecutor()`: min(32, CPUs + 4) threads) and coroutines on its loop.
"""
import os

import bench_tasks
from saq import Queue

queue = Queue.from_url(os.environ["BENCH_REDIS_URL"], name="bench")


async def noop(ctx):
    bench_tasks.noop()


async def record(ctx, *, enqueued_at):
    bench_tasks.record(enqueued_at)


def sleep10(ctx):
    bench_tasks.sleep10()


async def asleep10(ctx):
    await bench_tasks.asleep10()


settings = {
    "queue": queue,
    "functions": [noop, record, sleep10, asleep10],
    "concurrency": int(os.environ.get("BENCH_SLOTS") or 10),
}
