"""A group's cost per member is constant, and a group of 100,000 members ends with one callback, its
results held in bounded memory.

Work is counted, never timed: the commands Redis ran (INFO commandstats counts those a script runs
too) and their arguments (SLOWLOG, tests/slowlog.py), and Redis's own memory accounting.
"""
import subprocess
import sys

import msgpack
import pytest

from delayed import PyTask, Queue, group
from delayed.protocol.worker_ops import WorkerOps
from delayed.wire.keys import new_worker_id
from delayed.wire.task import decode_task
from delayed.wire.tracking import Tracked, task_id

from . import slowlog
from .conftest import ROOT, WAIT
from .flow_tasks import received

UNCOUNTED = {"config", "info", "slowlog"}
"""Commands of the measurement itself."""


def commands_run(conn):
    """INFO commandstats as {command: calls}, the measurement's own commands left out."""
    calls = {name.removeprefix("cmdstat_"): stats["calls"] for name, stats in conn.info("commandstats").items()}
    return {name: count for name, count in calls.items() if name.partition("|")[0] not in UNCOUNTED}


def settle(conn, ops, worker_id):
    """Claim the head of the queue, then release it done and tracked, with its argument as its result, as
    a worker's next claim_batch does. Returns what the release ran: its commands per name (INFO
    commandstats) and its script's calls (SLOWLOG)."""
    [(_, blob)] = ops.claim_batch((), [worker_id]).tasks
    done = Tracked(task_id(blob), result=msgpack.packb(decode_task(blob).args[0]))
    with slowlog.every_command(conn):
        conn.config_resetstat()
        ops.claim_batch([worker_id], (), tracked={worker_id: done})
        counted = commands_run(conn)
        [sent] = [entry for entry in slowlog.sent(conn) if entry.command[0] == b"EVALSHA"]
    return counted, sent.calls


def release_untracked(ops, worker_ids, count):
    """Claim and release count tasks, batch by batch: members whose settling is not measured."""
    while count:
        claimed = ops.claim_batch((), worker_ids[:count]).tasks
        ops.claim_batch((), (), tracked={worker_id: Tracked(task_id(blob), result=msgpack.packb(0))
                                         for worker_id, blob in claimed})
        count -= len(claimed)


def member_costs(conn, size):
    """Settle each member of a group of size members: the commands the first three and the last ran."""
    conn.flushall()
    queue = Queue("q", conn)
    handle = queue.enqueue(group([PyTask("tests.flow_tasks:noop", [n]) for n in range(size)],
                                 callback=PyTask("tests.flow_tasks:got", ["callback"])))
    ops, worker_id = WorkerOps(queue), new_worker_id()
    first = [settle(conn, ops, worker_id) for _ in range(3)]
    release_untracked(ops, [new_worker_id() for _ in range(100)], size - 4)
    callback = handle.steps()[-1]
    assert callback.status() == "waiting"
    last = settle(conn, ops, worker_id)
    assert callback.status() == "pending"
    return first, last


def shape(calls):
    """A script's calls as (command, how many arguments): what they did, whatever the keys' names."""
    return [(call[0].lower(), slowlog.arguments(call)) for call in calls]


@pytest.fixture
def sizes(conn):
    return {size: member_costs(conn, size) for size in (10, 2000)}


def test_a_group_member_s_settle_runs_the_same_commands_for_10_or_2000_members(sizes):
    (small, small_last), (large, large_last) = sizes[10], sizes[2000]
    per_member = small[0][0]
    assert per_member and per_member.get("evalsha") == 1
    for counted, calls in small + large:
        assert counted == per_member, (counted, per_member)  # INFO commandstats: the same commands, each time
        assert shape(calls) == shape(small[0][1])             # SLOWLOG: the same calls, with as many arguments
        assert not {call[0].lower() for call in calls} & slowlog.WHOLE_READS
    # the last member's settle also releases the callback: more commands, the same for both sizes
    # (its inputs are read and deleted in chunks of 4,000), and the only calls whose arguments grow
    # with the group: the names of its slots
    assert small_last[0] == large_last[0] and sum(small_last[0].values()) > sum(per_member.values())
    grown = [(name, small_n, large_n) for (name, small_n), (_, large_n) in zip(shape(small_last[1]), shape(large_last[1]))
             if small_n != large_n]
    assert grown == [(b"hmget", 12, 2002), (b"hdel", 12, 2002)]


@pytest.mark.timeout(10 * WAIT)
def test_a_group_of_100000_members_ends_with_one_callback_and_its_results_in_bounded_memory(conn, redis_server):
    size = 100_000
    baseline = conn.info("memory")["used_memory"]
    queue = Queue("q", conn)
    handle = queue.enqueue(group([PyTask("tests.flow_tasks:noop", [n]) for n in range(size)],
                                 callback=PyTask("tests.flow_tasks:got", ["callback"])), result_ttl=3600)
    assert conn.llen("q") == size and handle.info().total == size + 1
    workers = subprocess.run([sys.executable, "-m", "delayed.worker", "--redis-url", redis_server.url, "--queue", "q",
                              "--burst", "--concurrency", "2", "--log-level", "WARNING", "tests.flow_tasks"],
                             cwd=ROOT, capture_output=True, text=True, timeout=10 * WAIT)
    assert workers.returncode == 0, workers.stdout + workers.stderr
    assert handle.status() == "done"
    [call] = received(conn, "callback")  # one callback call
    assert call == [list(range(size))]    # every result, in member order
    callback = handle.steps()[-1]
    assert callback.info().attempts == 1
    record = f"q_task:{callback.id}"
    assert not [field for field in conn.hkeys(record) if field.startswith(b"in:")]
    # what is left once it ended: the records (each member's its own, none holding another's result), the
    # workflow's hash, the queue's counts, tracked marker and last sweep, and what the callback recorded
    records = [f"q_task:{step_id}" for _, step_id in handle.info().steps]
    others = {f"q_flow:{handle.id}", "q_counts", "q_tracked", "q_swept", "got:callback"}
    assert {key.decode() for key in conn.scan_iter(count=10_000)} == set(records) | others
    sizes = usage(conn, records + sorted(others))
    members = sizes[:size]
    assert sum(members) / size < 1500  # a record of a few short fields (see tracking.lua, flow.lua)
    blob = conn.hget(record, "blob")
    # the callback's record holds its blob (its 100,000 arguments) and a hash table emptied of its inputs,
    # which Redis shrinks only as the hash is written again: 8 bytes a slot, at most 2 slots an entry it
    # held, two tables while it shrinks: 32 bytes a member at most
    assert len(blob) > 3 * size and sizes[size] < 1.25 * len(blob) + 32 * size + 4096
    # Redis's memory is the baseline plus those keys: MEMORY USAGE counts what each key asked the
    # allocator for, which rounds an allocation up to a size class at most 25% above it; MEMORY STATS
    # counts the tables of keys and expiries; 1 MiB for the rest (clients' buffers, the scripts' cache)
    stats = conn.memory_stats()
    tables = stats["db.0"]["overhead.hashtable.main"] + stats["db.0"]["overhead.hashtable.expires"]
    used = conn.info("memory")["used_memory"] - baseline
    assert used <= 1.25 * sum(sizes) + tables + 2**20, (used, sum(sizes), tables)


def usage(conn, keys):
    """MEMORY USAGE of each key, every field counted (SAMPLES 0)."""
    with conn.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.memory_usage(key, samples=0)
        return pipe.execute()
