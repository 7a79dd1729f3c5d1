"""delayed.current() outside a call, and the order-free parts of the middleware's public types."""
import pytest

import delayed
from delayed import PyTask
from delayed.wire.hooks import Call, running, stopped


def test_current_outside_a_call_is_a_lookuperror_that_says_where_it_works():
    with pytest.raises(LookupError, match="only known inside a task's call"):
        delayed.current()


def test_current_is_the_call_made_running_and_its_cancel_flag_is_read_by_the_task():
    call = Call(PyTask("tests.tasks:add", [1, 2], headers={"traceparent": "x"}), "q", "delayed-py-1")
    token = running(call)
    try:
        assert delayed.current() is call and not call.cancelled
        call.cancel()
        assert delayed.current().cancelled and call.headers == {"traceparent": "x"} and call.id is None
    finally:
        stopped(token)
    with pytest.raises(LookupError):
        delayed.current()


def test_a_task_reads_its_own_call_as_current_in_a_worker(conn, tmp_path):
    """In the worker's main thread, in a slot thread and in a coroutine, current() is the task's call."""
    from delayed import Queue, Worker

    queue = Queue("q", conn)
    for threads in (1, 3):
        handles = [queue.enqueue(PyTask(f"tests.tasks:{name}", result_ttl=60)) for name in ("current_id", "current_id_async")]
        Worker(queue, allow=["tests.tasks"], threads=threads, burst=True, sweep_interval=0).run(handle_signals=False)
        for handle in handles:
            assert handle.result(timeout=5) == [handle.id, "q"]
