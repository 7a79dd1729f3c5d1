"""Recovery across runtimes: one runtime's sweeper requeues what the other's dead workers held,
go-delayed's sweeper and our sweeping workers share a queue, delayed GoTasks reach Go workers
through our sweeper, and our crash-loop quarantine leaves go-delayed's normal behaviour alone."""
import time
from collections import Counter

from conftest import SIGHUP, SIGKILL, executions, go_results, py_results, wait_for

from delayed.queue import Queue
from delayed.task import GoTask, PyTask


def test_go_worker_killed_mid_task_is_requeued_by_our_sweeper(procs, conn):
    """A Go worker SIGKILLed inside a task leaves it in q_processing; once its keep-alive key
    expires our sweeper requeues it, and another Go worker runs it to the end."""
    first = procs.go_worker("q")
    Queue("q", conn).enqueue(GoTask("main.Slow", ["slow-1", 5000]))
    wait_for(lambda: conn.get("started:slow-1"), what="the task to start")
    first.kill()
    assert conn.hexists("q_processing", first.id)
    procs.py_sweeper("q")
    second = procs.go_worker("q")
    wait_for(lambda: executions(conn).get("slow-1"), what="the requeued task to finish")
    assert executions(conn) == {"slow-1": 1}
    [record] = go_results(conn)
    assert record["pid"] == str(second.pid)
    assert conn.xlen("q_dead_letters") == 0


def test_our_worker_killed_holding_a_batch_is_recovered_by_go_delayed(procs, conn):
    """Our worker SIGKILLed while it holds a batch (a slow task and the ones claimed with it):
    go-delayed's RequeueLost (gosweeper) moves every held task back, and a new worker runs
    them all; none lost, and only the tasks that were held can run twice."""
    queue = Queue("q", conn)
    tasks = [PyTask("tests.tasks:count", [f"c{i}"]) for i in range(300)]
    tasks.insert(200, PyTask("tests.tasks:slow", ["slow", 2]))
    queue.enqueue_many(tasks)
    worker = procs.py_worker("q", "--batch", "32")
    wait_for(lambda: conn.get("started:slow"), what="the slow task to start")
    worker.kill()
    held = conn.hgetall("q_processing")
    assert len(held) > 1, "the worker held no batch: the test shows nothing"

    procs.go_sweeper("q")
    wait_for(lambda: not conn.hlen("q_processing"), what="gosweeper to requeue the held tasks")
    procs.py_worker("q")
    wait_for(lambda: len(executions(conn)) == 300 and py_results(conn), what="every task to run")
    ran = executions(conn)
    doubled = {task_id for task_id, n in ran.items() if n > 1}
    held_ids = {PyTask.deserialize(blob).args[0] for blob in held.values()} - {"slow"}
    assert doubled <= held_ids
    assert set(ran.values()) <= {1, 2}
    assert py_results(conn) == ["('slow', (), {})"]
    assert conn.xlen("q_dead_letters") == 0


def test_go_delayeds_sweeper_and_our_sweeping_workers_lose_nothing_as_workers_are_killed(procs, conn):
    """go-delayed's sweeper (RequeueLost, which knows no lock of ours) and our workers, each sweeping
    the queue every 0.2 s, race to requeue the tasks of our workers SIGKILLed three times over: every
    task runs, and a task runs again only once per kill that found it held (none is requeued twice),
    and no crash loop comes of the race."""
    total = 300
    Queue("q", conn).enqueue_many(PyTask("tests.tasks:count_slowly", [f"t{i}", 0.01]) for i in range(total))
    procs.go_sweeper("q", interval="300ms")
    held: Counter = Counter()
    for kills in range(1, 4):
        workers = [procs.py_worker("q", "--batch", "4", "--sweep-interval", "0.2") for _ in range(2)]
        wait_for(lambda: len(executions(conn)) >= kills * 60, timeout=30, what=f"tasks to run before kill {kills}")
        for worker in workers:
            worker.kill()
        holding = conn.hvals("q_processing")  # under dead ids now: both sweepers go for them
        assert holding, "the killed workers held nothing: the test shows nothing"
        held.update(PyTask.deserialize(blob).args[0] for blob in holding)
    procs.py_worker("q", "--sweep-interval", "0.2")
    procs.py_worker("q", "--sweep-interval", "0.2")
    wait_for(lambda: len(executions(conn)) == total and not conn.hlen("q_processing") and not conn.llen("q"),
             timeout=60, what="every task to run, the killed workers' too")
    assert conn.exists("q_swept")  # our workers claim the queue's sweeps
    over = {task_id: runs for task_id, runs in executions(conn).items() if runs > 1 + held[task_id]}
    assert not over, f"run more often than once plus once per kill that found them held: {over}"
    assert conn.xlen("q_dead_letters") == 0


def test_delayed_gotask_is_moved_by_our_sweeper_and_run_by_go_not_early(procs, conn):
    """queue.enqueue(GoTask, delay=2) waits in q_scheduled; our sweeper moves it when due and a
    Go worker runs it then, not before."""
    procs.go_worker("q")
    procs.py_sweeper("q")
    enqueued = time.time()
    Queue("q", conn).enqueue(GoTask("main.String", "later"), delay=2)
    wait_for(lambda: go_results(conn), what="the delayed task to run", interval=0.01)
    ran_after = time.time() - enqueued  # seen at once (interval 0.01): run no sooner than due
    assert ran_after >= 2, ran_after
    assert [r["args"][0]["json"] for r in go_results(conn)] == ["later"]


def test_clean_stops_of_go_workers_do_not_dead_letter_a_healthy_gotask(procs, conn):
    """go-delayed never releases its last task, so each clean (SIGHUP) stop leaves it in
    q_processing under a dead id, and our sweeper requeues it: that is go-delayed's normal
    behaviour, not a crash. Four such stops must not quarantine the task as a crash loop
    (--max-crashes 3): it stays in the queue, and no crash is counted."""
    procs.py_sweeper("q", max_crashes=3)
    Queue("q", conn).enqueue(GoTask("main.String", "healthy"))
    for stop in range(1, 5):
        worker = procs.go_worker("q")
        wait_for(lambda: len(go_results(conn)) == stop, what=f"run {stop}")
        worker.signal(SIGHUP)
        assert worker.wait() == 0
        wait_for(lambda: conn.llen("q") == 1 or Queue("q", conn).dead.count() == 1, what="the sweeper to move the task")
    assert Queue("q", conn).dead.list() == []
    assert conn.lrange("q", 0, -1) == [GoTask("main.String", "healthy").serialize()]  # as enqueued


def test_our_workers_crashes_are_still_counted(procs, conn):
    """The quarantine still works for our own workers: a task that kills its Python worker every
    time is dead-lettered as crash_loop after --max-crashes + 1 deaths."""
    procs.py_sweeper("q", max_crashes=1)
    Queue("q", conn).enqueue(PyTask("tests.tasks:kill_my_worker"))
    for _ in range(2):
        worker = procs.py_worker("q", "--batch", "1", alive=False)
        assert worker.wait() == -SIGKILL
    wait_for(lambda: Queue("q", conn).dead.count(), what="the crash loop to be dead-lettered")
    [record] = Queue("q", conn).dead.list()
    assert record["reason"] == "crash_loop"
