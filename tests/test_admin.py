"""`python -m delayed`: stats, workers, dead letters, scheduled tasks, enqueue by hand."""
import base64
import json
import subprocess
import sys
import threading
import time

import pytest

from delayed import GoTask, PyTask, Queue, Worker
from delayed.ops import admin
from delayed.protocol.worker_ops import WorkerOps
from delayed.wire.keys import new_worker_id
from delayed.wire.dead_letter import record

from .conftest import ROOT, WAIT, results, wait_for


def delayed(url, *args, check=True):
    """Run `python -m delayed ARGS --redis-url URL`; its stdout (and the exit status if not check)."""
    process = subprocess.run([sys.executable, "-m", "delayed", *args, "--redis-url", url], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
    if check:
        assert process.returncode == 0, process.stderr
        return process.stdout
    return process.returncode, process.stdout + process.stderr


@pytest.fixture
def busy(conn):
    """Queue "q": 2 pending, 1 scheduled, 2 dead letters (one undecodable) in the list of an older
    version; queue "other": 1 pending."""
    queue = Queue("q", conn)
    queue.enqueue_many([PyTask("tests.tasks:record", ["a"]), PyTask("tests.tasks:record", ["b"])])
    queue.enqueue(PyTask("tests.tasks:record", ["later"]), delay=3600)
    Queue("other", conn).enqueue(GoTask("main.F", 1))
    conn.rpush("q_dead", old_record(reason="not_allowed", blob=PyTask("os:system", ["x"]).serialize(),
                                    func="os:system"),
               old_record(reason="malformed", blob=b"\xc1junk", func=None))
    return queue


def old_record(reason, blob, func):
    """A dead-letter record as versions before the stream pushed it onto <queue>_dead."""
    letter = record(reason=reason, error="e", blob=blob, queue="q", worker=None, func=func)
    return json.dumps({**json.loads(letter["record"]), "task": base64.b64encode(blob).decode()})


def test_stats_as_a_table_and_as_json(conn, redis_server, busy):
    Queue("empty", conn).enqueue(PyTask("tests.tasks:record", ["gone"]))
    conn.delete("empty")
    text = delayed(redis_server.url, "stats")
    assert text.splitlines()[0].split() == ["QUEUE", "PENDING", "PROCESSING", "SCHEDULED", "DEAD", "WORKERS",
                                            "PAUSED", "LATENCY"]
    assert [line.split() for line in text.splitlines()[1:]] == [["empty", "0", "0", "0", "0", "0", "no", "0.0s"],
                                                                ["other", "1", "0", "0", "0", "0", "no"],
                                                                ["q", "2", "0", "1", "2", "0", "no"]]
    rows = json.loads(delayed(redis_server.url, "stats", "--queue", "q", "--json"))
    assert rows == [{"queue": "q", "pending": 2, "processing": 0, "scheduled": 1, "dead": 2, "workers": 0,
                     "paused": False, "enqueued_total": 3, "done_total": 0, "retried_total": 0, "dead_total": 0,
                     "latency": None, "latency_measured": None, "go_untaken": None}]


def test_stats_latency_is_a_tracked_heads_age_else_estimated_from_the_rate_out(conn, redis_server):
    tracked, untracked = Queue("t", conn), Queue("u", conn)
    first = tracked.enqueue(PyTask("tests.tasks:record", ["a"]), result_ttl=60)
    tracked.enqueue(PyTask("tests.tasks:record", ["b"]))
    redis_now = float("%d.%06d" % conn.time())
    conn.hset(f"t_task:{first.id}", "enqueued", redis_now - 30)  # as if enqueued 30 s ago
    untracked.enqueue_many(PyTask("tests.tasks:record", [i]) for i in range(10))
    rows = {row["queue"]: row for row in json.loads(delayed(redis_server.url, "stats", "--json"))}
    waited = float("%d.%06d" % conn.time()) - redis_now + 30  # the most it can have waited when read
    assert rows["t"]["latency_measured"] is True and 30 <= rows["t"]["latency"] <= round(waited, 1) + 0.1
    assert (rows["u"]["latency"], rows["u"]["latency_measured"]) == (None, None)  # one look tells no rate
    table = delayed(redis_server.url, "stats", "--queue", "t")
    cell = table.splitlines()[1].split()[-1]
    assert cell.endswith("s") and float(cell[:-1]) >= 30

    before = admin.stats(conn, ["t", "u"])
    worker_ops = WorkerOps(untracked)
    ids = [new_worker_id() for _ in range(4)]
    worker_ops.claim_batch((), ids)
    worker_ops.claim_batch(ids, ())  # 4 done: 2 per second over the 2 s with_rates is told about
    rated = {row["queue"]: row for row in admin.with_rates(admin.stats(conn, ["t", "u"]), before, 2.0)}
    assert (rated["u"]["latency"], rated["u"]["latency_measured"]) == (3.0, False)  # 6 pending / 2 per s
    assert rated["t"]["latency_measured"] is True  # measured stays measured

    enqueued = float("%d.%06d" % conn.time())
    scheduled = tracked.enqueue(PyTask("tests.tasks:record", ["due"]), delay=0.01, result_ttl=60)
    conn.delete("t")
    time.sleep(0.05)
    assert tracked.move_due() == 1
    conn.hset(f"t_task:{scheduled.id}", "enqueued", redis_now - 3600)  # waits since it came due, not since enqueued
    [row] = admin.stats(conn, ["t"])
    waited = float("%d.%06d" % conn.time()) - enqueued  # the most it can have waited since it came due
    assert row["latency_measured"] is True and row["latency"] <= round(waited, 1) + 0.1


def test_workers_lists_our_live_workers(conn, redis_server, busy):
    worker = Worker(Queue("q", conn, dequeue_timeout=0.05), ["tests.tasks"])
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: len(results(conn)) == 2, what="the pending tasks")
        [row] = json.loads(delayed(redis_server.url, "workers", "--queue", "q", "--json"))
        assert row["worker"] == worker.id and row["queue"] == "q" and 0 < row["expires_in"] <= 60
        assert json.loads(delayed(redis_server.url, "stats", "--queue", "q", "--json"))[0]["workers"] == 1
    finally:
        worker.stop()
        thread.join(WAIT)
    assert json.loads(delayed(redis_server.url, "workers", "--json")) == []


def test_dead_list_show_requeue_purge(conn, redis_server, busy):
    rows = json.loads(delayed(redis_server.url, "dead", "list", "--queue", "q", "--json"))
    assert [(row["reason"], row["func"]) for row in rows] == [("not_allowed", "os:system"), ("malformed", None)]
    assert rows[0]["task"] == {"func": "os:system", "args": ["x"], "kwargs": {}, "retry": 0, "options": {}}
    assert rows[1]["task"] == {"undecodable": 5}
    shown = delayed(redis_server.url, "dead", "show", rows[1]["id"], "--queue", "q")
    assert "reason: malformed" in shown and f"id: {rows[1]['id']}" in shown
    assert delayed(redis_server.url, "dead", "show", "7-0", "--queue", "q", check=False)[0] == 1

    requeued = delayed(redis_server.url, "dead", "requeue", rows[0]["id"], "--queue", "q")
    assert requeued.strip() == "requeued 1 task into q"
    assert conn.lrange("q", -1, -1) == [PyTask("os:system", ["x"]).serialize()] and conn.llen("q_noti") == 3
    assert [row["reason"] for row in Queue("q", conn).dead.list()] == ["malformed"]

    status, output = delayed(redis_server.url, "dead", "purge", "--queue", "q", check=False)
    assert status == 2 and "--yes" in output and Queue("q", conn).dead.count() == 1
    assert json.loads(delayed(redis_server.url, "dead", "purge", "--queue", "q", "--yes", "--json")) == {"purged": 1}
    assert not conn.exists("q_dead", "q_dead_letters")


def test_scheduled_list(conn, redis_server, busy):
    [row] = json.loads(delayed(redis_server.url, "scheduled", "list", "--queue", "q", "--json"))
    assert row["task"] == {"func": "tests.tasks:record", "args": ["later"], "kwargs": {}, "retry": 0, "options": {}}
    assert row["due"].endswith("+00:00")


def test_enqueue_by_hand(conn, redis_server):
    delayed(redis_server.url, "enqueue", "tests.tasks:record", "x", "2", "[3]", "--kwargs", '{"k": null}')
    delayed(redis_server.url, "enqueue", "main.Add", "1", "2", "--go", "--queue", "go")
    delayed(redis_server.url, "enqueue", "tests.tasks:record", "soon", "--delay", "60")
    assert conn.lrange("default", 0, -1) == [PyTask("tests.tasks:record", ["x", 2, [3]], {"k": None}).serialize()]
    assert conn.lrange("go", 0, -1) == [GoTask("main.Add", [1, 2]).serialize()]
    assert conn.zcard("default_scheduled") == 1
    status, output = delayed(redis_server.url, "enqueue", "m:f", "--kwargs", "{oops", check=False)
    assert status == 2 and output.count("\n") == 1 and "--kwargs is not JSON" in output


def test_a_long_task_s_preview_tells_a_py_task_from_a_go_task_by_its_second_element():
    """A blob too long to decode whole is read from its head: [func, args] with args cut off is a
    PyTask (its args an array), [func, payload] a GoTask (its payload a msgpack bin)."""
    from delayed.ops.admin import PREVIEW_BYTES, describe_task

    py = PyTask("tests.tasks:record", ["x" * 100_000]).serialize()
    go = GoTask("main.Resize", "x" * 100_000).serialize()
    assert len(py) > PREVIEW_BYTES and len(go) > PREVIEW_BYTES
    assert describe_task(py[:1024], len(py)) == {"func": "tests.tasks:record", "truncated": True, "bytes": len(py)}
    assert describe_task(py) == {"func": "tests.tasks:record", "truncated": True, "bytes": len(py)}
    assert describe_task(go[:1024], len(go)) == {"func": "main.Resize", "go": True, "truncated": True,
                                                  "bytes": len(go)}


def test_workers_lists_go_delayed_workers_that_hold_a_task_with_their_keep_alive(conn):
    go_id = "0123456789abcdef0123456789abcdef"
    conn.hset("go_processing", go_id, GoTask("main.Resize", 640).serialize())  # a go-delayed worker's last task
    conn.set(go_id, "1", ex=60)
    conn.hset("go_processing", "fedcba9876543210fedcba9876543210", b"x")  # its keep-alive gone: a lapsed one
    [row] = admin.workers(conn, ["go"])
    assert row["worker"] == go_id and row["go"] is True and row["holding"] == 1 and 0 < row["expires_in"] <= 60
