"""Queue operations against a real Redis: the exact keys go-delayed uses, and the sweep."""
import asyncio
import re
import secrets
import time

import msgpack
import pytest
import redis.asyncio

from delayed import AsyncQueue, GoTask, PyTask, TaskArgumentError, TaskTooLargeError, delayed
from delayed.protocol.sweeper_ops import SweeperOps
from delayed.protocol.worker_ops import WorkerOps
from delayed.queue import Queue
from delayed.wire.dead_letter import record
from delayed.wire.keys import new_worker_id

from . import slowlog, tasks


@pytest.fixture
def queue(conn):
    q = Queue("q", conn, dequeue_timeout=0.1, keep_alive_timeout=5)
    q.worker_id = new_worker_id()
    return q


def command_calls(conn, command):
    return int(conn.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_enqueue_writes_the_blob_and_one_notification(conn, queue):
    task = PyTask("m:f", [1])
    queue.enqueue(task)
    assert conn.lrange("q", 0, -1) == [task.serialize()]
    assert conn.lrange("q_noti", 0, -1) == [b"1"]
    assert queue.len() == 1


def test_dequeue_holds_the_task_in_processing_until_release(conn, queue):
    queue.enqueue(PyTask("m:f", [1]))
    task = queue.dequeue()
    assert (task.func_path, task.args) == ("m:f", [1])
    assert conn.hgetall("q_processing") == {queue.worker_id.encode(): task.serialize()}
    assert conn.llen("q") == conn.llen("q_noti") == 0
    queue.release()
    assert conn.hlen("q_processing") == 0


def test_dequeue_times_out_with_none(queue):
    assert queue.dequeue() is None


def test_a_notification_without_a_task_is_harmless(conn, queue):
    # go-delayed's script would HSET `false` here and error; ours returns nothing and holds nothing.
    conn.rpush("q_noti", 1)
    assert WorkerOps(queue).claim(queue.worker_id) is None
    assert conn.hlen("q_processing") == 0


def test_enqueue_many_is_one_round_trip_of_two_pushes(conn, queue):
    conn.config_resetstat()
    batch = [PyTask("m:f", [i]) for i in range(500)] + [GoTask("main.F", i) for i in range(500)]
    assert queue.enqueue_many(batch) == 1000
    assert command_calls(conn, "rpush") == 2
    assert conn.lrange("q", 0, -1) == [task.serialize() for task in batch]
    assert conn.llen("q_noti") == 1000
    assert queue.enqueue_many([]) == 0


def test_oversized_tasks_are_refused_before_touching_redis(conn):
    queue = Queue("q", conn, max_task_size=100)
    with pytest.raises(TaskTooLargeError, match="m:f: .* over .* 100"):
        queue.enqueue_many([PyTask("m:f", ["small"]), PyTask("m:f", ["x" * 200])])
    assert conn.exists("q", "q_noti") == 0


def test_a_task_msgpack_cannot_write_is_refused_before_touching_redis(conn, queue):
    with pytest.raises(TaskArgumentError, match=r"^task tests.tasks:record: kwargs\['when'\] is of type object, "):
        queue.enqueue_many([PyTask(tasks.record, ["fine"]), PyTask(tasks.record, [], {"when": object()})])
    with pytest.raises(TaskArgumentError, match=r"^task tests.tasks:record: args\[0\] is of type complex, "):
        delayed(queue)(tasks.record).delay(1j)
    assert conn.exists("q", "q_noti") == 0


def test_requeue_releases_and_enqueues_atomically(conn, queue):
    queue.enqueue(PyTask("m:f", retry=2))
    held = WorkerOps(queue).claim(queue.worker_id)
    retried = PyTask.deserialize(held).with_retry(1).serialize()
    assert WorkerOps(queue).requeue(held, retried, queue.worker_id)
    assert conn.lrange("q", 0, -1) == [retried]
    assert conn.llen("q_noti") == 1
    assert conn.hlen("q_processing") == 0


def test_bury_appends_the_record_and_releases(conn, queue):
    queue.enqueue(PyTask("m:f"))
    held = WorkerOps(queue).claim(queue.worker_id)
    assert queue.dead.bury(queue.worker_id, held, {"record": b'{"reason": "x"}', "task": held})
    [(_, fields)] = conn.xrange("q_dead_letters")
    assert fields == {b"record": b'{"reason": "x"}', b"task": held}
    assert conn.hlen("q_processing") == 0


def test_retry_and_bury_are_fenced_once_a_sweeper_took_the_task(conn, queue):
    # The worker's keep-alive lapsed mid-task (it never went online here), a sweeper
    # requeued its task, another worker may be running it: this one must not add a copy.
    queue.enqueue(PyTask("m:f", retry=1))
    held = WorkerOps(queue).claim(queue.worker_id)
    assert queue.requeue_lost() == 1
    assert not WorkerOps(queue).requeue(held, PyTask("m:f").serialize(), queue.worker_id)
    assert not queue.dead.bury(queue.worker_id, held, record(reason="failed", error="e", blob=held, queue="q", worker=None))
    assert conn.lrange("q", 0, -1) == [PyTask("m:f", retry=1, options={"crashes": 1}).serialize()]  # one crash counted
    assert conn.llen("q_noti") == 1 and not conn.exists("q_dead_letters")


def test_dequeue_without_a_worker_id_raises_before_it_takes_a_notification(conn):
    """keakon's dequeue() on a queue whose worker_id was never set is a ValueError, and every task keeps
    its notification (it used to BLPOP one first, leaving a task no worker would wake for)."""
    queue = Queue("default", conn, dequeue_timeout=0.1)
    queue.enqueue(PyTask("tests.tasks:record", ["a"]))
    queue.enqueue(PyTask("tests.tasks:record", ["b"]))
    with pytest.raises(ValueError, match="no worker id"):
        queue.dequeue()
    assert (conn.llen("default"), conn.llen("default_noti")) == (2, 2)


def test_keep_alive_key_is_the_bare_worker_id(conn, queue):
    assert WorkerOps(queue, queue.keep_alive_timeout).try_online([queue.worker_id])
    assert queue.worker_id.startswith("delayed-py-") and len(queue.worker_id) == len("delayed-py-") + 32
    assert 0 < conn.pttl(queue.worker_id) <= 5000
    assert not WorkerOps(queue).try_online([queue.worker_id])  # a live worker's id cannot be claimed again
    WorkerOps(queue).go_offline([queue.worker_id])
    assert not conn.exists(queue.worker_id)


def test_requeue_lost_moves_only_dead_workers_tasks(conn, queue):
    queue.enqueue_many([PyTask("m:dead"), PyTask("m:alive")])
    WorkerOps(queue).claim(queue.worker_id)                                  # held by a worker that never went online: dead
    alive = Queue("q", conn, dequeue_timeout=0.1)
    alive.worker_id = new_worker_id()
    assert WorkerOps(alive).try_online([alive.worker_id])
    WorkerOps(alive).claim(alive.worker_id)
    assert queue.requeue_lost() == 1
    assert conn.lrange("q", 0, -1) == [PyTask("m:dead", options={"crashes": 1}).serialize()]
    assert conn.llen("q_noti") == 1
    assert conn.hgetall("q_processing") == {alive.worker_id.encode(): PyTask("m:alive").serialize()}
    assert queue.requeue_lost() == 0


def test_requeue_lost_tops_up_notifications_in_bulk(conn, queue):
    # A producer that died between its two pushes leaves tasks without notifications;
    # 10,000 at once is past what Lua's unpack() takes in one call.
    conn.rpush("q", *[PyTask("m:f", [i]).serialize() for i in range(10_000)])
    assert queue.requeue_lost(notify_after=0) == 10_000
    assert conn.llen("q_noti") == 10_000


def test_a_task_whose_notification_a_worker_holds_gets_no_second_one(conn, queue):
    """A worker (go-delayed's, or ours when idle) BLPOPs a notification, then pops the task a
    round trip later. A sweep in between sees a task without a notification; topping it up
    would leave a stray notification once the worker popped the task, and go-delayed's dequeue
    errors on a stray one and backs its worker off for a second or more."""
    queue.enqueue(PyTask("m:f"))
    conn.lpop("q_noti")                  # a worker's BLPOP; its dequeue has not run yet
    assert queue.requeue_lost() == 0
    conn.lpop("q")                       # its dequeue
    assert conn.llen("q_noti") == 0


def test_tasks_without_notifications_get_them_once_the_queue_stood_still(conn, queue):
    """A deficit that outlives a worker's round trip is real (a producer died between its two
    pushes, a worker died between BLPOP and dequeue): once the head of the queue has not moved
    for notify_after seconds, a sweep pushes the missing notifications."""
    conn.rpush("q", *[PyTask("m:f", [i]).serialize() for i in range(3)])
    assert queue.requeue_lost(notify_after=0.2) == 0        # first seen
    assert queue.requeue_lost(notify_after=3600) == 0       # not long enough
    time.sleep(0.25)
    assert queue.requeue_lost(notify_after=0.2) == 3
    assert conn.llen("q_noti") == 3
    assert queue.requeue_lost(notify_after=0.2) == 0


def test_a_moving_queue_is_not_topped_up(conn, queue):
    """Tasks short of notifications while the head moves are being taken: no top-up yet."""
    conn.rpush("q", *[PyTask("m:f", [i]).serialize() for i in range(3)])
    assert queue.requeue_lost(notify_after=0.1) == 0
    conn.lpop("q")
    time.sleep(0.15)
    assert queue.requeue_lost(notify_after=0.1) == 0        # a new head: its clock starts now
    time.sleep(0.15)
    assert queue.requeue_lost(notify_after=0.1) == 2


def test_requeued_task_runs_after_the_worker_that_held_it_died(conn, queue):
    queue.enqueue(PyTask("m:f", [7]))
    WorkerOps(queue).claim(queue.worker_id)                                  # the holder has no keep-alive key
    queue.requeue_lost()
    other = Queue("q", conn, dequeue_timeout=0.1)
    other.worker_id = new_worker_id()
    assert other.dequeue().args == [7]


def test_async_queue_enqueues_the_same_bytes(conn, redis_server):
    async def produce():
        client = redis.asyncio.Redis.from_url(redis_server.url)
        queue = AsyncQueue("q", client)
        await queue.enqueue(PyTask("m:f", [1]))
        await queue.enqueue_many([GoTask("main.F", 2), PyTask("m:f", [3])])
        length = await queue.len()
        await client.aclose()
        return length

    assert asyncio.run(produce()) == 3
    assert conn.lrange("q", 0, -1) == [PyTask("m:f", [1]).serialize(), GoTask("main.F", 2).serialize(),
                                       PyTask("m:f", [3]).serialize()]
    assert conn.llen("q_noti") == 3


def test_async_queue_refuses_oversized_tasks(conn, redis_server):
    async def produce():
        client = redis.asyncio.Redis.from_url(redis_server.url)
        try:
            await AsyncQueue("q", client, max_task_size=10).enqueue(PyTask("m:f", ["x" * 20]))
        finally:
            await client.aclose()

    with pytest.raises(TaskTooLargeError):
        asyncio.run(produce())
    assert not conn.exists("q")


def test_delayed_decorator_enqueues_calls(conn, queue):
    d = delayed(queue)

    d(tasks.slow).delay("keakon style", 0)       # delayed(queue)(func).delay(...)
    plain = d(tasks.record)
    retried = d(retry=3)(tasks.fail_until)
    assert plain is tasks.record
    plain.delay("a", 1, k=2)
    retried.delay("counter", 1)
    blobs = conn.lrange("q", 0, -1)
    assert blobs == [PyTask("tests.tasks:slow", ("keakon style", 0)).serialize(),
                     PyTask("tests.tasks:record", ("a", 1), {"k": 2}).serialize(),
                     PyTask("tests.tasks:fail_until", ("counter", 1), retry=3).serialize()]


def test_claim_batch_releases_and_claims_under_distinct_ids_in_one_script(conn, queue):
    blobs = [PyTask("m:f", [i]).serialize() for i in range(5)]
    conn.rpush("q", *blobs)
    conn.rpush("q_noti", *[1] * 5)
    assert WorkerOps(queue).claim_batch([], ["a", "b", "c"]).tasks == [("a", blobs[0]), ("b", blobs[1]), ("c", blobs[2])]
    assert conn.hgetall("q_processing") == {b"a": blobs[0], b"b": blobs[1], b"c": blobs[2]}
    assert conn.llen("q_noti") == 2  # one notification consumed per task claimed
    assert WorkerOps(queue).claim_batch(["a", "b"], ["a", "b", "d"]).tasks == [("a", blobs[3]), ("b", blobs[4])]
    assert conn.hgetall("q_processing") == {b"c": blobs[2], b"a": blobs[3], b"b": blobs[4]}
    assert conn.llen("q_noti") == 0
    assert WorkerOps(queue).claim_batch(["a", "b", "c"], ["a"]).tasks == []
    assert conn.hlen("q_processing") == 0


def test_claim_batch_takes_no_more_tasks_than_notifications_left(conn, queue):
    """A go-delayed worker that BLPOPed a notification pops the queue a round trip later: a
    batch claim leaves it its task, or go-delayed's dequeue would error on an empty list."""
    blobs = [PyTask("m:f", [i]).serialize() for i in range(3)]
    conn.rpush("q", *blobs)
    conn.rpush("q_noti", *[1] * 3)
    conn.lpop("q_noti")                   # a Go worker took one notification, not yet its task
    assert WorkerOps(queue).claim_batch([], ["a", "b", "c"]).tasks == [("a", blobs[0]), ("b", blobs[1])]
    assert conn.lrange("q", 0, -1) == [blobs[2]] and conn.llen("q_noti") == 0


def test_a_claim_whose_reply_was_lost_is_delivered_again_not_overwritten(conn, queue):
    blobs = [PyTask("m:f", [i]).serialize() for i in range(3)]
    conn.rpush("q", *blobs)
    conn.rpush("q_noti", *[1] * 3)
    WorkerOps(queue).claim_batch([], ["a", "b"]).tasks   # say the reply never arrived
    assert WorkerOps(queue).claim_batch([], ["a", "b", "c"]).tasks == [("a", blobs[0]), ("b", blobs[1]), ("c", blobs[2])]
    assert conn.llen("q_noti") == 0
    queue.worker_id = "a"
    conn.rpush("q_noti", 1)
    assert WorkerOps(queue).claim(queue.worker_id) == blobs[0]     # the single claim, too, re-delivers what "a" holds


def test_a_claim_id_that_still_holds_a_task_leaves_the_head_of_the_queue_to_the_next_id(conn, queue):
    blobs = [PyTask("m:f", [i]).serialize() for i in range(3)]
    conn.rpush("q", *blobs)
    conn.rpush("q_noti", *[1] * 3)
    conn.hset("q_processing", "b", b"held since a lost reply")
    assert WorkerOps(queue).claim_batch([], ["a", "b", "c"]).tasks == [("a", blobs[0]), ("b", b"held since a lost reply"),
                                                      ("c", blobs[1])]
    assert conn.lrange("q", 0, -1) == [blobs[2]] and conn.llen("q_noti") == 1


def test_give_back_returns_unstarted_tasks_to_the_head_in_order(conn, queue):
    blobs = [PyTask("m:f", [i]).serialize() for i in range(4)]
    conn.rpush("q", *blobs)
    conn.rpush("q_noti", *[1] * 4)
    WorkerOps(queue).claim_batch([], ["a", "b", "c"]).tasks
    conn.hset("q_processing", "c", b"someone else's")  # only exact holdings are given back
    assert WorkerOps(queue).give_back([("b", blobs[1]), ("c", blobs[2])]) == 1
    assert conn.lrange("q", 0, -1) == [blobs[1], blobs[3]]
    assert conn.hgetall("q_processing") == {b"a": blobs[0], b"c": b"someone else's"}


def die_holding(queue):
    """A worker of ours takes the task at the head of the queue and dies (it never had a keep-alive key)."""
    return WorkerOps(queue).claim_batch((), (new_worker_id(),)).tasks[0][1]


def test_a_task_that_keeps_killing_workers_is_quarantined(conn, queue):
    queue.enqueue_many([PyTask("m:f", ["x"]), PyTask("m:other")])
    for crash in range(1, 4):
        held = die_holding(queue)
        assert queue.requeue_lost(max_crashes=3) == 1  # requeued, its crashes counted in it
        assert conn.lrange("q", 0, -1) == [PyTask("m:other").serialize(),
                                           PyTask("m:f", ["x"], options={"crashes": crash}).serialize()]
        conn.lmove("q", "q", "RIGHT", "LEFT")  # the crashing task back at the head, for the next worker
    held = die_holding(queue)
    assert queue.requeue_lost(max_crashes=3) == 0      # the 4th crash: dead-lettered, not requeued
    assert conn.lrange("q", 0, -1) == [PyTask("m:other").serialize()] and conn.hlen("q_processing") == 0
    [entry] = queue.dead.list()
    assert entry["reason"] == "crash_loop" and entry["worker"].startswith("delayed-py-")
    assert entry["task"] == held
    assert entry["func"] == "m:f"
    assert entry["queue"] == "q" and entry["error"].startswith("its worker died while holding it 4 times")


def test_identical_tasks_held_by_workers_that_died_once_each_are_requeued(conn, queue):
    """Crashes are counted per task, not per identical bytes: five workers each held one of five
    identical tasks (a periodic task, a task without arguments) and all died once."""
    queue.enqueue_many([PyTask("m:tick")] * 5)
    for _ in range(5):
        die_holding(queue)
    assert queue.requeue_lost(max_crashes=3) == 5
    assert conn.lrange("q", 0, -1) == [PyTask("m:tick", options={"crashes": 1}).serialize()] * 5
    assert not conn.exists("q_dead_letters")


def test_a_blob_that_is_not_a_task_is_dead_lettered_at_its_first_crash(conn, queue):
    """It cannot carry its crash count, and a worker of ours would dead-letter it anyway."""
    conn.rpush("q", b"\x00\xff\xc1")
    conn.rpush("q_noti", 1)
    die_holding(queue)
    sweep = SweeperOps(queue).sweep(max_crashes=3)
    assert sweep.notified == 0 and [(loop.reason, loop.buried) for loop in sweep.crash_loops] == [("malformed", True)]
    [entry] = queue.dead.list()
    assert (entry["reason"], entry["task"]) == ("malformed", b"\x00\xff\xc1")
    assert entry["error"].startswith("its worker died holding it")


def test_a_gotask_counts_its_crashes_in_its_options_as_a_pytask_does(conn, queue):
    """Our Go workers hold GoTasks under ids of ours: a sweep counts each death in the blob's third
    element, keeping the payload's bytes (a Go float32 stays one), and dead-letters a crash loop."""
    payload = bytes.fromhex("92" "ca3fc00000" "a178")  # [float32 1.5, "x"], as Go writes it
    conn.rpush("q", msgpack.packb(["main.F", payload]))
    conn.rpush("q_noti", 1)
    for crash in range(1, 3):
        die_holding(queue)
        assert queue.requeue_lost(max_crashes=2) == 1
        assert conn.lrange("q", 0, -1) == [msgpack.packb(["main.F", payload, {"crashes": crash}])]
    held = die_holding(queue)
    assert queue.requeue_lost(max_crashes=2) == 0
    [entry] = queue.dead.list()
    assert (entry["reason"], entry["func"], entry["task"]) == ("crash_loop", "main.F", held)


def test_crash_counting_can_be_turned_off_and_leaves_blobs_as_they_are(conn, queue):
    blob = PyTask("m:f").serialize()
    queue.enqueue(PyTask("m:f"))
    for _ in range(5):
        die_holding(queue)
        assert queue.requeue_lost(max_crashes=0) == 1
    assert conn.lrange("q", 0, -1) == [blob]
    assert not conn.exists("q_dead_letters")


def test_deaths_of_go_delayed_workers_are_not_counted_as_crashes(conn, queue):
    """go-delayed's workers (ids of 32 hex digits) never release their last task, so one that
    stopped cleanly leaves it under a dead id: requeue it every time, count nothing."""
    blob = GoTask("main.F", 1).serialize()
    for _ in range(5):
        conn.hset("q_processing", secrets.token_hex(16), blob)
        assert queue.requeue_lost(max_crashes=3) == 1
    assert conn.lrange("q", 0, -1) == [blob] * 5
    assert not conn.exists("q_dead_letters")


def test_no_command_of_a_sweep_keeps_redis_busy_however_much_lapsed(conn, queue):
    """5,000 lapsed holders (half of them ours, whose crashes are counted), a deficit of 100,000
    notifications, and 100,000 crash counts an older version left: the sweep is cut into chunks.
    SLOWLOG lists every command, and a script's own calls before it: what each one does is counted
    rather than timed, which a loaded machine would blur (before the chunks, one script read every
    crash count: 84 ms)."""
    conn.flushall()
    blob = PyTask("m:f", ["x" * 100]).serialize()
    with conn.pipeline(transaction=False) as pipe:
        for start in range(0, 100_000, 10_000):
            pipe.hset("q_crashes", mapping={f"{i:040x}": f"1:{int(time.time())}" for i in range(start, start + 10_000)})
            pipe.rpush("q", *[blob] * 10_000)
        holders = {new_worker_id() if i % 2 else secrets.token_hex(16): blob for i in range(5000)}
        pipe.hset("q_processing", mapping=holders)
        pipe.execute()
    with slowlog.every_command(conn):
        sweep = SweeperOps(queue).sweep(max_crashes=3, notify_after=0)
        sent = slowlog.sent(conn)
    assert sweep.notified == 105_000 and not sweep.crash_loops and not sweep.failures
    assert conn.llen("q") == conn.llen("q_noti") == 105_000 and conn.hlen("q_processing") == 0
    assert sent[0].command == [b"HKEYS", b"q_processing"]  # the ids holding tasks, read once; then scripts only
    assert {command[0] for command, _ in sent[1:]} <= {b"EVALSHA", b"SCRIPT"}  # (SCRIPT LOAD)
    assert 50 < len(sent) < 200
    for command in sent:  # a command's work: the arguments it and its script's calls carry
        assert command.arguments <= SWEEP_COMMAND_BUDGET, command.command[:3]
        for call in command.calls:
            assert call[0] not in slowlog.WHOLE_READS, call[:3]
            assert b"q_crashes" not in call, call[:3]  # the old counts are not even read


SWEEP_COMMAND_BUDGET = 6000
"""Arguments one command of a sweep and its script's own calls carry at most: a push of 5,000
notifications (about 5,040 here), or 100 holders handed over (about 1,700)."""


@pytest.mark.parametrize("name, says", [
    ("", "a queue's name cannot be empty"),
    ("a_noti", "queue name 'a_noti' is a key of queue 'a' (its _noti key)"),
    ("x_processing", "is a key of queue 'x' (its _processing key)"),
    ("x_dead_letters", "is a key of queue 'x' (its _dead_letters key)"),
    ("x_dead", "is a key of queue 'x' (its _dead key)"),
    ("x_samples", "is a key of queue 'x' (its _samples key)"),
    ("x_task:3f2a", "queue name 'x_task:3f2a' holds '_task:', as the keys of queue 'x' do"),
    ("x_unique:k", "holds '_unique:', as the keys of queue 'x' do"),
    ("x_worker:delayed-py-1", "holds '_worker:', as the keys of queue 'x' do"),
])
def test_a_name_no_queue_can_have_is_refused_by_every_face(conn, name, says):
    from delayed.scheduler import Periodic, Scheduler

    for make in (lambda: Queue(name, conn), lambda: AsyncQueue(name, redis.asyncio.Redis()),
                 lambda: Scheduler(conn, [Periodic("tests.tasks:record", every=60, queue=name)])):
        with pytest.raises(ValueError, match=re.escape(says)):
            make()
    assert conn.keys() == []


@pytest.mark.parametrize("name", ["_noti", "noti", "a_notify", "dead_letters", "my_task", "{x}_noti_", "a:b"])
def test_names_that_only_look_like_keys_are_queues(conn, name):
    Queue(name, conn).enqueue(PyTask("tests.tasks:record"))
    assert Queue(name, conn).len() == 1
