"""bench_tasks as Celery tasks on a Redis broker at $BENCH_REDIS_URL, queue "bench" (no coroutine
tasks: Celery has none)."""
import os

import bench_tasks
from celery import Celery

app = Celery("bench", broker=os.environ["BENCH_REDIS_URL"])
app.conf.task_default_queue = "bench"
app.conf.task_ignore_result = True  # no result backend: the other systems store no results either
app.conf.worker_hijack_root_logger = False
app.conf.broker_connection_retry_on_startup = True

noop = app.task(name="noop")(bench_tasks.noop)
record = app.task(name="record")(bench_tasks.record)
sleep10 = app.task(name="sleep10")(bench_tasks.sleep10)
