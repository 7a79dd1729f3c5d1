"""bench_tasks as arq jobs, queue "bench"; `arq bench_arq_tasks.WorkerSettings` runs them.

$BENCH_SLOTS sets max_jobs (arq's default: 10). arq runs coroutine functions only; its docs'
way to run a blocking function is `loop.run_in_executor` on a pool made in on_startup, here
one thread per slot.
"""
import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import bench_tasks
from arq.connections import RedisSettings

SLOTS = int(os.environ.get("BENCH_SLOTS") or 10)
POLL_DELAY = float(os.environ.get("BENCH_ARQ_POLL_DELAY") or 0.5)


async def noop(ctx):
    bench_tasks.noop()


async def record(ctx, enqueued_at):
    bench_tasks.record(enqueued_at)


async def sleep10(ctx):
    await asyncio.get_running_loop().run_in_executor(ctx["pool"], bench_tasks.sleep10)


async def asleep10(ctx):
    await bench_tasks.asleep10()


async def startup(ctx):
    ctx["pool"] = ThreadPoolExecutor(SLOTS)


async def shutdown(ctx):
    ctx["pool"].shutdown()


# `arq --custom-log-dict bench_arq_tasks.LOG_CONFIG`: warnings only, as the other systems run (arq
# logs two INFO lines per job otherwise)
LOG_CONFIG = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler", "level": "WARNING"}},
    "loggers": {"arq": {"handlers": ["stderr"], "level": "WARNING"}},
}


class WorkerSettings:
    functions = [noop, record, sleep10, asleep10]
    redis_settings = RedisSettings.from_dsn(os.environ["BENCH_REDIS_URL"])
    queue_name = "bench"
    max_jobs = SLOTS
    poll_delay = POLL_DELAY
    on_startup = startup
    on_shutdown = shutdown
