"""Pausing a queue: our workers take no new task from it until it is resumed; the scripts decide."""
import json
import logging
import time

from delayed import PyTask, Queue
from delayed.protocol.worker_ops import WorkerOps

from . import tasks
from .conftest import results, tags, wait_for
from .test_operating import run


def test_a_paused_queue_gives_no_task_to_a_claim_but_an_id_gets_back_what_it_holds(conn):
    queue = Queue("q", conn)
    queue.enqueue_many([PyTask(tasks.record, ["a"]), PyTask(tasks.record, ["b"])])
    [(_, held)] = WorkerOps(queue).claim_batch([], ["w1"]).tasks
    assert queue.pause() and not queue.pause()
    claimed = WorkerOps(queue).claim_batch([], ["w1", "w2"])
    assert claimed.paused and claimed.tasks == [("w1", held)]  # a resent claim still gets its task
    assert WorkerOps(queue).claim("w3", timeout=0.05) is None  # the dequeue script puts the notification back
    assert conn.llen("q") == conn.llen("q_noti") == 1
    assert queue.paused_since() is not None
    assert queue.resume() and not queue.resume()
    claimed = WorkerOps(queue).claim_batch([], ["w2"])
    assert not claimed.paused and len(claimed.tasks) == 1


def test_a_worker_stops_claiming_from_a_paused_queue_says_so_and_goes_on_once_resumed(conn, start_worker, caplog):
    caplog.set_level(logging.INFO, logger="delayed.worker.holding")
    queue = Queue("q", conn)
    queue.pause()
    worker = start_worker("q", threads=3)
    queue.enqueue(PyTask(tasks.record, ["waited"]))
    wait_for(lambda: "'q' is paused" in caplog.text, what="the worker to say the queue is paused")
    time.sleep(0.3)
    assert results(conn) == [] and conn.llen("q") == 1
    queue.resume()
    wait_for(lambda: tags(conn) == ["waited"], what="the task, once resumed")
    assert f"queue 'q' resumed: worker {worker.holdings.holdings[0].id} takes its tasks again" in caplog.text


def test_a_worker_serving_a_paused_queue_takes_the_next_one_s_tasks_and_does_not_spin(conn, start_worker):
    Queue("high", conn).pause()
    Queue("high", conn).enqueue(PyTask(tasks.record, ["high"]))
    start_worker("high", "low", batch=1)
    Queue("low", conn).enqueue(PyTask(tasks.record, ["low"]))
    wait_for(lambda: tags(conn) == ["low"], what="the second queue's task")
    Queue("low", conn).pause()
    before, started = conn.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0), time.monotonic()
    time.sleep(1)
    calls = conn.info("commandstats")["cmdstat_evalsha"]["calls"] - before
    seconds = time.monotonic() - started  # (more than a second on a loaded machine: as many more rounds)
    assert calls < 100 * seconds, f"{calls} scripts in {seconds:.1f} s with every queue paused"  # a round per 50 ms
    assert tags(conn) == ["low"]
    Queue("high", conn).resume()
    wait_for(lambda: tags(conn) == ["low", "high"], what="the first queue's task, once resumed")


def test_pause_and_resume_from_the_command_line_and_stats_shows_it(conn, redis_server):
    status, out, err = run("pause", "q", url=redis_server.url)
    assert status == 0, err
    assert out.startswith("paused q: our workers take no new task from it; go-delayed's workers do not know")
    assert run("pause", "q", url=redis_server.url)[1] == "paused q (it was paused already)\n"
    status, out, err = run("stats", "--queue", "q", "--json", url=redis_server.url)
    assert json.loads(out)[0]["paused"] is True
    status, out, err = run("resume", "q", "--json", url=redis_server.url)
    assert json.loads(out) == [{"queue": "q", "paused": False, "changed": True}]
    assert not conn.exists("q_paused")
