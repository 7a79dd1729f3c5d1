"""A worker, sweeper or producer whose Redis client SIGKILLs its own process at one round trip.

    python -m tests.killpoints ROLE URL KILL_AT MODE

KILL_AT counts round trips from 1 (a command, or a whole pipeline); MODE is "before" (the
command is never sent), "after" (it ran, the reply arrived, the caller never saw it), or
"lose-reply": the process lives on, but that round trip's reply is lost (it ran, and the
caller gets a ConnectionError, as when a connection drops mid-reply).
Prints "KILLED <n> <mode> <command>" just before dying, or "ROUND_TRIPS <n>" if it got
through without reaching KILL_AT. The task functions record into DELAYED_TEST_REDIS_URL
through their own connection, which is never killed.

The flow_ roles run workflows (tests/test_workflow_kill_points.py): flow_chain, flow_group, flow_bury
and flow_requeued are workers running one (the last one's first step a requeued dead letter),
flow_producer enqueues one, flow_cancel cancels one.
"""
import os
import signal
import sys
import threading
import time
from typing import Any, Callable

import redis

from delayed import PyTask, Queue, Step, Sweeper, Worker, chain, group

QUEUE = "q"

# role -> the tasks it handles; three for a plain worker, so that a release also claims
TASKS = {
    "worker": [PyTask("tests.tasks:record", [tag]) for tag in ("t0", "t1", "t2")],
    "retry": [PyTask("tests.tasks:fail_until", ["calls", 1], retry=1)],
    "bury": [PyTask("tests.tasks:always_fail", ["calls"])],
}
TASKS["sweeper"] = TASKS["producer"] = TASKS["producer_many"] = TASKS["worker"][:1]
# one slot between them: each task is admitted, or held back until the one before it frees the slot
TASKS["limited"] = TASKS["limited_threads"] = [PyTask("tests.tasks:record", [tag], concurrency_limit=1)
                                               for tag in ("t0", "t1", "t2")]
# a worker running tasks in threads (plain ones) and on its event loop (coroutines), two slots
TASKS["threads"] = [PyTask("tests.tasks:record", ["t0"]), PyTask("tests.tasks:async_record", ["t1"]),
                    PyTask("tests.tasks:record", ["t2"])]
THREADS = {"threads": 2, "limited_threads": 2}


def _record(tag: str, takes_result: bool = False) -> Any:
    task = PyTask("tests.tasks:record", [tag])
    return Step(task, takes_result=True) if takes_result else task


# role -> the workflow it runs, made of tests.tasks' functions
FLOWS = {
    "flow_chain": lambda: chain(_record("t0"), _record("t1", True), _record("t2", True)),
    "flow_group": lambda: group([_record("m0"), _record("m1"), _record("m2")], callback=_record("cb")),
    "flow_bury": lambda: chain(PyTask("tests.tasks:always_fail", ["calls"]), _record("t1")),
    "flow_requeued": lambda: chain(PyTask("tests.tasks:fail_until", ["calls", 1]), _record("t1", True),
                                   _record("t2", True)),
}
FLOWS["flow_producer"] = FLOWS["flow_chain"]
FLOWS["flow_cancel"] = FLOWS["flow_group"]
COMPLETIONS = {"flow_chain": 3, "flow_group": 4, "flow_bury": 1, "flow_requeued": 3, "flow_producer": 3,
               "flow_cancel": 4}
"""What a flow role's scenario completes: its steps that record (flow_bury: its one dead letter)."""


def expected(role: str) -> int:
    """How many completions the role's scenario ends with."""
    return COMPLETIONS[role] if role in COMPLETIONS else len(TASKS[role])


def flow_id(plain: redis.Redis) -> str:
    """The id of the one workflow in the queue."""
    [key] = plain.keys(QUEUE + "_flow:*")
    return key.decode().rpartition(":")[2]


class KillingRedis(redis.Redis):
    """A client that counts round trips and kills this process at round trip kill_at."""

    def __init__(self, url: str, kill_at: int, mode: str) -> None:
        pool = redis.ConnectionPool.from_url(url)
        super().__init__(connection_pool=pool)
        self.kill_at, self.mode = kill_at, mode
        self._counted = [0]  # shared by the copies a queue makes of its client (see send_once.py)
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        """Round trips so far, through this client and every copy of it."""
        return self._counted[0]

    def execute_command(self, *args: Any, **options: Any) -> Any:
        return self._round_trip(str(args[0]), lambda: super(KillingRedis, self).execute_command(*args, **options))

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)
        execute = pipe.execute
        pipe.execute = lambda raise_on_error=True: self._round_trip("PIPELINE", lambda: execute(raise_on_error))
        return pipe

    def _round_trip(self, name: str, send: Callable[[], Any]) -> Any:
        with self._lock:
            self._counted[0] += 1
            number = self._counted[0]
        if number == self.kill_at and self.mode == "before":
            self._die(name)
        try:
            result, error = send(), None
        except redis.RedisError as exc:  # an error reply (NOSCRIPT, say) is a reply too
            result, error = None, exc
        if number == self.kill_at and self.mode == "after":
            self._die(name)
        if number == self.kill_at and self.mode == "lose-reply":
            print(f"LOST {self.kill_at} {name}", flush=True)
            raise redis.ConnectionError("reply lost (test)")
        if error is not None:
            raise error
        return result

    def _die(self, name: str) -> None:
        print(f"KILLED {self.kill_at} {self.mode} {name}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


def completions(plain: redis.Redis, role: str) -> tuple:
    """(distinct tasks completed, extra completions): dead letters for "bury", else results."""
    if role in ("bury", "flow_bury"):
        return plain.xlen("q_dead_letters"), 0
    finished = plain.lrange("results", 0, -1)
    return len(set(finished)), len(finished) - len(set(finished))


def done(plain: redis.Redis, role: str) -> bool:
    """Every task of the role is finished and settled."""
    return (completions(plain, role)[0] == expected(role)
            and plain.llen(QUEUE) == 0 and plain.hlen("q_processing") == 0)


def run_worker(client: KillingRedis, plain: redis.Redis, role: str) -> None:
    queue = Queue(QUEUE, client)
    worker = Worker(queue, ["tests.tasks"], keep_alive_interval=1000,  # no refresh during the scenario
                    threads=THREADS.get(role, 1), dequeue_timeout=0.05, keep_alive_timeout=30)

    def stop_when_done() -> None:
        while not done(plain, role):
            time.sleep(0.002)
        worker.stop()

    threading.Thread(target=stop_when_done, daemon=True).start()
    worker.run(handle_signals=False)


def main(role: str, url: str, kill_at: int, mode: str) -> None:
    client = KillingRedis(url, kill_at, mode)
    plain = redis.Redis.from_url(url)
    try:
        if role == "sweeper":
            Sweeper([Queue(QUEUE, client)]).sweep()
        elif role == "producer":
            Queue(QUEUE, client).enqueue(TASKS[role][0])
        elif role == "producer_many":
            Queue(QUEUE, client).enqueue_many(TASKS[role])
        elif role == "flow_producer":
            Queue(QUEUE, client).enqueue(FLOWS[role](), result_ttl=60)
        elif role == "flow_cancel":
            Queue(QUEUE, client).workflow(flow_id(plain)).cancel()
        else:
            run_worker(client, plain, role)
    except redis.ConnectionError as exc:  # a one-shot sweeper or producer whose reply was lost
        print(f"FAILED {exc}", flush=True)
    print(f"ROUND_TRIPS {client.count}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
