"""Our Go worker's stops in the mixed deployment: killed with SIGKILL, it loses nothing, since our
Python sweeper and go-delayed's sweeper each requeue what it held; stopped cleanly (SIGTERM, SIGINT
or SIGHUP), it runs nothing twice, since it finishes what runs, gives back what it claimed and did
not start, and releases every task (go-delayed's worker keeps its last one, which runs again).

Tasks are main.Slow(id, ms): it counts a start of id in the hash "starts", sleeps, then counts an
execution in "executions"."""
import signal
import uuid
from typing import Dict, List, Set

import pytest
from conftest import SWEPT_BY_GO, SWEPT_BY_PY, Deployment, executions, wait_for

from delayed import GoTask, Queue

SLOW_MS = 400


def slow_tasks(mixed: Deployment, queue: str, count: int) -> List[str]:
    """Enqueue count main.Slow tasks into queue; their ids."""
    prefix = uuid.uuid4().hex[:12]
    ids = [f"{prefix}-{i}" for i in range(count)]
    Queue(queue, mixed.conn).enqueue_many(GoTask("main.Slow", [task_id, SLOW_MS]) for task_id in ids)
    return ids


def counted(mixed: Deployment, counter: str, ids: List[str]) -> Dict[str, int]:
    """The counts of ids (those counted at all) in the hash "starts" or "executions"."""
    counts = executions(mixed.conn, counter)
    return {task_id: counts[task_id] for task_id in ids if task_id in counts}


def waiting(mixed: Deployment, queue: str) -> List[GoTask]:
    return [GoTask.deserialize(blob) for blob in mixed.conn.lrange(queue, 0, -1)]


def held(mixed: Deployment, queue: str) -> Dict[bytes, bytes]:
    """The processing hash: worker id -> the blob it holds."""
    return mixed.conn.hgetall(f"{queue}_processing")


@pytest.mark.parametrize("queue", [SWEPT_BY_PY, SWEPT_BY_GO], ids=["our-python-sweeper", "go-delayed-sweeper"])
def test_a_killed_go_workers_tasks_are_recovered_by_each_sweeper(mixed, mixed_procs, queue):
    """ourgoworker SIGKILLed while it runs and holds tasks: the deployment's one sweeper of the queue
    (our Python sweeper, or go-delayed's) requeues every held task once its keep-alive lapses, our
    sweeper counting the crash in the blob, go-delayed's leaving it as it was. A new worker then runs
    every task: none lost, and only the held ones may run twice."""
    ids = slow_tasks(mixed, queue, 40)
    first = mixed_procs.our_go_worker(queue, "-concurrency", "4")
    wait_for(lambda: len(counted(mixed, "starts", ids)) >= 2 and len(held(mixed, queue)) >= 2,
             what="tasks to start")
    first.kill()
    holding = held(mixed, queue)
    assert holding and all(worker.decode().startswith(first.id) for worker in holding)
    held_ids = {GoTask.deserialize(blob).args[0] for blob in holding.values()}

    wait_for(lambda: not held(mixed, queue), what="the sweeper to requeue the held tasks")
    back = waiting(mixed, queue)
    assert {task.args[0] for task in back} | set(counted(mixed, "executions", ids)) == set(ids)  # none lost
    requeued = [task for task in back if task.args[0] in held_ids]
    assert len(requeued) == len(holding)
    if queue == SWEPT_BY_PY:  # ours counts our workers' deaths in the tasks they held
        assert {task.options.crashes for task in requeued} == {1}
    else:  # go-delayed's moves the blobs as they were
        assert {task.serialize() for task in requeued} == set(holding.values())

    mixed_procs.our_go_worker(queue, "-concurrency", "8")
    wait_for(lambda: len(counted(mixed, "executions", ids)) == len(ids), what="every task to run")
    ran = counted(mixed, "executions", ids)
    assert min(ran.values()) == 1
    assert {task_id for task_id, runs in counted(mixed, "starts", ids).items() if runs > 1} <= held_ids
    assert mixed.conn.xlen(f"{queue}_dead_letters") == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_clean_stop_runs_nothing_twice(mixed, mixed_procs, signum):
    """A stop signal mid-drain: ourgoworker finishes the tasks it runs, gives back those it never
    started, releases all, and exits 0, offline. Right after, nothing is held and the queue holds
    exactly the tasks that never started; a restarted worker runs those, and every task started and
    ran exactly once."""
    queue = f"stop-{signum.name}-{uuid.uuid4().hex[:8]}"
    ids = slow_tasks(mixed, queue, 12)
    worker = mixed_procs.our_go_worker(queue, "-concurrency", "2")
    wait_for(lambda: len(counted(mixed, "starts", ids)) >= 2, what="two tasks to start")
    worker.signal(signum)
    assert worker.wait() == 0, worker.err()
    assert [e["event"] for e in worker.events()][-1] == "stopped"

    started: Set[str] = set(counted(mixed, "starts", ids))
    assert not held(mixed, queue)
    assert mixed.conn.zcard(f"{queue}_workers") == 0  # offline
    assert counted(mixed, "executions", ids) == dict.fromkeys(started, 1)  # what ran, finished
    unstarted = [task.args[0] for task in waiting(mixed, queue)]
    assert unstarted and sorted(unstarted) == sorted(set(ids) - started)  # given back, each once

    mixed_procs.our_go_worker(queue, "-concurrency", "4")
    wait_for(lambda: len(counted(mixed, "executions", ids)) == len(ids), what="the rest to run")
    assert counted(mixed, "starts", ids) == counted(mixed, "executions", ids) == dict.fromkeys(ids, 1)
    assert mixed.conn.xlen(f"{queue}_dead_letters") == 0
