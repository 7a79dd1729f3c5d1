"""`python -m delayed`: stats, workers, dead letters, scheduled tasks, enqueue by hand."""
import base64
import json
import socket
import subprocess
import sys
import threading
import time

import pytest

from delayed import GoTask, PyTask, Queue, TaskOptions, Worker
from delayed.ops import admin
from delayed.protocol.sweeper_ops import SweeperOps
from delayed.protocol.worker_ops import WorkerOps
from delayed.wire.dead_letter import record
from delayed.wire.keys import new_worker_id

from .conftest import ROOT, WAIT, results, settle_by_a_worker, spawn, wait_for

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
                                                                ["other", "1", "0", "0", "0", "0", "no", "?"],
                                                                ["q", "2", "0", "1", "2", "0", "no", "?"]]
    rows = json.loads(delayed(redis_server.url, "stats", "--queue", "q", "--json"))
    assert rows == [{"queue": "q", "pending": 2, "processing": 0, "scheduled": 1, "dead": 2, "workers": 0,
                     "paused": False, "enqueued_total": 3, "done_total": 0, "retried_total": 0, "dead_total": 0,
                     "workflows_started_total": 0, "workflows_done_total": 0, "workflows_failed_total": 0,
                     "limit_keys": 0, "latency": None, "latency_measured": None, "latency_basis": "unknown",
                     "go_untaken": None, "unswept_lapsed": 0, "workflows_stalled": [],
                     "workflows_checked": {"workflows": 0, "steps": 0, "unchecked": 0, "complete": True},
                     "limits": [], "limits_complete": True}]


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
    assert rows["t"]["latency_basis"] == "tracked"
    assert (rows["u"]["latency"], rows["u"]["latency_measured"], rows["u"]["latency_basis"]) == \
        (None, None, "unknown")  # one look tells no rate, and no sweep has seen its head
    table = delayed(redis_server.url, "stats", "--queue", "t")
    cell = table.splitlines()[1].split()[-1]
    assert cell.endswith("s") and float(cell[:-1]) >= 30

    before = admin.stats(conn, ["t", "u"])
    worker_ops = WorkerOps(untracked)
    ids = [new_worker_id() for _ in range(4)]
    worker_ops.claim_batch((), ids)
    worker_ops.claim_batch(ids, ())  # 4 done: 2 per second over the 2 s with_rates is told about
    rated = {row["queue"]: row for row in admin.with_rates(admin.stats(conn, ["t", "u"]), before, 2.0)}
    assert (rated["u"]["latency"], rated["u"]["latency_measured"], rated["u"]["latency_basis"]) == \
        (3.0, False, "rate")  # 6 pending / 2 per s
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


def noted_long_ago(conn, name, seconds):
    """A real sweep of the queue notes its head in N_head_since; then make that note seconds older."""
    SweeperOps(Queue(name, conn)).sweep()
    digest, _, since_ms = conn.get(f"{name}_head_since").partition(b":")
    conn.set(f"{name}_head_since", digest + b":" + str(int(since_ms) - int(seconds * 1000)).encode())


def test_stats_latency_of_untracked_waiting_tasks_is_a_sweeps_lower_bound_else_says_unknown(conn, redis_server):
    queue = Queue("u", conn)
    queue.enqueue(PyTask("tests.tasks:slow", [3600]))  # a long task at the head, 30 behind it
    queue.enqueue_many(PyTask("tests.tasks:record", [i]) for i in range(30))
    [row] = json.loads(delayed(redis_server.url, "stats", "--json"))
    assert (row["pending"], row["latency"], row["latency_measured"], row["latency_basis"]) == \
        (31, None, None, "unknown")
    assert delayed(redis_server.url, "stats").splitlines()[1].split()[-1] == "?"  # never blank while tasks wait

    noted_long_ago(conn, "u", 30)
    [row] = json.loads(delayed(redis_server.url, "stats", "--json"))
    assert (row["latency_measured"], row["latency_basis"]) == (False, "sweep") and 30 <= row["latency"] < 40
    cell = delayed(redis_server.url, "stats").splitlines()[1].split()[-1]
    assert cell.startswith("~") and cell.endswith("s") and float(cell[1:-1]) >= 30

    conn.lpop("u")  # the head was taken: the note names a task no longer there
    [row] = admin.stats(conn, ["u"])
    assert (row["latency"], row["latency_basis"]) == (None, "unknown")
    SweeperOps(queue).sweep()  # the next sweep notes the new head: waited 0 s so far
    [row] = admin.stats(conn, ["u"])
    assert row["latency_basis"] == "sweep" and 0 <= row["latency"] < 30


def test_stats_counts_the_workers_that_workers_lists_go_delayeds_included(conn, redis_server):
    go_id, lapsed = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
    conn.hset("go_processing", go_id, GoTask("main.Resize", 640).serialize())  # a go-delayed worker's last task
    conn.set(go_id, "1", ex=60)                                                # and its keep-alive key
    conn.hset("go_processing", lapsed, GoTask("main.Lost", 1).serialize())     # its keep-alive gone: not live
    ours = new_worker_id()
    assert WorkerOps(Queue("go", conn)).try_online([ours])
    other = new_worker_id()
    conn.zadd("ours_workers", {other: time.time() + 60})  # as our worker lists itself on queue "ours"
    listed = json.loads(delayed(redis_server.url, "workers", "--json"))
    assert sorted((row["queue"], row["worker"], row["go"]) for row in listed) == \
        sorted([("go", go_id, True), ("go", ours, False), ("ours", other, False)])
    counted = {row["queue"]: row["workers"] for row in json.loads(delayed(redis_server.url, "stats", "--json"))}
    assert counted == {"go": 2, "ours": 1}
    assert counted == {queue: sum(row["queue"] == queue for row in listed) for queue in counted}
    conn.delete(go_id)  # its keep-alive lapsed: neither lists nor counts it
    assert [row["workers"] for row in admin.stats(conn, ["go"])] == [1]
    assert [row["worker"] for row in admin.workers(conn, ["go"])] == [ours]


def test_workers_lists_our_live_workers(conn, redis_server, busy):
    worker = Worker(Queue("q", conn), ["tests.tasks"], dequeue_timeout=0.05)
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


def test_dead_list_covers_every_queue_merged_oldest_first_and_pages_with_after(conn, redis_server):
    def bury(queue, letter_id, tag):
        blob = PyTask("tests.tasks:record", [tag]).serialize()
        conn.xadd(f"{queue}_dead_letters", record(reason="failed", error=tag, blob=blob, queue=queue, worker=None,
                                                 func="tests.tasks:record"), id=letter_id)

    for letter_id, queue in (("1000-0", "a"), ("1001-0", "b"), ("1002-0", "a"), ("1003-0", "a"), ("1003-0", "b"),
                             ("1004-0", "b"), ("1005-0", "a")):
        bury(queue, letter_id, f"{queue}{letter_id}")
    Queue("c", conn).enqueue(PyTask("tests.tasks:record", ["no letters"]))

    def page(*args):
        status, output = delayed(redis_server.url, "dead", "list", "--json", *args, check=False)
        assert status == 0, output
        rows, _, more = output.partition("\n")
        return [(row["id"], row["queue"]) for row in json.loads(rows)], more.strip()

    assert page("--limit", "2") == ([("1000-0", "a"), ("1001-0", "b")], "more: --after 1001-0")
    # 1003-0 is an id of both queues: the page holds both, so that paging on after it misses neither
    assert page("--limit", "2", "--after", "1001-0") == ([("1002-0", "a"), ("1003-0", "a"), ("1003-0", "b")],
                                                         "more: --after 1003-0")
    assert page("--limit", "2", "--after", "1003-0") == ([("1004-0", "b"), ("1005-0", "a")], "")
    assert page("--queue", "b") == ([("1001-0", "b"), ("1003-0", "b"), ("1004-0", "b")], "")
    table = delayed(redis_server.url, "dead", "list", "--limit", "1")
    assert table.splitlines()[0].split() == ["ID", "QUEUE", "REASON", "FUNC", "FAILED_AT", "ERROR"]
    assert table.splitlines()[1].split()[:3] == ["1000-0", "a", "failed"]
    status, output = delayed(redis_server.url, "dead", "list", "--after", "nope", check=False)
    assert status == 1 and output.count("\n") == 1 and "not a dead letter id: nope" in output


def test_dead_show_requeue_delete_find_the_letters_queue_and_bulk_actions_need_one(conn, redis_server):
    task = PyTask("tests.tasks:record", ["x"])
    for queue, letter_id in (("a", "1000-0"), ("b", "1000-0"), ("b", "2000-0"), ("a", "3000-0")):
        conn.xadd(f"{queue}_dead_letters", record(reason="failed", error="e", blob=task.serialize(), queue=queue,
                                                  worker=None, func=task.func_path), id=letter_id)
    assert "queue: b" in delayed(redis_server.url, "dead", "show", "2000-0")
    assert delayed(redis_server.url, "dead", "requeue", "2000-0").strip() == "requeued 1 task into b"
    assert delayed(redis_server.url, "dead", "delete", "3000-0").strip() == "deleted 1 dead letter of a"
    for args, status, says in (
            (("show", "1000-0"), 2, "dead letter 1000-0 is on several queues (a, b): name one with --queue"),
            (("requeue", "7-0"), 1, "no dead letter 7-0 on any queue (nothing was changed)"),
            (("requeue", "--all"), 2, "dead requeue --all moves every dead letter of one queue: name it with --queue"),
            (("purge", "--yes"), 2, "the following arguments are required: --queue")):
        code, output = delayed(redis_server.url, "dead", *args, check=False)
        assert code == status and says in output, output
    conn.xadd("c_dead_letters", record(reason="failed", error="e", blob=task.serialize(), queue="c", worker=None,
                                       func=task.func_path), id="4000-0")
    code, output = delayed(redis_server.url, "dead", "delete", "4000-0", "1000-0", "--json", check=False)
    assert code == 2 and "dead letter 1000-0 is on several queues" in output
    delayed(redis_server.url, "dead", "delete", "1000-0", "--queue", "a")
    code, output = delayed(redis_server.url, "dead", "delete", "4000-0", "1000-0", check=False)
    assert code == 2 and "these letters are on several queues (b, c): delete each queue's with --queue" in output
    assert [queue.dead.count() for queue in (Queue("a", conn), Queue("b", conn), Queue("c", conn))] == [0, 1, 1]
    assert json.loads(delayed(redis_server.url, "dead", "purge", "--queue", "b", "--yes", "--json")) == {"purged": 1}


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
    assert row["due"].endswith("+00:00") and (row["kind"], row["attempt"], row["attempts"]) == ("delayed", None, None)


LONG_FUNC = "tests.tasks:" + "a_function_whose_name_alone_is_longer_than_sixty_characters_in_all"
LONG_ARGS = ["an argument longer than the sixty characters a table cell used to keep", {"width": 640, "height": 480}]


def test_scheduled_list_marks_retries_apart_from_delayed_tasks_and_shows_func_and_args_uncut(conn, redis_server):
    queue = Queue("jobs", conn)
    queue.enqueue(PyTask("tests.tasks:always_fail", ["counted"], max_retries=3, backoff=600))
    settle_by_a_worker(queue)  # attempt 1 failed: attempt 2 of 4 waits 600 s
    queue.enqueue(PyTask("tests.tasks:always_fail", ["forever"], retry=-1))
    settle_by_a_worker(queue)  # rescheduled byte for byte: only the member's nonce tells it is a retry
    queue.enqueue(PyTask(LONG_FUNC, LONG_ARGS, {"k": None}), delay=3600)
    forever = PyTask("tests.tasks:always_fail", ["forever"], retry=-1).serialize()
    assert forever in [member[8:] for member in conn.zrange("jobs_scheduled", 0, -1)]

    rows = json.loads(delayed(redis_server.url, "scheduled", "list", "--queue", "jobs", "--json"))
    assert [(row["task"]["args"], row["kind"], row["attempt"], row["attempts"]) for row in rows] == [
        (["forever"], "retry", None, None), (["counted"], "retry", 2, 4), (LONG_ARGS, "delayed", None, None)]
    table = delayed(redis_server.url, "scheduled", "list", "--queue", "jobs").splitlines()
    assert table[0].split() == ["DUE", "KIND", "ATTEMPT", "FUNC", "ARGS"]
    assert table[1].split()[1:] == ["retry", "tests.tasks:always_fail", '["forever"]']
    assert table[2].split()[1:5] == ["retry", "2", "of", "4"] and table[2].endswith('["counted"]')
    assert table[3].split()[1] == "delayed" and LONG_FUNC in table[3]
    assert table[3].endswith(f'{json.dumps(LONG_ARGS)} **{{"k": null}}')  # whole: neither is cut


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


def test_a_gotask_s_preview_shows_its_options_whole_or_from_its_head():
    """A GoTask with options ([func, payload, options]) is still told from a PyTask by its payload's bin,
    whole or from its head; its options show, as a PyTask's do (none for go-delayed's bytes)."""
    from delayed.ops.admin import PREVIEW_BYTES, describe_task

    task = GoTask("main.Resize", {"w": 640}, max_retries=3, time_limit=30, options=TaskOptions(id="a" * 32))
    assert describe_task(task.serialize()) == {"go": True, "func": "main.Resize", "payload": {"w": 640},
                                               "options": {"max_retries": 3, "time_limit": 30, "id": "a" * 32}}
    assert "options" not in describe_task(GoTask("main.Resize", 640).serialize())
    long = GoTask("main.Resize", "x" * 100_000, max_retries=3).serialize()
    assert len(long) > PREVIEW_BYTES
    assert describe_task(long[:1024], len(long)) == {"func": "main.Resize", "go": True, "truncated": True,
                                                      "bytes": len(long)}


def test_a_tracked_gotask_s_page_and_dead_letter_show_its_options(conn):
    """What the dashboard's task page and `delayed dead list` read: a tracked GoTask our Python worker
    dead-lettered, its options in its preview (the id among them), its record dead."""
    handle = Queue("q", conn).enqueue(GoTask("main.Resize", 640, max_retries=2, time_limit=30), result_ttl=60)
    Worker(Queue("q", conn), ["tests.tasks"], burst=True, dequeue_timeout=0.05).run()
    options = {"max_retries": 2, "time_limit": 30, "id": handle.id}
    page = admin.tracked_task(conn, handle.id)
    assert page is not None and page["status"] == "dead" and page["func"] == "main.Resize"
    assert page["task"] == {"go": True, "func": "main.Resize", "payload": 640, "options": options}
    [letter] = admin.dead_letters_of(conn, ["q"])[0]
    assert admin.describe_dead(letter)["task"]["options"] == options and letter["reason"] == "go_task"


def test_workers_lists_go_delayed_workers_that_hold_a_task_with_their_keep_alive(conn):
    go_id = "0123456789abcdef0123456789abcdef"
    conn.hset("go_processing", go_id, GoTask("main.Resize", 640).serialize())  # a go-delayed worker's last task
    conn.set(go_id, "1", ex=60)
    conn.hset("go_processing", "fedcba9876543210fedcba9876543210", b"x")  # its keep-alive gone: a lapsed one
    [row] = admin.workers(conn, ["go"])
    assert row["worker"] == go_id and row["go"] is True and row["holding"] == 1 and 0 < row["expires_in"] <= 60
