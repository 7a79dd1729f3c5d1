"""`python -m delayed`: stats, workers, dead letters, scheduled tasks, enqueue by hand."""
import base64
import json
import socket
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

from .conftest import ROOT, results, spawn, wait_for

GO_WORKER = "0123456789abcdef0123456789abcdef"


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
    assert rows["t"]["latency_measured"] is True and 30 <= rows["t"]["latency"] < 40
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

    scheduled = tracked.enqueue(PyTask("tests.tasks:record", ["due"]), delay=0.01, result_ttl=60)
    conn.delete("t")
    time.sleep(0.05)
    assert tracked.move_due() == 1
    conn.hset(f"t_task:{scheduled.id}", "enqueued", redis_now - 3600)  # waits since it came due, not since enqueued
    [row] = admin.stats(conn, ["t"])
    assert row["latency_measured"] is True and row["latency"] < 5


def test_workers_lists_our_live_workers(conn, redis_server, busy):
    worker = Worker(Queue("q", conn, dequeue_timeout=0.05), ["tests.tasks"])
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: len(results(conn)) == 2, what="the pending tasks")
        [row] = json.loads(delayed(redis_server.url, "workers", "--queue", "q", "--json"))
        assert row["worker"] == worker.id and row["queue"] == "q" and 50 < row["expires_in"] <= 60
        assert json.loads(delayed(redis_server.url, "stats", "--queue", "q", "--json"))[0]["workers"] == 1
    finally:
        worker.stop()
        thread.join(10)
    assert json.loads(delayed(redis_server.url, "workers", "--json")) == []


def test_workers_says_the_host_pid_and_queues_of_ours_and_unknown_for_go_delayeds(conn, redis_server):
    worker = spawn("delayed.worker", "--queue", "q", "--queue", "other", "--keep-alive-timeout", "30", "tests.tasks",
                   redis_url=redis_server.url)
    conn.hset("q_processing", GO_WORKER, GoTask("main.Resize", 640).serialize())  # a go-delayed worker's last task
    conn.set(GO_WORKER, "1", ex=60)
    try:
        wait_for(lambda: conn.zcard("q_workers") and conn.zcard("other_workers"), what="the worker online")
        rows = json.loads(delayed(redis_server.url, "workers", "--queue", "q", "--queue", "other", "--json"))
        ours = [row for row in rows if not row["go"]]
        assert [(row["queue"], row["host"], row["pid"], row["queues"]) for row in ours] == [
            ("q", socket.gethostname(), worker.pid, ["q", "other"]), ("other", socket.gethostname(), worker.pid, ["q", "other"])]
        assert all(row["started"].endswith("+00:00") for row in ours)
        [go] = [row for row in rows if row["go"]]
        assert (go["worker"], go["host"], go["pid"], go["started"], go["queues"]) == (GO_WORKER, None, None, None, None)
        header, *lines = delayed(redis_server.url, "workers", "--queue", "q").splitlines()
        assert header.split() == ["QUEUE", "WORKER", "HOST", "PID", "EXPIRES_IN", "HOLDING", "GO"]
        assert [line.split()[2:4] for line in lines if "delayed-py-" in line] == [[socket.gethostname(), str(worker.pid)]]
    finally:
        worker.terminate()
        worker.communicate(timeout=10)


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


def test_dead_requeue_all_and_purge_take_the_dashboard_s_filter(conn, redis_server):
    queue = Queue("q", conn)
    letters = {}
    for n, (reason, func) in enumerate([("failed", "m:a"), ("failed", "m:b"), ("timed_out", "m:a"), ("failed", "m:a"),
                                        ("not_allowed", "m:b")]):
        fields = record(reason=reason, error="e", blob=PyTask(func, [n]).serialize(), queue="q", worker=None, func=func)
        letters[n] = conn.xadd("q_dead_letters", fields).decode()
    conn.xadd("q_dead_letters", {"record": b"not JSON", "task": PyTask("m:c").serialize()})

    def left() -> list:
        return [entry["id"] for entry in queue.dead.list() if entry["reason"] != "undecodable"]

    status, output = delayed(redis_server.url, "dead", "purge", "--queue", "q", "--reason", "failed", "--func", "m:a",
                             check=False)
    assert (status, output) == (2, "delayed: dead purge deletes the 2 dead letters of q with reason failed and "
                                   "function m:a: add --yes\n")  # how many match; nothing is deleted
    assert queue.dead.count() == 6
    assert json.loads(delayed(redis_server.url, "dead", "purge", "--queue", "q", "--reason", "failed", "--func", "m:a",
                              "--yes", "--json")) == {"purged": 2}
    assert left() == [letters[1], letters[2], letters[4]]
    assert delayed(redis_server.url, "dead", "requeue", "--all", "--queue", "q", "--func", "m:b").strip() == (
        "requeued 2 tasks into q with function m:b")
    assert conn.lrange("q", 0, -1) == [PyTask("m:b", [1]).serialize(), PyTask("m:b", [4]).serialize()]
    assert left() == [letters[2]] and conn.llen("q_noti") == 2
    assert delayed(redis_server.url, "dead", "purge", "--queue", "q", "--reason", "undecodable", "--yes").strip() == (
        "purged 1 dead letter of q with reason undecodable")
    assert queue.dead.count() == 1
    for words in (["requeue", letters[2], "--reason", "timed_out"], ["purge", "--reason", "faild", "--yes"],
                  ["requeue", "--all", "--reason", "Failed"]):
        status, output = delayed(redis_server.url, "dead", *words, "--queue", "q", check=False)
        assert status == 2 and output.splitlines()[-1].startswith(("delayed: ", "delayed dead ")), output
    assert left() == [letters[2]] and conn.llen("q") == 2


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
    assert row["worker"] == go_id and row["go"] is True and row["holding"] == 1 and 55 < row["expires_in"] <= 60
