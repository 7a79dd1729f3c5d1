"""delayed.integrations.sentry: a real worker process with a real sentry-sdk reports its tasks' exceptions, over
HTTP, to a SentryReceiver the test started."""
import os

import pytest

from delayed import PyTask, Queue
from delayed.testing import SentryReceiver

from .conftest import WAIT, spawn, stop, wait_for


@pytest.fixture
def sentry():
    with SentryReceiver() as receiver:
        yield receiver


def start_worker(redis_server, sentry):
    os.environ["SENTRY_DSN"] = sentry.dsn  # spawn passes the environment on
    try:
        return spawn("delayed.worker", "--queue", "q", "--keep-alive-timeout", "5", "--middleware",
                     "tests.sentry_setup:sentry", "tests.tasks", "tests.integration_tasks", redis_url=redis_server.url)
    finally:
        del os.environ["SENTRY_DSN"]


def tags(event) -> dict:
    return {name: value for name, value in event["tags"].items() if name.startswith("delayed.")}


def test_a_worker_reports_each_failed_run_tagged_with_the_task_and_nothing_for_a_task_that_succeeds(
        conn, redis_server, sentry):
    queue = Queue("q", conn)
    queue.enqueue(PyTask("tests.tasks:add", [1, 2]))
    handle = queue.enqueue(PyTask("tests.integration_tasks:fail", ["boom"], max_retries=1, backoff=0, result_ttl=60))
    worker = start_worker(redis_server, sentry)
    try:
        events = wait_for(lambda: len(sentry.events()) >= 2 and sentry.events(), WAIT, "two events")
        assert handle.info().status == "failed"
    finally:
        stop(worker)

    assert len(sentry.events()) == 2  # add returned: no event of its own
    for attempt, event in enumerate(events):
        assert tags(event) == {"delayed.func": "tests.integration_tasks:fail", "delayed.task_id": handle.id,
                               "delayed.queue": "q", "delayed.attempt": str(attempt), "delayed.max_retries": "1"}
        assert event["transaction"] == "tests.integration_tasks:fail"
        [exception] = event["exception"]["values"]
        assert (exception["type"], exception["value"]) == ("ValueError", "boom fails")
        assert exception["mechanism"] == {"type": "delayed", "handled": False}
        context = event["contexts"]["delayed"]
        assert context["func"] == "tests.integration_tasks:fail" and context["worker_id"].startswith("delayed-")


def test_what_a_task_reports_itself_carries_its_own_tags_not_those_of_the_run_before(conn, redis_server, sentry):
    queue = Queue("q", conn)
    queue.enqueue(PyTask("tests.integration_tasks:fail", ["first"], max_retries=0, result_ttl=60))
    queue.enqueue(PyTask("tests.integration_tasks:report", ["hello"]))
    worker = start_worker(redis_server, sentry)
    try:
        failed, reported = wait_for(lambda: len(sentry.events()) >= 2 and sentry.events(), WAIT, "two events")
    finally:
        stop(worker)
    assert tags(failed)["delayed.func"] == "tests.integration_tasks:fail" and "delayed.task_id" in tags(failed)
    assert reported["message"] == "hello"
    assert tags(reported) == {"delayed.func": "tests.integration_tasks:report", "delayed.queue": "q",
                              "delayed.attempt": "0"}
