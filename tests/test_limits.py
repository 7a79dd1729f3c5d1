"""Limits per key (rate_limit, concurrency_limit, limit_key) on real Redis: admitted at a task's start by
admit.lua, for every worker of the queue; held tasks wait out of the queue and never spin a worker;
every script that ends a hold frees its slot in the same call, a worker's kill -9 included once its
keep-alive lapsed. Counted, never timed: starts are read by Redis's clock, and a bound on them holds
however late the calls ran."""
import collections
import hashlib
import re
import signal
import time

import pytest
import redis
from redis.crc import key_slot

from delayed import Middleware, PyTask, Queue, Worker
from delayed.protocol.connection import connect
from delayed.protocol.limits import all_limits
from delayed.protocol.sweeper_ops import SweeperOps
from delayed.protocol.worker_ops import ADMIT, WorkerOps
from delayed.wire.dead_letter import Reason, record
from delayed.wire.keys import QueueKeys, new_worker_id
from delayed.wire.limits import Admission, Limit, limit_of
from delayed.wire.options import TaskOptions
from delayed.wire.task import GoTask

from . import tasks
from .conftest import finish, results, spawn, stop, tags, wait_for
from .slowlog import every_command, sent

KEYS = QueueKeys.of("q")


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


@pytest.fixture
def worker_process(redis_server):
    """Start `python -m delayed.worker --queue q ARGS... tests.tasks`; any still running after the test is killed
    (a test that failed midway must leave no worker to take the next test's tasks)."""
    started = []

    def start(*args):
        process = spawn("delayed.worker", "--queue", "q", *args, "tests.tasks", redis_url=redis_server.url)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            finish(process)


def limited_keys(conn, key):
    """The keys one limit key of queue q has in Redis, the queue's holders hash included."""
    return {name for name in (KEYS.limit_holders, KEYS.limit_running(key), KEYS.limit_waiting(key)) if conn.exists(name)}


def claimed(queue, task):
    """Enqueue task to an empty queue and claim it as a live worker does (its keep-alive key set): (id, blob)."""
    queue.enqueue(task)
    worker_id = new_worker_id()
    queue.conn.set(worker_id, 1, ex=3600)
    [(_, blob)] = WorkerOps(queue).claim_batch((), [worker_id]).tasks
    return worker_id, blob


def redis_now(conn):
    """Redis's clock, which admit.lua reads: unix seconds."""
    seconds, micros = conn.time()
    return seconds + micros / 1e6


def admitted(queue, task):
    """claimed(queue, task), then admitted: (id, blob, what admit.lua said)."""
    worker_id, blob = claimed(queue, task)
    admission, _ = WorkerOps(queue).admit(worker_id, blob, limit_of(task.options, task.func_path))
    return worker_id, blob, admission


def test_the_limit_key_defaults_to_the_function_s_path():
    options = TaskOptions(rate_limit="100/m", concurrency_limit=5)
    assert limit_of(options, "tasks:add") == Limit("tasks:add", "100/m", 100, 60000, 5)
    assert limit_of(GoTask("main.Add", 1, rate_limit="2/s").options, "main.Add") == Limit("main.Add", "2/s", 2, 1000)
    assert limit_of(TaskOptions(concurrency_limit=1, limit_key="customer 42"), "tasks:add").key == "customer 42"
    assert limit_of(TaskOptions(max_retries=3), "tasks:add") is None


def test_a_rate_limit_admits_at_most_n_starts_per_period_across_worker_processes_and_holds_each_task_once(
        conn, queue, worker_process):
    n, total = 4, 16
    enqueued = redis_now(conn)
    handles = [queue.enqueue(PyTask(tasks.started_at, [f"t{i}"], rate_limit=f"{n}/s"), result_ttl=600)
               for i in range(total)]
    workers = [worker_process("--threads", "2", "--log-tasks", "--keep-alive-timeout", "5") for _ in range(3)]
    wait_for(lambda: conn.hlen("started_at") == total, what="every task to run")
    outputs = stop(*workers)
    starts = sorted(float(at) for at in conn.hvals("started_at"))
    for k in range(1, total // n + 1):  # a task starts after its admission, which is after the enqueue
        assert sum(at <= enqueued + k for at in starts) <= k * n, (k, [at - enqueued for at in starts])
    assert sorted(tags(conn)) == sorted(f"t{i}" for i in range(total))  # each ran once: none lost
    held = collections.Counter(re.findall(r"task ([0-9a-f]{32}) tests\.tasks:started_at held", "".join(outputs)))
    assert held and {handle.id for handle in handles} >= set(held), held  # the held ones ran later
    assert [handle.status() for handle in handles] == ["done"] * total


def test_identical_tasks_held_for_their_rate_take_no_start_before_it_is_due(conn, queue):
    """Reservations are the key's: a claim takes one only once it is due. (Keyed by the blob, a backlog
    of identical tasks let every fresh claim take a start reserved for the one held before it: the
    bench's 50/s limit started 1,619 tasks in one second.)"""
    task = PyTask(tasks.record, [], rate_limit="2/h")
    outcomes = [admitted(queue, task)[2] for _ in range(5)]
    assert outcomes == [Admission.ADMITTED] * 2 + [Admission.SCHEDULED] * 3
    assert conn.zcard("q_scheduled") == 3 and conn.zcard(KEYS.limit_reserved("tests.tasks:record")) == 3


def test_a_rate_held_task_claimed_once_its_start_is_due_starts(conn, queue):
    ops, task = WorkerOps(queue), PyTask(tasks.record, ["x"], rate_limit="1/s")
    assert admitted(queue, task)[2] is Admission.ADMITTED
    worker_id, blob = claimed(queue, task)
    admission, due = ops.admit(worker_id, blob, limit_of(task.options, task.func_path))
    assert admission is Admission.SCHEDULED and conn.zcard("q_scheduled") == 1
    wait_for(lambda: redis_now(conn) > due, what="its start to be due")
    assert queue.move_due() == 1  # as a worker's mover does
    worker_id, blob = claimed(queue, PyTask(tasks.record, ["y"]))  # the held one is at the head: claimed first
    assert ops.admit(worker_id, blob, limit_of(task.options, task.func_path))[0] is Admission.ADMITTED
    assert not conn.exists(KEYS.limit_reserved("tests.tasks:record")) and conn.zcard("q_scheduled") == 0


def test_a_concurrency_limit_runs_at_most_n_at_once_across_worker_processes(conn, queue, worker_process):
    n, total = 2, 8
    queue.enqueue_many([PyTask(tasks.limited, [f"t{i}", n, 0.05], concurrency_limit=n) for i in range(total)])
    workers = [worker_process("--threads", "3", "--keep-alive-timeout", "5") for _ in range(3)]
    wait_for(lambda: len(results(conn)) == total, what="every task to run")
    wait_for(lambda: not limited_keys(conn, "tests.tasks:limited"), what="every slot to be freed")
    stop(*workers)
    peaks = [int(peak) for peak in conn.lrange("peaks", 0, -1)]
    assert len(peaks) == total and max(peaks) == n, peaks  # n at once (each turn meets), never more
    assert sorted(tags(conn)) == sorted(f"t{i}" for i in range(total))


@pytest.mark.parametrize("threads", [1, 2])
def test_an_unlimited_task_behind_200_held_ones_runs_at_once_and_the_held_ones_run_in_order(conn, queue, run_worker,
                                                                                          threads):
    holder, _, admission = admitted(queue, PyTask(tasks.record, ["elsewhere"], concurrency_limit=1, limit_key="k"))
    assert admission is Admission.ADMITTED  # a live worker elsewhere holds the one slot
    queue.enqueue_many([PyTask(tasks.record, [f"h{i}"], concurrency_limit=1, limit_key="k") for i in range(200)])
    queue.enqueue(PyTask(tasks.record, ["free"]))
    run_worker(threads=threads)
    wait_for(lambda: tags(conn) == ["free"], what="the unlimited task")
    assert conn.llen(KEYS.limit_waiting("k")) == 200 and conn.llen("q") == 0
    WorkerOps(queue).claim_batch([holder], ())  # the task elsewhere is done
    wait_for(lambda: len(results(conn)) == 201, what="the held tasks, one at a time as the slot frees")
    assert tags(conn) == ["free"] + [f"h{i}" for i in range(200)]
    wait_for(lambda: not limited_keys(conn, "k"), what="the last slot to be freed")


def admit_sha():
    return hashlib.sha1(ADMIT.source.encode()).hexdigest().encode()


@pytest.mark.parametrize("limit", ["rate", "concurrency"])
def test_a_worker_whose_queue_holds_only_held_tasks_does_not_spin(conn, queue, run_worker, limit):
    if limit == "rate":  # the first starts; the others wait hours for theirs, in the scheduled set
        options, held = dict(rate_limit="1/h"), lambda: conn.zcard("q_scheduled") == 9
    else:  # a live worker elsewhere holds the one slot
        options, held = dict(concurrency_limit=1), lambda: conn.llen(KEYS.limit_waiting("tests.tasks:record")) == 10
        assert admitted(queue, PyTask(tasks.record, ["elsewhere"], **options))[2] is Admission.ADMITTED
    with every_command(conn):
        queue.enqueue_many([PyTask(tasks.record, [f"t{i}"], **options) for i in range(10)])
        worker = run_worker(dequeue_timeout=1)
        wait_for(held, what="the tasks to be held")
        assert conn.llen("q") == 0 and conn.llen("q_noti") == 0  # out of the queue
        before, started = conn.info("commandstats")["cmdstat_evalsha"]["calls"], time.monotonic()
        time.sleep(2)  # what the worker does meanwhile: it must not take a held task again
        calls = conn.info("commandstats")["cmdstat_evalsha"]["calls"] - before
        seconds = time.monotonic() - started
        admits = [command for command in sent(conn) if command.command[:2] == [b"EVALSHA", admit_sha()]]
    assert len(admits) == 10, len(admits)  # once each, ever
    assert calls < 20 * seconds, f"{calls} scripts in {seconds:.1f} s"  # an idle worker's claim, move and sweep
    assert tags(conn) == (["t0"] if limit == "rate" else []) and worker.id is not None


def test_a_worker_killed_holding_a_slot_frees_it_once_its_keep_alive_lapses(conn, queue, worker_process):
    queue.enqueue(PyTask(tasks.wait_for_key, ["first", "go"], concurrency_limit=1, limit_key="k"))
    first = worker_process("--threads", "2", "--keep-alive-timeout", "1")
    wait_for(lambda: conn.exists("started:first"), what="the first task to start")
    queue.enqueue(PyTask(tasks.record, ["second"], concurrency_limit=1, limit_key="k"))
    wait_for(lambda: conn.llen(KEYS.limit_waiting("k")) == 1, what="the second task to be held for the slot")
    first.send_signal(signal.SIGKILL)
    finish(first)
    assert conn.scard(KEYS.limit_running("k")) == 1 and conn.hlen("q_processing") == 1  # held by the dead worker
    second = worker_process("--sweep-interval", "0.2")
    wait_for(lambda: tags(conn) == ["second"], what="the held task, once the dead worker's slot freed")
    conn.set("go", 1)  # the first task, requeued by the sweep behind the one its slot woke, runs again
    wait_for(lambda: tags(conn) == ["second", "first"], what="the first task again")
    wait_for(lambda: not limited_keys(conn, "k") and not conn.hlen("q_processing"), what="its slot freed")
    [output] = stop(second)
    assert "requeued lost tasks" in output


def test_a_limit_key_with_odd_characters_holds_and_frees(conn, queue, run_worker):
    key = "customer: 42 {ünï}\n*"
    queue.enqueue(PyTask(tasks.wait_for_key, ["first", "go"], concurrency_limit=1, limit_key=key))
    queue.enqueue(PyTask(tasks.record, ["second"], concurrency_limit=1, limit_key=key))
    run_worker(threads=2)
    wait_for(lambda: conn.llen(KEYS.limit_waiting(key)) == 1, what="the second task to be held")
    assert conn.smembers(KEYS.limit_running(key)) == set(conn.hkeys("q_processing"))
    assert [limits.key for limits in all_limits(conn, "q")] == [key]
    conn.set("go", 1)
    wait_for(lambda: tags(conn) == ["first", "second"], what="both tasks")
    wait_for(lambda: not limited_keys(conn, key), what="the slot freed")


def test_a_limited_task_on_a_cluster_keeps_every_limit_key_in_its_queue_s_slot(cluster):
    client = connect(cluster.url)
    queue = Queue("{orders}", client)
    keys = queue.keys
    check = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    ids = [keys.worker_ids(1)[0] for _ in range(2)]
    for worker_id in ids:
        check.set(worker_id, 1, ex=600)
    queue.enqueue_many([PyTask(tasks.record, [tag], concurrency_limit=1, rate_limit="1/h", limit_key="k:{x}")
                        for tag in ("a", "b")], result_ttl=60)
    ops = WorkerOps(queue)
    claims = ops.claim_batch((), ids).tasks
    limit = Limit("k:{x}", "1/h", 1, 3600000, 1)
    assert [ops.admit(worker_id, blob, limit)[0] for worker_id, blob in claims] == [Admission.ADMITTED,
                                                                                   Admission.WAITING]
    written = [keys.limits, keys.limit_holders, keys.limit_running("k:{x}"), keys.limit_waiting("k:{x}"),
               keys.limit_starts("k:{x}")]
    assert all(check.exists(key) for key in written)
    assert {key_slot(key.encode()) for key in written} == {key_slot(b"{orders}")}
    ops.claim_batch([ids[0]], ())  # the release frees the slot and wakes the held task
    assert not check.exists(keys.limit_running("k:{x}")) and check.llen("{orders}") == 1


ENDINGS = {
    "release": lambda queue, worker_id, blob: WorkerOps(queue).claim_batch([worker_id], ()),
    "requeue": lambda queue, worker_id, blob: WorkerOps(queue).requeue(blob, blob, worker_id),
    "reschedule": lambda queue, worker_id, blob: WorkerOps(queue).reschedule(blob, blob, time.time() + 3600, worker_id),
    "bury": lambda queue, worker_id, blob: queue.dead.bury(worker_id, blob, record(
        reason=Reason.FAILED, error="x", blob=blob, queue="q", worker=worker_id, func="f", at=time.time())),
    "give_back": lambda queue, worker_id, blob: WorkerOps(queue).give_back([(worker_id, blob)]),
    "sweep": lambda queue, worker_id, blob: queue.conn.delete(worker_id) and SweeperOps(queue).requeue_lost(max_crashes=0),
}
"""Each way a task leaves <queue>_processing, by the script that ends its hold."""


@pytest.mark.parametrize("ending", ENDINGS)
def test_every_script_that_ends_a_hold_frees_its_slot_and_wakes_a_held_task(conn, queue, ending):
    """The script frees the slot the id held, and moves the oldest task waiting for one to the head of the
    queue, with its notification, in the same call."""
    holder, blob, admission = admitted(queue, PyTask(tasks.record, ["holder"], concurrency_limit=1, limit_key="k"))
    assert admission is Admission.ADMITTED
    _, waiting, admission = admitted(queue, PyTask(tasks.record, ["waiter"], concurrency_limit=1, limit_key="k"))
    assert admission is Admission.WAITING and conn.hlen("q_processing") == 1
    assert conn.llen("q") == conn.llen("q_noti") == 0
    ENDINGS[ending](queue, holder, blob)
    assert not conn.exists(KEYS.limit_running("k"), KEYS.limit_holders, KEYS.limit_waiting("k"))
    assert conn.lindex("q", 0) == waiting and conn.llen("q_noti") == conn.llen("q")


def test_a_holder_a_go_delayed_sweeper_requeued_without_freeing_is_dropped_at_the_next_admission(conn, queue):
    def task(tag):
        return PyTask(tasks.record, [tag], concurrency_limit=2, limit_key="k")

    holders = [admitted(queue, task(f"h{i}")) for i in range(2)]
    waiters = [admitted(queue, task(f"w{i}")) for i in range(2)]
    assert [admission for *_, admission in holders + waiters] == [Admission.ADMITTED] * 2 + [Admission.WAITING] * 2
    newcomer, blob = claimed(queue, task("n"))
    for worker_id, held, _ in holders:  # go-delayed's sweeper: its requeue knows nothing of limits
        conn.hdel("q_processing", worker_id)
        conn.rpush("q", held)
        conn.rpush("q_noti", 1)
    limit = limit_of(task("n").options, "tests.tasks:record")
    assert WorkerOps(queue).admit(newcomer, blob, limit)[0] is Admission.ADMITTED  # the dead holders are dropped
    assert conn.smembers(KEYS.limit_running("k")) == {newcomer.encode()}
    assert conn.lindex("q", 0) == waiters[0][1] and conn.llen(KEYS.limit_waiting("k")) == 1  # the spare slot woke one


@pytest.mark.parametrize("limit", ["concurrency", "rate"])
def test_a_held_tracked_task_says_where_it_waits_and_is_cancelled_there(conn, queue, limit):
    options = dict(concurrency_limit=1) if limit == "concurrency" else dict(rate_limit="1/h")
    assert admitted(queue, PyTask(tasks.record, ["first"], **options))[2] is Admission.ADMITTED
    handle = queue.enqueue(PyTask(tasks.record, ["held"], **options), result_ttl=60)
    worker_id = new_worker_id()
    [(_, blob)] = WorkerOps(queue).claim_batch((), [worker_id]).tasks
    assert handle.status() == "running" and handle.info().attempts == 1
    admission, due = WorkerOps(queue).admit(worker_id, blob, limit_of(TaskOptions(**options), "tests.tasks:record"),
                                            handle.id)
    info = handle.info()
    assert (info.attempts, info.worker) == (0, None)  # it did not run
    if limit == "concurrency":
        assert (admission, info.status, due, info.due) == (Admission.WAITING, "pending", 0.0, None)
    else:
        assert (admission, info.status, info.due) == (Admission.SCHEDULED, "scheduled", due) and due > time.time() + 3000
    assert handle.cancel() and handle.status() == "cancelled"
    assert not conn.exists(KEYS.limit_waiting("tests.tasks:record")) and conn.zcard("q_scheduled") == 0


def test_the_limits_read_says_each_key_s_limits_and_what_it_holds(conn, queue):
    slots = [admitted(queue, PyTask(tasks.record, [i], concurrency_limit=1, limit_key="slots"))[2] for i in range(2)]
    rate = [admitted(queue, PyTask(tasks.record, [i], rate_limit="1/h", limit_key="rate"))[2] for i in range(3)]
    assert (slots, rate) == ([Admission.ADMITTED, Admission.WAITING], [Admission.ADMITTED] + [Admission.SCHEDULED] * 2)
    found = {limits.key: limits for limits in all_limits(conn, "q")}
    assert [(limits.key, limits.rate_limit, limits.concurrency_limit, limits.running, limits.waiting, limits.scheduled,
             limits.started, limits.held) for limits in found.values()] == [
        ("rate", "1/h", None, 0, 0, 2, 1, 2), ("slots", None, 1, 1, 1, 0, 0, 1)]
    assert abs(found["slots"].seen - time.time()) < 3600


def test_execute_runs_a_limited_task_without_asking_redis(conn, queue):
    settlement = Worker(queue, ["tests.tasks"]).execute(PyTask(tasks.record, ["x"], concurrency_limit=1).serialize())
    assert settlement.outcome == "done" and tags(conn) == ["x"] and not conn.exists(KEYS.limits)


def test_a_fenced_admission_does_not_run_the_task(conn, queue, caplog):
    worker_id, blob = claimed(queue, PyTask(tasks.record, ["x"], concurrency_limit=1))
    conn.hdel("q_processing", worker_id)  # a sweeper took it back
    limit = limit_of(TaskOptions(concurrency_limit=1), "tests.tasks:record")
    assert WorkerOps(queue).admit(worker_id, blob, limit) == (Admission.FENCED, 0.0)
    assert not conn.exists(KEYS.limit_running(limit.key))


class Seen(Middleware):
    """Notes which hooks of a worker's middleware ran, for which task, and the outcome after_call was told."""

    def __init__(self):
        self.seen = []

    def before_call(self, call):
        self.seen.append(("before", call.task.args[0]))

    def after_call(self, call):
        self.seen.append(("after", call.task.args[0], call.outcome))


def test_a_held_task_reaches_no_before_call_and_after_call_is_told_held(conn, queue, run_worker):
    """Admission comes before the user's middleware: before_call sees only the tasks that are called."""
    assert admitted(queue, PyTask(tasks.record, ["elsewhere"], concurrency_limit=1))[2] is Admission.ADMITTED
    queue.enqueue(PyTask(tasks.record, ["held"], concurrency_limit=1))
    queue.enqueue(PyTask(tasks.record, ["free"]))
    middleware = Seen()
    run_worker(middleware=[middleware])
    wait_for(lambda: tags(conn) == ["free"], what="the unlimited task")
    assert middleware.seen == [("after", "held", "held"), ("before", "free"), ("after", "free", "done")]


def test_a_worker_counts_held_tasks_as_held_not_done(conn, queue, run_worker):
    seen = []
    queue.enqueue(PyTask(tasks.wait_for_key, ["first", "go"], concurrency_limit=1))
    run_worker(threads=2, observe=lambda queue, func, outcome, seconds: seen.append((func, outcome, seconds)))
    wait_for(lambda: conn.exists("started:first"), what="the first task to start")
    queue.enqueue(PyTask(tasks.wait_for_key, ["second", "go"], concurrency_limit=1))
    wait_for(lambda: seen, what="the second task held")
    assert seen == [("tests.tasks:wait_for_key", "held", None)] and not conn.hget("q_counts", "done")
    conn.set("go", 1)
    wait_for(lambda: len(seen) == 3, what="both tasks done")
    assert [outcome for _, outcome, _ in seen] == ["held", "done", "done"]
    wait_for(lambda: conn.hget("q_counts", "done") == b"2", what="both releases")
