"""bench_tasks as huey tasks on a RedisHuey at $BENCH_REDIS_URL, queue "bench" (no coroutine tasks:
huey has none)."""
import os

import bench_tasks
from huey import RedisHuey

huey = RedisHuey("bench", url=os.environ["BENCH_REDIS_URL"])

noop = huey.task()(bench_tasks.noop)
record = huey.task()(bench_tasks.record)
sleep10 = huey.task()(bench_tasks.sleep10)
