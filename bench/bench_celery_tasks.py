"""bench_tasks as Celery tasks on a Redis broker at $BENCH_REDIS_URL, queue "bench" (no coroutine
tasks: Celery has none). With $BENCH_CELERY_RESULTS set, the app has Celery's Redis result backend
on that Redis too and keeps every task's result, as a chord needs (the workflow section's "Celery,
Redis result backend"); without it, no backend: the other systems store no results either."""
import os

import bench_tasks
from celery import Celery

URL = os.environ["BENCH_REDIS_URL"]
RESULTS = bool(os.environ.get("BENCH_CELERY_RESULTS"))

app = Celery("bench", broker=URL, backend=URL if RESULTS else None)
app.conf.task_default_queue = "bench"
app.conf.task_ignore_result = not RESULTS
app.conf.worker_hijack_root_logger = False
app.conf.broker_connection_retry_on_startup = True

noop = app.task(name="noop")(bench_tasks.noop)
record = app.task(name="record")(bench_tasks.record)
sleep10 = app.task(name="sleep10")(bench_tasks.sleep10)
step = app.task(name="step")(bench_tasks.step)
flow_end = app.task(name="flow_end")(bench_tasks.flow_end)
