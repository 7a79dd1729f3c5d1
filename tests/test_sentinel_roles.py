"""Worker, sweeper and scheduler processes on a redis+sentinel:// URL (conftest's `sentinels`: a
primary, a replica, three sentinels) follow a failover without a restart, and a failover in the
middle of a drain loses no task whose enqueue a replica had.

Tasks record their runs in a separate plain redis-server (conftest's `redis_server`, read through
`conn`), so what a failover does to the sentinel set cannot touch the tally."""
import re
import subprocess
import time

import redis

from delayed import PyTask, Queue
from delayed.protocol.connection import connect

from .conftest import lost_and_duplicates, read_until, results, spawn, stop, wait_for

# Longer than a failover (the sentinels call the primary down after 2 s): a live worker's keep-alive
# keys must outlast it, or a sweeper requeues what that worker holds (a duplicate, not a loss).
KEEP_ALIVE = "20"


def worker(sentinels, redis_server, *args: str) -> subprocess.Popen:
    return spawn("delayed.worker", "--keep-alive-timeout", KEEP_ALIVE, *args, "tests.tasks",
                 redis_url=sentinels.url, task_redis_url=redis_server.url)








def until_it_answers(call):
    """call's value once it stops raising ConnectionError (while the sentinels fail over)."""
    def attempt():
        try:
            return [call()]
        except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
            return None

    return wait_for(attempt, what="the new primary to answer", interval=0.1)[0]


def primary(sentinels) -> redis.Redis:
    return redis.Redis(port=sentinels.primary.port)


def rode_it_out(output: str) -> None:
    """Each part that saw the outage said so once, and that Redis is back; no traceback."""
    outages = re.findall(r"(\S+): Redis error", output)
    assert outages, output
    assert len(outages) == len(set(outages)), output  # once per part (worker, keep-alive, move due tasks...)
    assert "Redis is back" in output and "Traceback" not in output, output


def test_worker_sweeper_and_scheduler_follow_a_failover(sentinels, conn, redis_server, tmp_path):
    schedule = tmp_path / "every_second.py"
    schedule.write_text("from delayed.scheduler import Periodic\n"
                        "SCHEDULE = [Periodic('tests.tasks:record', queue='ticks', every=1)]\n")
    queue = Queue("default", connect(sentinels.url))
    running = worker(sentinels, redis_server)
    sweeping = spawn("delayed.sweeper", "--interval", "0.2", redis_url=sentinels.url)
    scheduler = spawn("delayed.scheduler", str(schedule), redis_url=sentinels.url)
    try:
        read_until(sweeping, "sweeping every queue it finds")  # online: connected before the failover
        queue.enqueue(PyTask("tests.tasks:record", ["before"]))
        wait_for(lambda: results(conn) == [repr(("before", (), {}))], what="a task before the failover")
        wait_for(lambda: primary(sentinels).llen("ticks") >= 1, what="a tick before the failover")
        primary(sentinels).execute_command("WAIT", 1, 5000)
        new = sentinels.kill_primary()
        killed = time.time()
        until_it_answers(lambda: queue.enqueue(PyTask("tests.tasks:record", ["after"])))
        wait_for(lambda: len(results(conn)) == 2, what="the worker to run a task on the new primary")
        # the sweeper requeues what a dead worker (no keep-alive key) holds, on the new primary
        blob = PyTask("tests.tasks:record", ["swept"]).serialize()
        redis.Redis(port=new.port).hset("default_processing", "delayed-py-" + "0" * 32, blob)
        wait_for(lambda: len(results(conn)) == 3, what="the sweeper to requeue a dead worker's task")
        ticks = redis.Redis(port=new.port).llen("ticks")
        wait_for(lambda: redis.Redis(port=new.port).llen("ticks") >= ticks + 2, 10,
                 "the scheduler to enqueue ticks on the new primary")
        assert all(process.poll() is None for process in (running, sweeping, scheduler))  # no restart
    finally:
        outputs = stop(running, sweeping, scheduler)
    assert [eval(result)[0] for result in results(conn)] == ["before", "after", "swept"]
    for output in outputs:
        rode_it_out(output)
    claimed = [float(tick) for tick in re.findall(r" tick (\S+) enqueued", outputs[2])]
    assert len(claimed) == len(set(claimed))
    print(f"sentinel: ran again {time.time() - killed:.1f} s after the kill")


def settled(sentinels) -> bool:
    """The queue is empty and no task is held, as the primary has it (every duplicate has run)."""
    try:
        check = primary(sentinels)
        return check.llen("default") == 0 and check.hlen("default_processing") == 0
    except redis.RedisError:
        return False


def both_online(sentinels) -> None:
    """Both workers are online before the failover (one still starting would find no primary and exit 1)."""
    wait_for(lambda: primary(sentinels).zcount("default_workers", time.time(), "+inf") == 2, what="both workers online")


def test_a_primary_killed_mid_drain_loses_no_replicated_task(sentinels, conn, redis_server):
    """3,000 tasks enqueued and replicated (WAIT) before the drain; the primary is SIGKILLed while two
    worker processes drain it, a sweeper running. Lost must be 0; duplicates at most the tasks the
    workers held or had just released, whose state the replica may not have had yet (2 workers x
    2 x --batch ids: each id holds one task, or released one in the last round trip)."""
    total, batch = 3000, 8
    queue = Queue("default", connect(sentinels.url), wait_replicas=1, wait_timeout_ms=5000)
    for start in range(0, total, 500):
        queue.enqueue_many([PyTask("tests.tasks:count", [str(i)]) for i in range(start, start + 500)])
    workers = [worker(sentinels, redis_server, "--batch", str(batch)) for _ in range(2)]
    sweeping = spawn("delayed.sweeper", "--interval", "0.5", redis_url=sentinels.url)
    try:
        both_online(sentinels)
        read_until(sweeping, "sweeping every queue it finds")
        wait_for(lambda: conn.hlen("executions") >= total // 3, what="a third of the drain")
        sentinels.kill_primary()
        killed_at = conn.hlen("executions")
        wait_for(lambda: conn.hlen("executions") == total, 60, "the drain to finish after the failover")
        wait_for(lambda: settled(sentinels), what="the queue to be empty and nothing held")
        assert all(process.poll() is None for process in workers)  # they rode it out, no restart
    finally:
        outputs = stop(*workers, sweeping)
    lost, duplicates = lost_and_duplicates(conn, total)
    bound = 2 * 2 * batch
    print(f"sentinel failover mid-drain: {total} tasks, killed at {killed_at} run; lost {lost}, "
          f"duplicates {duplicates} (bound {bound})")
    assert lost == 0
    assert duplicates <= bound
    for output in outputs[:2]:
        rode_it_out(output)


def clean_failover(sentinels) -> None:
    """SENTINEL FAILOVER: the sentinels promote the replica and later turn the old primary, still
    running, into its replica (about 8 s after they notice it; clients still connected to it get
    READONLY errors then, or UNBLOCKED in a BLPOP). Returns once the sentinels name the new primary."""
    new = sentinels.replica
    redis.Redis(port=sentinels.sentinel_ports[0]).execute_command("SENTINEL", "FAILOVER", sentinels.master_name)
    wait_for(lambda: sentinels.master_port() == new.port, what="the sentinels to name the replica", interval=0.05)
    sentinels.primary, sentinels.replica = new, sentinels.primary  # for the fixture's heal()


def test_a_clean_failover_mid_drain_loses_nothing_and_leaves_the_old_primary(sentinels, conn, redis_server):
    """The old primary stays up, a primary still, until the sentinels demote it seconds later; what
    it takes meanwhile is thrown away when it resyncs (claims and releases here: the tasks run again).
    The workers must leave it by themselves, as they ask the sentinels every FOLLOW_INTERVAL (redis-py
    asks them only when it connects: the workers stayed until the demotion, ~10 s), releasing few
    tasks there meanwhile; the old primary refuses REPLICAOF until they have. No enqueue is
    lost (all were replicated first); duplicates are counted: what ran on the old primary after
    the promotion."""
    total = 3000
    queue = Queue("default", connect(sentinels.url), wait_replicas=1, wait_timeout_ms=5000)
    # ~300 tasks a second: the drain spans the failover, however long the sentinels take (1 to 5 s)
    queue.enqueue_many([PyTask("tests.tasks:count_slowly", [str(i), 0.005]) for i in range(total)])
    workers = [worker(sentinels, redis_server, "--batch", "8") for _ in range(2)]
    sweeping = spawn("delayed.sweeper", "--interval", "0.5", redis_url=sentinels.url)
    old = redis.Redis(port=sentinels.primary.port)
    try:
        both_online(sentinels)
        read_until(sweeping, "sweeping every queue it finds")
        wait_for(lambda: conn.hlen("executions") >= 100, what="the drain to start")
        old.execute_command("ACL", "SETUSER", "default", "-replicaof", "-slaveof")  # no demotion, for now
        clean_failover(sentinels)
        switched_at = conn.hlen("executions")
        done_when_named = int(old.hget("default_counts", "done"))
        new = primary(sentinels)
        promoted_done = int(new.hget("default_counts", "done"))

        def moved() -> bool:
            """Tasks released on the new primary, and none on the old one for a second."""
            done = old.hget("default_counts", "done")
            time.sleep(1)
            return old.hget("default_counts", "done") == done and int(new.hget("default_counts", "done")) > promoted_done

        wait_for(moved, what="the workers to release tasks on the new primary, and none on the old one")
        assert old.execute_command("ROLE")[0] == b"master"  # not demoted: the workers left it by themselves
        # counted, not timed: within two FOLLOW_INTERVALs they release about 100 more there (fewer on a
        # loaded machine, which drains slower); left there until a demotion, about 2,500
        released_after = int(old.hget("default_counts", "done")) - done_when_named
        assert released_after < 600, f"{released_after} tasks released on the old primary after the failover"
        old.execute_command("ACL", "SETUSER", "default", "+@all")
        wait_for(lambda: conn.hlen("executions") == total, 60, "the drain to finish after the failover")
        wait_for(lambda: settled(sentinels), what="the queue to be empty and nothing held")
        assert all(process.poll() is None for process in workers)
    finally:
        old.execute_command("ACL", "SETUSER", "default", "+@all")
        outputs = stop(*workers, sweeping)
    lost, duplicates = lost_and_duplicates(conn, total)
    print(f"sentinel clean failover mid-drain: {total} tasks, {switched_at} run when the sentinels named the new "
          f"primary; lost {lost}, duplicates {duplicates}")
    assert lost == 0
    for output in outputs[:2]:
        assert "Traceback" not in output, output
