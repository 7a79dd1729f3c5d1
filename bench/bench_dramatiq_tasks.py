"""bench_tasks as dramatiq actors on a Redis broker at $BENCH_REDIS_URL, queue "bench"."""
import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

import bench_tasks

dramatiq.set_broker(RedisBroker(url=os.environ["BENCH_REDIS_URL"]))

noop = dramatiq.actor(bench_tasks.noop, queue_name="bench")
record = dramatiq.actor(bench_tasks.record, queue_name="bench")
