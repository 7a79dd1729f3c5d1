"""Expiry: a task whose `expires` passed before a worker came to start it is dead-lettered (reason
expired), never called, whatever it names; one that started once is not expired by its retries.

Where the expiry must pass while a task waits, a worker runs with its clock three hours ahead (Debian's
libfaketime, as tests/test_periodic.py's replica): nothing here waits for a clock to pass a moment.
"""
import datetime
import json
import shutil
import time

import pytest

from delayed import FlowStatus, PyTask, Queue, Step, chain
from delayed.wire.task import decode_task

from . import tasks
from .conftest import finish, results, settle_by_a_worker, spawn, tags, wait_for
from .flow_tasks import received
from .test_operating import run
from .test_periodic import LIBFAKETIME
from .test_workflows import drain

HOUR = 3600
PAST = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
"""An expiry long gone: a task enqueued with it is expired at its first claim."""


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


def letters(queue):
    return queue.dead.list()


def late_worker(redis_url, *args):
    """A burst worker on "q" whose clock is three hours ahead: to it, what expires within three hours has."""
    if shutil.which("faketime") is None:
        pytest.skip("faketime is not on the PATH (Debian's faketime, which make test installs): the worker "
                    "with a clock ahead did not run")
    return spawn("delayed.worker", "--queue", "q", "--burst", *args, "tests.tasks", redis_url=redis_url,
                 prefix=["env", LIBFAKETIME, "FAKETIME=+3h"])


def run_late_worker(redis_url):
    status, output = finish(late_worker(redis_url))
    assert status == 0, output
    return output


def due_now(conn, scheduled="q_scheduled"):
    """Every scheduled task of q due at once (as if its delay or backoff had passed)."""
    for member in conn.zrange(scheduled, 0, -1):
        conn.zadd(scheduled, {member: 1})


@pytest.mark.parametrize("threads", [1, 4])
def test_an_expired_task_is_dead_lettered_uncalled_whatever_it_names_and_the_worker_goes_on(conn, queue, run_worker,
                                                                                            threads):
    expired = PyTask(tasks.record, ["expired"], expires=PAST)
    queue.enqueue_many([expired, PyTask("os:system", ["touch /tmp/never"], expires=PAST)])
    queue.enqueue(PyTask(tasks.record, ["fresh"], expires=HOUR))
    run_worker(threads=threads)
    wait_for(lambda: tags(conn) == ["fresh"] and len(letters(queue)) == 2, what="the fresh task and two letters")
    first, second = letters(queue)
    assert (first["reason"], first["func"], second["reason"], second["func"]) == (
        "expired", "tests.tasks:record", "expired", "os:system")  # not not_allowed: the allowlist comes after
    assert first["error"].startswith("it expired at 2000-01-01T00:00:00.000+00:00, ")
    assert decode_task(first["task"]).options.expires_at == PAST.timestamp()
    wait_for(lambda: not conn.llen("q") and not conn.hlen("q_processing"), what="every task settled")


def test_a_tracked_expired_task_ends_dead_and_delayed_dead_list_says_expired(conn, queue, run_worker, redis_server):
    handle = queue.enqueue(PyTask(tasks.record, ["expired"]), expires=PAST, result_ttl=60)
    run_worker()
    wait_for(lambda: handle.status() == "dead", what="the record to end dead")
    info = handle.info()
    assert info.letter and "expired at 2000-01-01" in info.error
    status, out, err = run("dead", "list", "--json", url=redis_server.url)
    assert status == 0, err
    [letter] = json.loads(out)
    assert (letter["reason"], letter["func"], letter["id"]) == ("expired", "tests.tasks:record", info.letter)
    status, out, err = run("dead", "list", url=redis_server.url)
    assert status == 0 and "expired" in out, err
    assert results(conn) == []


def test_expires_counts_from_the_enqueue_in_seconds_or_to_an_aware_datetime(conn, queue, redis_server):
    now = datetime.datetime.now(datetime.timezone.utc)
    before = time.time()
    queue.enqueue(PyTask(tasks.record, ["seconds"]), expires=HOUR)
    queue.enqueue(PyTask(tasks.record, ["moment"], expires=now + datetime.timedelta(hours=1)))
    queue.enqueue_many([PyTask(tasks.record, ["many"])] * 2, expires=HOUR)
    queue.enqueue(PyTask(tasks.record, ["later"], expires=now + datetime.timedelta(hours=5)))
    stamped = [decode_task(blob).options.expires_at for blob in conn.lrange("q", 0, -1)]
    assert all(before + HOUR <= at <= time.time() + HOUR for at in stamped[:1] + stamped[2:4])
    assert stamped[1] == (now + datetime.timedelta(hours=1)).timestamp()
    run_late_worker(redis_server.url)  # three hours on: only the one expiring in five hours runs
    assert tags(conn) == ["later"]
    assert [letter["reason"] for letter in letters(queue)] == ["expired"] * 4


def test_a_delayed_task_expires_if_its_expiry_passes_while_it_waits(conn, queue, redis_server):
    with pytest.raises(ValueError, match="is not after delay"):
        queue.enqueue(PyTask(tasks.record, ["never"]), delay=60, expires=60)
    queue.enqueue(PyTask(tasks.record, ["expired"]), delay=HOUR, expires=2 * HOUR)
    queue.enqueue(PyTask(tasks.record, ["runs"]), delay=HOUR, expires=5 * HOUR)
    assert conn.zcard("q_scheduled") == 2 and not conn.llen("q")
    due_now(conn)
    run_late_worker(redis_server.url)
    assert tags(conn) == ["runs"]
    [letter] = letters(queue)
    assert letter["reason"] == "expired" and "'expired'" in repr(decode_task(letter["task"]).args)


@pytest.mark.parametrize("retry", [dict(max_retries=1, backoff=HOUR), dict(retry=1)])
def test_a_task_that_started_is_not_expired_by_its_retries(conn, queue, redis_server, retry):
    queue.enqueue(PyTask(tasks.fail_until, ["retried", 1], **retry), expires=HOUR)
    settle_by_a_worker(queue)  # its first run, well before its expiry: it fails, and its retry waits
    [retried] = conn.lrange("q", 0, -1) or [member for member in conn.zrange("q_scheduled", 0, -1)]
    assert b"expires_at" not in retried  # the retry's blob carries no expiry
    due_now(conn)
    queue.enqueue(PyTask(tasks.record, ["never started"]), expires=HOUR)
    run_late_worker(redis_server.url)  # three hours on: the retry runs, the task never started expired
    assert tags(conn) == ["retried"]
    [letter] = letters(queue)
    assert letter["reason"] == "expired" and letter["func"] == "tests.tasks:record"


def test_a_workflow_step_that_expires_stops_its_workflow_as_a_dead_step_does(conn, queue):
    expiring = queue.enqueue(chain(PyTask("tests.flow_tasks:plain", [1]),
                                   Step(PyTask("tests.flow_tasks:got", ["middle"], expires=PAST), takes_result=True),
                                   Step(PyTask("tests.flow_tasks:got", ["last"]), takes_result=True)), result_ttl=60)
    dead = queue.enqueue(chain(PyTask("tests.flow_tasks:plain", [1]), PyTask("os:system", ["true"]),
                               PyTask("tests.flow_tasks:got", ["after dead"])), result_ttl=60)
    drain(conn)
    first, middle, last = expiring.steps()
    assert [step.status() for step in expiring.steps()] == [step.status() for step in dead.steps()] == [
        "done", "dead", "waiting"]
    assert expiring.status() == dead.status() == FlowStatus.FAILED
    assert expiring.info().failed == ("q", middle.id)
    assert middle.info().error.startswith("it expired at 2000-01-01")
    assert received(conn, "middle") == received(conn, "last") == []


def test_delayed_enqueue_expires_stamps_the_blob_and_an_expired_one_is_dead_lettered(conn, queue, redis_server):
    before = time.time()
    status, out, err = run("enqueue", "--queue", "q", "--expires", "30", "tests.tasks:record", "fresh",
                           url=redis_server.url)
    assert status == 0, err
    [blob] = conn.lrange("q", 0, -1)
    assert before + 30 <= decode_task(blob).options.expires_at <= time.time() + 30
    status, out, err = run("enqueue", "--queue", "q", "--expires", "2000-01-01T00:00:00+00:00", "tests.tasks:record",
                           "gone", url=redis_server.url)
    assert status == 0, err
    status, output = finish(spawn("delayed.worker", "--queue", "q", "--burst", "tests.tasks", redis_url=redis_server.url))
    assert status == 0, output
    assert tags(conn) == ["fresh"]
    assert "dead-lettered a task in q_dead_letters (expired): it expired at 2000-01-01" in output
    [letter] = letters(queue)
    assert letter["reason"] == "expired"
