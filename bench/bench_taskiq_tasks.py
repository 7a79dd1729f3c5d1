"""bench_tasks as taskiq tasks on taskiq-redis's RedisStreamBroker (the one that acknowledges:
a killed worker's messages are claimed again), stream "bench"."""
import os

import bench_tasks
from taskiq_redis import RedisStreamBroker

broker = RedisStreamBroker(url=os.environ["BENCH_REDIS_URL"], queue_name="bench")

noop = broker.task(task_name="noop")(bench_tasks.noop)
record = broker.task(task_name="record")(bench_tasks.record)
sleep10 = broker.task(task_name="sleep10")(bench_tasks.sleep10)
asleep10 = broker.task(task_name="asleep10")(bench_tasks.asleep10)
