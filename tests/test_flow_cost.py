"""What a workflow's step costs Redis beyond a plain tracked task, counted in commands (INFO
commandstats counts those a script runs too), never timed: the budget behind `make bench`'s per-task
row (issue 30: a grouped task within 1.5x a plain task's cost)."""
import msgpack

from delayed import PyTask, Queue, group
from delayed.protocol.worker_ops import WorkerOps
from delayed.wire.keys import new_worker_id
from delayed.wire.task import decode_task
from delayed.wire.tracking import Tracked, task_id

UNCOUNTED = {"config", "info", "eval", "evalsha", "script"}
"""The measurement's own commands, the script calls (what they run is counted) and a script's loading
on its first call."""

TASK = PyTask("tests.tasks:record", ["member"])


def commands(conn, action):
    """How many commands Redis ran for action(), and its return value."""
    conn.config_resetstat()
    returned = action()
    stats = conn.info("commandstats")
    return sum(entry["calls"] for name, entry in stats.items()
               if name.removeprefix("cmdstat_").partition("|")[0] not in UNCOUNTED), returned


def test_a_group_s_enqueue_writes_each_member_with_the_commands_enqueue_many_writes_a_tracked_task(conn):
    queue = Queue("q", conn)

    def cost(size, grouped):
        conn.flushall()
        if grouped:
            return commands(conn, lambda: queue.enqueue(group([TASK] * size, callback=TASK)))[0]
        return commands(conn, lambda: queue.enqueue_many([TASK] * size, result_ttl=60))[0]

    per_member = (cost(100, grouped=True) - cost(10, grouped=True)) / 90
    per_tracked_task = (cost(100, grouped=False) - cost(10, grouped=False)) / 90
    assert per_member == per_tracked_task == 3  # the blob and its notification pushed, the record written


def test_a_group_member_costs_five_commands_more_than_a_plain_tracked_task_from_its_claim_to_its_end(conn):
    """The five: its callback's status read, its slot filled and its waits counted down; its counted mark
    and its workflow's left as it ends. Its claim costs what a plain tracked task's does: only a record
    the claim finds with an expiry (one that ended and runs again) is looked at for a workflow it stopped."""
    queue = Queue("q", conn)

    def claim_and_release(enqueue):
        conn.flushall()
        enqueue()
        ops, worker_id = WorkerOps(queue), new_worker_id()
        claimed, reply = commands(conn, lambda: ops.claim_batch((), [worker_id]))
        [(_, blob)] = reply.tasks
        done = Tracked(task_id(blob), result=msgpack.packb(decode_task(blob).args[0]))
        released, _ = commands(conn, lambda: ops.claim_batch([worker_id], (), tracked={worker_id: done}))
        return claimed + released

    member = claim_and_release(lambda: queue.enqueue(group([TASK] * 3, callback=TASK)))
    plain = claim_and_release(lambda: queue.enqueue(TASK, result_ttl=60))
    assert member - plain == 5
