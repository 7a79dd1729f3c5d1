"""Hostile input: random bytes and random msgpack never crash the decoder or stall a worker.

DELAYED_FUZZ_EXAMPLES sets how many blobs each fuzz test tries (default 1000).
"""
import os
import threading

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delayed import PyTask, Queue, Worker
from delayed.dead_letter import REASONS, parse
from delayed.errors import MalformedTaskError
from delayed.holding import Bury, Release
from delayed.task import GoTask, decode_task

from .conftest import results, wait_for

EXAMPLES = int(os.environ.get("DELAYED_FUZZ_EXAMPLES", 1000))

integers = st.integers(min_value=-(2**63), max_value=2**64 - 1)
scalars = st.none() | st.booleans() | integers | st.floats() | st.text(max_size=20) | st.binary(max_size=20)
values = st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                      | st.dictionaries(st.text(max_size=5) | integers, children, max_size=4), max_leaves=12)
task_like = st.tuples(st.sampled_from(["tests.tasks:record", "os:system", "m:f", "main.F", ""]),
                      values, values, values, values).flatmap(lambda t: st.integers(1, 5).map(lambda n: list(t[:n])))
blobs = (st.binary(max_size=64) | values.map(msgpack.packb) | task_like.map(msgpack.packb)
         | task_like.map(lambda fields: msgpack.packb(fields)[:-1]))


@given(blobs)
@settings(max_examples=EXAMPLES, deadline=None)
def test_decoding_anything_gives_a_task_or_a_malformed_task_error(blob):
    try:
        task = decode_task(blob)
    except MalformedTaskError as exc:
        assert exc.reason == "malformed" and str(exc)
    else:
        assert isinstance(task, (PyTask, GoTask)) and task.serialize() == blob


@given(blobs)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_worker_settles_anything_without_raising(conn, blob):
    worker = Worker(Queue("fuzz", conn), ["tests.tasks"])
    settlement = worker.execute(blob)
    if isinstance(settlement, Bury):
        entry = parse(b"0-0", {field.encode(): value for field, value in settlement.letter.items()})
        assert entry["reason"] in REASONS and entry["task"] == blob and "\n" not in entry["error"]
    else:
        assert isinstance(settlement, Release)  # a random blob that names record() with fitting arguments ran


@given(st.lists(blobs, min_size=30, max_size=30))
@settings(max_examples=max(3, EXAMPLES // 100), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
def test_a_queue_full_of_garbage_is_drained_into_dead_letters(conn, garbage):
    conn.flushall()
    queue = Queue("fuzz", conn, dequeue_timeout=0.05)
    conn.rpush("fuzz", *garbage)
    conn.rpush("fuzz_noti", *[1] * len(garbage))
    queue.enqueue(PyTask("tests.tasks:record", ["sentinel"]))
    worker = Worker(queue, ["tests.tasks"], keep_alive_interval=1)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: "('sentinel', (), {})" in results(conn), what="the task after the garbage")
        wait_for(lambda: conn.llen("fuzz") == 0 and conn.hlen("fuzz_processing") == 0, what="drained")
    finally:
        worker.stop()
        thread.join(10)
    dead = [letter["task"] for letter in queue.dead_letters()]
    ran = len(results(conn)) - 1  # random blobs that happened to call record() with fitting arguments
    assert len(dead) + ran == len(garbage)
    assert all(blob in garbage for blob in dead)
