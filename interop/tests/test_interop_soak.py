"""Mixed soaks, one each way: one runtime's producer and workers, its workers SIGKILLed and
restarted again and again, and the other runtime's sweeper recovering what they held.
Nothing may be lost, and only the tasks the killed workers held may run twice."""
import random
import re
import threading
import time

from conftest import executions, wait_for

from delayed.queue import Queue
from delayed.task import GoTask

TASKS = 5000
PRODUCE_SECONDS = 8
CHUNKS = 20


def check(conn, held_at_kills: int, kills: int) -> None:
    ran = executions(conn)
    lost = [f"t{i}" for i in range(TASKS) if f"t{i}" not in ran]
    duplicates = sum(n - 1 for n in ran.values())
    print(f"{kills} kills, {held_at_kills} tasks held at the kills, {duplicates} duplicates, {len(lost)} lost")
    assert kills >= 5, f"only {kills} kills: the soak shows little"
    assert lost == [], f"{len(lost)} tasks lost, e.g. {lost[:5]}"
    assert duplicates <= held_at_kills, f"{duplicates} duplicates, but the killed workers held {held_at_kills}"
    assert len(ran) == TASKS and conn.xlen("q_dead_letters") == 0


def produce_in_chunks(enqueue_chunk, chunks: int = CHUNKS) -> threading.Thread:
    """Call enqueue_chunk(start, count) `chunks` times over PRODUCE_SECONDS, in a thread."""
    def run():
        size = TASKS // chunks
        for chunk in range(chunks):
            enqueue_chunk(chunk * size, size)
            time.sleep(PRODUCE_SECONDS / chunks)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_soak_python_producer_go_workers_killed_our_sweeper(procs, conn):
    """5,000 GoTasks from our Queue, drained by go-delayed workers that are SIGKILLed and replaced
    every half second; our sweeper requeues what each dead Go worker held."""
    procs.py_sweeper("q")
    workers = [procs.go_worker("q") for _ in range(3)]
    queue = Queue("q", conn)
    producer = produce_in_chunks(
        lambda start, count: queue.enqueue_many(GoTask("main.Count", f"t{i}") for i in range(start, start + count)))
    held = kills = 0
    while producer.is_alive():
        time.sleep(0.5)
        victim = workers.pop(random.randrange(len(workers)))
        victim.kill()
        held += conn.hexists("q_processing", victim.id)  # a Go worker holds one task, its last
        kills += 1
        workers.append(procs.go_worker("q"))
    producer.join()
    wait_for(lambda: len(executions(conn)) == TASKS and not conn.llen("q"),
             what="every task to run", interval=0.1)
    time.sleep(1.5)  # the last kills' tasks: requeued and run once their keep-alive keys expire
    check(conn, held, kills)


def test_soak_go_producer_python_workers_killed_go_sweeper(procs, conn):
    """5,000 PyTasks from go-delayed's NewPyTask (goproducer), drained by our batching workers that
    are SIGKILLed and replaced again and again; go-delayed's sweeper requeues what they held."""
    procs.go_sweeper("q")
    workers = [procs.py_worker("q") for _ in range(2)]
    producer = produce_in_chunks(lambda start, count: procs.go_producer(
        "-kind", "py", "-func", "tests.tasks:count", "-ids", "t", "-start", str(start), "-n", str(count)),
        chunks=100)  # a steady trickle, so workers are often busy
    held = kills = 0
    while producer.is_alive():
        time.sleep(0.5)
        victim = workers.pop(random.randrange(len(workers)))
        worker_id = re.search(r"worker (delayed-py-[0-9a-f]+) online", victim.err()).group(1)

        def holding():
            return [f for f in conn.hkeys("q_processing") if f.decode().startswith(worker_id)]

        deadline = time.monotonic() + 0.5
        while not holding() and time.monotonic() < deadline:  # kill it with tasks in hand if we can
            time.sleep(0.001)
        victim.kill()
        held += len(holding())
        kills += 1
        workers.append(procs.py_worker("q"))
    producer.join()
    wait_for(lambda: len(executions(conn)) == TASKS and not conn.llen("q") and not conn.hlen("q_processing"),
             what="every task to run", interval=0.1)
    check(conn, held, kills)
