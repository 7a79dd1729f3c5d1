"""bench_tasks as dramatiq actors on a Redis broker at $BENCH_REDIS_URL, queue "bench"."""
import os

import bench_tasks
import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import AsyncIO

broker = RedisBroker(url=os.environ["BENCH_REDIS_URL"])
broker.add_middleware(AsyncIO())  # what async actors need (dramatiq's docs: "Async Actors")
dramatiq.set_broker(broker)

noop = dramatiq.actor(bench_tasks.noop, queue_name="bench")
record = dramatiq.actor(bench_tasks.record, queue_name="bench")
sleep10 = dramatiq.actor(bench_tasks.sleep10, queue_name="bench")
asleep10 = dramatiq.actor(bench_tasks.asleep10, queue_name="bench")
