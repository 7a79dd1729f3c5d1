"""go-delayed behaviours our users meet when they run its workers beside ours, pinned on the real
thing so docs/go.md states facts."""
import contextlib
import signal
import threading

import pytest
import redis
from conftest import SIGHUP, WAIT, dequeue_errors, go_results, wait_for

from delayed.queue import Queue
from delayed.task import GoTask


def values(conn):
    """The Go value (%#v) each recorded call received, in order."""
    return [[a["go"] for a in r["args"]] for r in go_results(conn)]


def test_go_worker_never_releases_its_last_task_and_a_sweeper_reruns_it(procs, conn):
    """After a clean SIGHUP stop, go-delayed's worker leaves its last task in q_processing; once its
    keep-alive key is gone any sweeper (go-delayed's own here) requeues it and it runs again.
    (It deletes the key as it stops, but its keep-alive goroutine often sets it again just after,
    so the key may live one more keep-alive timeout.)"""
    worker = procs.go_worker("q")
    task = GoTask("main.String", "last")
    Queue("q", conn).enqueue(task)
    wait_for(lambda: go_results(conn), what="the task to run")
    worker.signal(SIGHUP)
    assert worker.wait() == 0
    assert [e["event"] for e in worker.events()] == ["starting", "online", "stopped"]
    wait_for(lambda: not conn.exists(worker.id), what="the keep-alive key (1 s) to go")
    assert conn.hgetall("q_processing") == {worker.id.encode(): task.serialize()}

    assert procs.go_sweep_once("q") == [{"queue": "q", "requeued": 1}]
    procs.go_worker("q")
    wait_for(lambda: len(go_results(conn)) == 2, what="the task to run again")
    assert values(conn) == [['"last"'], ['"last"']]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_go_worker_stops_cleanly_only_on_sighup(procs, conn, signum):
    """SIGTERM and SIGINT kill go-delayed's worker like a crash: no clean stop, and its keep-alive
    key stays until it expires, so its task waits that long for a sweeper."""
    worker = procs.go_worker("q", keep_alive_timeout="40s")  # (40 s: one of the values SETEX takes)
    worker.signal(signum)
    assert worker.wait() == -signum
    assert [e["event"] for e in worker.events()] == ["starting", "online"]
    assert conn.ttl(worker.id) > 0


def test_go_dequeue_errors_on_a_stray_notification_and_backs_off_doubling(procs, conn, redis_server):
    """go-delayed's dequeue script tests `task == nil`, which never holds in Redis Lua: a
    notification without a task makes it HSET false and error. Its worker then sleeps 1 s, and
    2 s, 4 s ... after each further error in a row, before it takes the next notification. Timed on
    Redis's clock (MONITOR): from one call of the dequeue script to the next."""
    calls = []  # when Redis ran each call of go-delayed's dequeue script on q
    watching, monitoring = redis.Redis.from_url(redis_server.url).monitor(), threading.Event()

    def watch() -> None:
        with contextlib.suppress(redis.RedisError, OSError), watching:  # until the connection is closed
            monitoring.set()
            for command in watching.listen():
                if command["command"].split()[:1] == ["EVALSHA"] and command["command"].split()[2:5] == [
                        "2", "q", "q_processing"]:
                    calls.append(command["time"])

    threading.Thread(target=watch, daemon=True).start()
    assert monitoring.wait(WAIT)
    try:
        worker = procs.go_worker("q")
        conn.rpush("q_noti", 1, 1, 1)
        wait_for(lambda: len(dequeue_errors(worker)) == 3, what="three dequeue errors")
        assert "ERR Lua redis lib command arguments must be strings or integers" in dequeue_errors(worker)[0]
        Queue("q", conn).enqueue(GoTask("main.String", "after the errors"))
        wait_for(lambda: go_results(conn), what="the task to run")
    finally:
        watching.connection.disconnect()
    gaps = [later - earlier for earlier, later in zip(calls, calls[1:])]
    assert len(gaps) == 3 and gaps[0] >= 1 and gaps[1] >= 2, gaps
    assert gaps[2] >= 4, "the worker took the task before its 4 s back-off ended"


def test_a_gotask_without_an_argument_resets_int_but_keeps_slices_maps_and_pointers(procs, conn):
    """go-delayed decodes each task into the same variable as the last task of that handler.
    Our GoTask(path, None) writes msgpack nil, as NewGoTask(path) does: an int parameter is reset
    to 0, but a slice, map, pointer or interface{} keeps the previous task's value."""
    procs.go_worker("q")
    queue = Queue("q", conn)
    for func, value in [("Int", 9), ("Ints", [4]), ("MapInt", {"b": 2}), ("StructPtr", [3, 4, "q"]), ("Any", "s")]:
        queue.enqueue(GoTask("main." + func, value))
        queue.enqueue(GoTask("main." + func, None))
    wait_for(lambda: len(go_results(conn)) == 10, what="ten calls")
    assert values(conn) == [
        ["9"], ["0"],
        ["[]int{4}"], ["[]int{4}"],
        ['map[string]int{"b":2}'], ['map[string]int{"b":2}'],
        ['&main.Point{X:3, Y:4, Label:"q"}'], ['&main.Point{X:3, Y:4, Label:"q"}'],
        ['"s"'], ['"s"'],
    ]


def test_go_producers_explicit_nil_keeps_the_previous_value_even_for_int(procs, conn):
    """NewGoTask(path, nil) (goproducer -args null) writes no payload at all, so go-delayed skips
    decoding and the handler gets whatever the previous task of that handler left, an int too."""
    procs.go_worker("q")
    Queue("q", conn).enqueue(GoTask("main.Int", 9))
    procs.go_producer("-func", "main.Int", "-args", "null")
    procs.go_producer("-func", "main.Int")  # NewGoTask(path): payload msgpack nil, like ours
    wait_for(lambda: len(go_results(conn)) == 3, what="three calls")
    assert values(conn) == [["9"], ["9"], ["0"]]


def test_missing_struct_fields_keep_the_previous_tasks_values(procs, conn):
    """A struct sent with fewer fields than it has: go-delayed fills the ones given and leaves
    the rest as the previous task of that handler left them, not zero."""
    procs.go_worker("q")
    queue = Queue("q", conn)
    queue.enqueue(GoTask("main.Struct", [1, 2, "first"]))
    queue.enqueue(GoTask("main.Struct", [5]))
    wait_for(lambda: len(go_results(conn)) == 2, what="two calls")
    assert values(conn) == [['main.Point{X:1, Y:2, Label:"first"}'], ['main.Point{X:5, Y:2, Label:"first"}']]


def test_go_worker_silently_drops_a_pytask_it_dequeues(procs, conn):
    """A PyTask in a queue a go-delayed worker drains is dequeued and fails to decode as a GoTask
    ("Failed to dequeue task", then a 1 s back-off); the worker's next task overwrites it in
    q_processing, and it is gone from Redis."""
    from delayed.task import PyTask

    worker = procs.go_worker("q")
    queue = Queue("q", conn)
    queue.enqueue(PyTask("tests.tasks:record", ["lost"]))
    queue.enqueue(GoTask("main.String", "next"))
    wait_for(lambda: go_results(conn), what="the GoTask to run")
    blobs = conn.lrange("q", 0, -1) + conn.hvals("q_processing") + [r["task"] for r in queue.dead.list()]
    assert PyTask("tests.tasks:record", ["lost"]).serialize() not in blobs
    assert "Failed to deserialize task" in dequeue_errors(worker)[0] or "Failed to deserialize task" in worker.err()


def test_a_keep_alive_timeout_float32_cannot_print_whole_breaks_the_keep_alive(procs, conn):
    """delayed.KeepAliveTimeout(60 * time.Second) becomes the float32 60.000004, which redigo
    sends as "60.000004": every SETEX fails, the worker has no keep-alive key, and a sweeper
    requeues the task it is running, which then runs twice."""
    worker = procs.go_worker("q", keep_alive_timeout="60s", wait_for_event="starting")
    Queue("q", conn).enqueue(GoTask("main.Slow", ["busy", 1000]))
    wait_for(lambda: conn.get("started:busy"), what="the task to start")
    assert not conn.exists(worker.id)
    assert "ERR value is not an integer or out of range" in worker.err()
    assert procs.go_sweep_once("q") == [{"queue": "q", "requeued": 1}]   # while it still runs
    wait_for(lambda: conn.hget("executions", "busy") == b"2", what="the task to run twice")
