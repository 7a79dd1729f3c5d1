"""The keep-alive lives in a helper process: a task that holds the worker's GIL cannot starve it."""
import logging
import os
import signal
import threading
import time
from typing import List

from delayed import PyTask, Worker
from delayed.queue import Queue
from delayed.testing import free_port

from .conftest import WAIT, results, spawn, wait_for
from .test_metrics import scrape


def test_a_task_holding_the_gil_past_the_keep_alive_timeout_is_not_taken_for_dead(conn, redis_server):
    queue = Queue("q", conn)
    queue.enqueue(PyTask("tests.tasks:hold_gil", ["gil", 3 * 10 ** 8]))  # one C call of a few seconds
    worker = spawn("delayed.worker", "--queue", "q", "--keep-alive-timeout", "1", "tests.tasks",
                   redis_url=redis_server.url)
    try:
        wait_for(lambda: conn.exists("started:gil"), what="the task to start")
        started = time.monotonic()
        while not results(conn):  # a sweeper sweeping all along
            assert queue.requeue_lost() == 0
            assert conn.hlen("q_processing") == 1 and conn.llen("q") == 0
            time.sleep(0.1)
        assert time.monotonic() - started > 1.5, "the task did not hold the GIL past the keep-alive timeout"
        assert results(conn) == [repr(("gil", (), {}))]
        assert not conn.exists("q_crashes")
        wait_for(lambda: conn.hlen("q_processing") == 0, what="release")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(WAIT)


def test_a_killed_worker_s_keep_alive_helper_dies_with_it(conn, redis_server):
    worker = spawn("delayed.worker", "--queue", "q", "--keep-alive-timeout", "1", "tests.tasks",
                   redis_url=redis_server.url)
    try:
        [worker_id] = wait_for(lambda: conn.zrange("q_workers", 0, -1), what="the worker online")
    finally:
        worker.kill()
        worker.wait(WAIT)
    wait_for(lambda: not conn.exists(worker_id), what="its keep-alive key to lapse")


def test_a_stopped_worker_leaves_no_helper_behind(conn, redis_server):
    worker = spawn("delayed.worker", "--queue", "q", "--keep-alive-timeout", "1", "tests.tasks",
                   redis_url=redis_server.url)
    [worker_id] = wait_for(lambda: conn.zrange("q_workers", 0, -1), what="the worker online")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(WAIT) == 0
    time.sleep(0.6)
    assert not conn.exists(worker_id)  # deleted at going offline, and not set again by a helper


def test_the_command_line_s_workers_fork_their_helper_single_or_supervised(conn, redis_server):
    # their own threads at that moment (the signal watcher, the orphan check) hold no client lock
    for concurrency in ("1", "2"):
        worker = spawn("delayed.worker", "--queue", "q", "--concurrency", concurrency, "--log-level", "INFO",
                       "tests.tasks", redis_url=redis_server.url)
        wait_for(lambda: conn.zcard("q_workers") == int(concurrency), what="the workers online")
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=WAIT)
        assert output.count("online") >= int(concurrency) and "refreshed by a thread" not in output, output
        conn.delete("q_workers")


def test_a_worker_started_beside_other_threads_keeps_its_keys_from_a_thread_not_a_forked_helper(
        conn, redis_server, caplog):
    # A child forked beside other threads inherits their locks as they stand; one held then (a Redis
    # client's, say) stays locked in the child for good: a helper forked in this pytest process once
    # hung its worker's stop forever. So a worker run in a thread of a bigger program does not fork.
    caplog.set_level(logging.INFO, "delayed.worker.keepalive")
    busy = threading.Thread(target=time.sleep, args=(5,), daemon=True)  # another program's thread
    busy.start()
    worker = Worker(Queue("q", conn), ["tests.tasks"], keep_alive_interval=0.25, keep_alive_timeout=1)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    thread.start()
    try:
        wait_for(lambda: worker.id and conn.exists(worker.id), what="the worker online")
        # the keys exist before the keep-alive starts (and logs), so wait for its line too
        wait_for(lambda: "refreshed by a thread, not a helper process" in caplog.text, what="the keep-alive's line")
        time.sleep(1.5)  # past the keep-alive timeout: the thread kept the keys
        assert conn.exists(worker.id)
    finally:
        worker.stop()
        thread.join(WAIT)
    assert not thread.is_alive()


def children(pid: int) -> List[str]:
    """The pids of a process's children (Linux)."""
    with open(f"/proc/{pid}/task/{pid}/children") as listed:
        return listed.read().split()


def test_a_worker_serving_metrics_still_forks_its_helper(conn, redis_server):
    # The metrics server runs a thread; started before the helper's fork, it kept the worker from forking.
    port = free_port()
    worker = spawn("delayed.worker", "--queue", "q", "--keep-alive-timeout", "1", "--metrics-port", str(port),
                   "--log-level", "INFO", "tests.tasks", redis_url=redis_server.url)
    try:
        [worker_id] = wait_for(lambda: conn.zrange("q_workers", 0, -1), what="the worker online")
        # the worker lists itself online, then forks its helper: stopped before that, nothing refreshes
        wait_for(lambda: children(worker.pid), what="the keep-alive helper forked")
        os.kill(worker.pid, signal.SIGSTOP)  # the worker's own threads stop with it; its helper does not
        try:
            stopped = time.monotonic()
            while time.monotonic() - stopped < 2.5:  # past the keep-alive timeout
                assert conn.exists(worker_id), "the keep-alive lapsed while the worker was stopped"
                time.sleep(0.1)
        finally:
            os.kill(worker.pid, signal.SIGCONT)
        Queue("q", conn).enqueue(PyTask("tests.tasks:record", ["scraped"]))
        def counted() -> bool:  # the server starts a moment after the worker lists itself online
            try:
                samples = scrape(port)
            except OSError:
                return False
            return samples.get(("delayed_tasks_total", (("function", "tests.tasks:record"), ("outcome", "done"),
                                                        ("queue", "q")))) == 1

        wait_for(counted, what="the task counted on /metrics")
    finally:
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=WAIT)
    assert worker.returncode == 0, output
    assert "refreshed by a thread" not in output, output
