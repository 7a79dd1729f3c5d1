"""Hostile input: any bytes a producer can put in a queue, and any letter or record built from them.

Decoding and describing never raise past their boundary, and every reader of a blob keeps running:
the worker and the sweeper (moving due tasks too), the `delayed` command, the metrics exporter and the
dashboard. DELAYED_FUZZ_EXAMPLES sets how many blobs each fuzz test tries (default 1000; the test
that drives every reader tries a tenth as many).
"""
import json
import os
import threading

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delayed import PyTask, Queue, Sweeper, Worker
from delayed.errors import MalformedTaskError
from delayed.ops import admin
from delayed.ops.cli import main as delayed_main
from delayed.ops.metrics.queues import QueueCollector
from delayed.wire import preview
from delayed.wire.dead_letter import REASONS, parse, record
from delayed.wire.keys import new_worker_id
from delayed.wire.task import GoTask, decode_task
from delayed.worker.holding import Bury, Release

from .conftest import WAIT, results, wait_for

EXAMPLES = int(os.environ.get("DELAYED_FUZZ_EXAMPLES", 1000))
GO_WORKER = "0123456789abcdef0123456789abcdef"

integers = st.integers(min_value=-(2**63), max_value=2**64 - 1)
extensions = st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=8))
timestamps = st.builds(msgpack.Timestamp, st.integers(-(2**63), 2**63 - 1), st.integers(0, 999_999_999))
scalars = (st.none() | st.booleans() | integers | st.floats() | st.text(max_size=20) | st.binary(max_size=20)
           | extensions | timestamps)
values = st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                      | st.dictionaries(st.text(max_size=5) | integers, children, max_size=4), max_leaves=12)
task_like = st.tuples(st.sampled_from(["tests.tasks:record", "os:system", "m:f", "main.F", ""]),
                      values, values, values, values).flatmap(lambda t: st.integers(1, 5).map(lambda n: list(t[:n])))


def _nested(depth: int, array: bool) -> bytes:
    """depth arrays (or maps of one key) inside each other, nil innermost: past what repr and json take."""
    return (b"\x91" if array else b"\x81\xa1a") * depth + b"\xc0"


deep = st.builds(_nested, st.integers(1, 1100), st.booleans())
huge = st.sampled_from([70_000, 2_000_000]).map(lambda size: msgpack.packb(["tests.tasks:record", ["x" * size]]))
bad_utf8 = st.binary(min_size=1, max_size=30).map(lambda data: bytes([0xD9, len(data)]) + data)  # a str8 of any bytes
blobs = (st.binary(max_size=64) | values.map(msgpack.packb) | task_like.map(msgpack.packb)
         | task_like.map(lambda fields: msgpack.packb(fields)[:-1]))
hostile = (blobs | deep | deep.map(lambda args: b"\x92\xb2tests.tasks:record" + args)
           | deep.map(lambda kwargs: b"\x93\xb2tests.tasks:record\x90" + kwargs) | huge
           | bad_utf8.map(lambda text: b"\x92" + text + b"\x90")
           | st.tuples(values, values).map(lambda args: msgpack.packb(["tests.tasks:always_fail", list(args)])))


@given(hostile)
@settings(max_examples=EXAMPLES, deadline=None)
def test_decoding_anything_gives_a_task_or_a_malformed_task_error(blob):
    try:
        task = decode_task(blob)
    except MalformedTaskError as exc:
        assert exc.reason == "malformed" and str(exc) and len(str(exc)) < 300
    else:
        assert isinstance(task, (PyTask, GoTask)) and task.serialize() == blob
        assert len(repr(task)) < 500


@given(hostile)
@settings(max_examples=EXAMPLES, deadline=None)
def test_a_preview_of_anything_is_small_json(blob):
    shown = json.dumps(admin.describe_task(blob))  # JSON all the way down: no NaN, no bytes, no ext
    assert len(shown) < 60_000
    json.loads(shown)
    assert len(preview.brief(msgpack.unpackb(blob, strict_map_key=False) if _is_msgpack(blob) else blob)) <= 80


def _is_msgpack(blob: bytes) -> bool:
    try:
        msgpack.unpackb(blob, strict_map_key=False)
    except Exception:
        return False
    return True


@given(hostile)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_worker_settles_anything_without_raising(conn, blob):
    worker = Worker(Queue("fuzz", conn, max_task_size=3_000_000), ["tests.tasks"])
    settlement = worker.execute(blob)
    if isinstance(settlement, Bury):
        entry = parse(b"0-0", {field.encode(): value for field, value in settlement.letter.items()})
        assert entry["reason"] in REASONS and entry["task"] == blob and "\n" not in entry["error"]
        assert len(entry["error"]) <= 1000
    else:
        assert isinstance(settlement, Release)  # a blob that names record() with fitting arguments ran


@pytest.fixture(scope="module")
def dashboard_client(redis_server):
    """The dashboard's app in this process (Flask's test client), on the session's Redis."""
    import redis

    from delayed.dashboard import create_app

    app = create_app(redis.Redis.from_url(redis_server.url), sample_every=3600)
    yield app.test_client()
    app.extensions["delayed_sampler"].stop()


@given(hostile)
@settings(max_examples=max(20, EXAMPLES // 10), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_every_reader_survives_any_blob_where_readers_find_blobs(conn, redis_server, capsys, dashboard_client, blob):
    """The blob at the head of the queue and of the scheduled set, held by a live go-delayed worker and by
    a dead worker of ours, as a dead letter's task and as its record, and as a tracked task's result: every
    command, page and scrape answers, and the sweeper goes on, moving due tasks too."""
    conn.flushall()
    queue = Queue("h", conn)
    conn.rpush("h", blob)
    conn.rpush("h_noti", 1)
    conn.zadd("h_scheduled", {b"\0" * 8 + blob: 4_102_444_800})  # due in 2100
    conn.zadd("h_scheduled", {b"\1" * 8 + blob: 1})               # due: moving due tasks takes it
    conn.hset("h_processing", GO_WORKER, blob)
    conn.set(GO_WORKER, 1)
    letter = conn.xadd("h_dead_letters", record(reason="malformed", error="x", blob=blob, queue="h", worker=None))
    odd = conn.xadd("h_dead_letters", {"record": blob, "task": blob})
    conn.hset("h_task:" + "0" * 32, mapping={"status": "done", "func": "m:f", "result": blob, "ttl": 60,
                                             "error": blob, "note": blob, "attempts": blob, "enqueued": blob})
    for argv in (["stats"], ["stats", "--json"], ["workers", "--json"], ["dead", "list", "--queue", "h"],
                 ["dead", "list", "--queue", "h", "--json"], ["scheduled", "list", "--queue", "h"],
                 ["scheduled", "list", "--queue", "h", "--json"], ["task", "0" * 32, "--queue", "h"],
                 ["task", "0" * 32, "--queue", "h", "--json"],
                 *(["dead", "show", "--queue", "h", letter_id.decode(), *json_flag]
                   for letter_id in (letter, odd) for json_flag in ([], ["--json"]))):
        assert delayed_main(["--redis-url", redis_server.url, *argv]) == 0, argv
        out = capsys.readouterr().out
        if "--json" in argv:
            json.loads(out)
    for path in ("/", "/dead?queue=h", f"/dead/show?queue=h&id={letter.decode()}", f"/dead/show?queue=h&id={odd.decode()}",
                 "/task?id=" + "0" * 32, *(f"/queue?queue=h&tab={tab}" for tab in ("pending", "processing", "scheduled", "dead")),
                 "/queue?queue=h&tab=dead&reason=malformed"):
        reply = dashboard_client.get(path)
        assert reply.status_code == 200 and len(reply.data) < 2_000_000, path
    assert dashboard_client.get(f"/dead/raw?queue=h&id={letter.decode()}").data == blob
    scraped = list(QueueCollector(conn, ["h"]).collect())
    assert [family.samples[0].value for family in scraped if family.name == "delayed_up"] == [1]
    assert queue.move_due() == 1
    conn.hset("h_processing", new_worker_id(), blob)  # a dead worker of ours held it: a crash to count
    Sweeper([queue], max_crashes=1).sweep()
    assert conn.hlen("h_processing") == 1  # the go-delayed worker's: it lives


@given(st.lists(hostile, min_size=30, max_size=30))
@settings(max_examples=max(3, EXAMPLES // 100), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.data_too_large, HealthCheck.too_slow])
def test_a_queue_full_of_garbage_is_drained_into_dead_letters(conn, garbage):
    conn.flushall()
    queue = Queue("fuzz", conn)
    conn.rpush("fuzz", *garbage)
    conn.rpush("fuzz_noti", *[1] * len(garbage))
    queue.enqueue(PyTask("tests.tasks:record", ["sentinel"]))
    worker = Worker(queue, ["tests.tasks"], keep_alive_interval=1, dequeue_timeout=0.05)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: "('sentinel', (), {})" in results(conn), what="the task after the garbage")
        wait_for(lambda: conn.llen("fuzz") == 0 and conn.hlen("fuzz_processing") == 0, what="drained")
    finally:
        worker.stop()
        thread.join(WAIT)
    assert not thread.is_alive() or worker.lifecycle.stopping
    dead = [letter["task"] for letter in queue.dead.list()]
    ran = len(results(conn)) - 1  # random blobs that happened to call record() with fitting arguments
    assert len(dead) + ran == len(garbage)
    assert all(blob in garbage for blob in dead)
