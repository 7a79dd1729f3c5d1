"""The public middleware in the Python worker (delayed/worker/hooks.py): the order of its hooks around
each call, where each runs, what a hook that raises does (the task is never lost), and the command
line's --middleware."""
import logging

import msgpack
import pytest

from delayed import Middleware, PyTask, Queue, Worker
from delayed.worker.metrics import Observe

from .conftest import finish, results, spawn
from .recording import Recorder, SeenHeaders, Threads, recorded


def drain(queue, *middleware, threads=1, **options):
    """Run a burst worker on queue with middleware until the queue is empty."""
    Worker(queue, allow=["tests.tasks"], threads=threads, burst=True, sweep_interval=0, middleware=middleware,
           **options).run(handle_signals=False)


def call_hooks(entries):
    return [entry for entry in entries if "enqueue" not in entry]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("func", ["add", "async_add"])
def test_two_middleware_run_in_the_documented_order_around_a_call_that_returns(conn, threads, func):
    queue = Queue("q", conn)
    handle = queue.enqueue(PyTask(f"tests.tasks:{func}", [1, 2]), result_ttl=60)
    seen = []
    drain(queue, Recorder("A", seen), Recorder("B", seen), threads=threads)
    path = f"tests.tasks:{func}"
    assert seen == [f"A.before_call {path}", f"B.before_call {path}",
                    f"A.around_call {path} current", f"B.around_call {path} current",
                    "B.around_call.exit", "A.around_call.exit",
                    f"B.after_call {path} done None", f"A.after_call {path} done None"]
    assert handle.result(timeout=5) == 3


@pytest.mark.parametrize("threads", [1, 3])
def test_a_call_that_raises_is_told_to_on_call_error_inside_each_around_call_then_after_call(conn, threads):
    queue = Queue("q", conn)
    handle = queue.enqueue(PyTask("tests.tasks:always_fail", ["f"]), result_ttl=60)
    seen = []
    drain(queue, Recorder("A", seen), Recorder("B", seen), threads=threads)
    path = "tests.tasks:always_fail"
    assert seen == [f"A.before_call {path}", f"B.before_call {path}",
                    f"A.around_call {path} current", f"B.around_call {path} current",
                    "B.on_call_error ValueError True", "B.around_call.exit ValueError",
                    "A.on_call_error ValueError True", "A.around_call.exit ValueError",
                    f"B.after_call {path} failed ValueError", f"A.after_call {path} failed ValueError"]
    assert handle.status() == "failed" and len(queue.dead.list()) == 1


def test_hooks_run_in_the_main_thread_but_around_call_where_the_function_runs(conn):
    queue = Queue("q", conn)
    queue.enqueue(PyTask("tests.tasks:add", [1, 2]))
    seen = []
    drain(queue, Threads(seen), threads=2)
    assert seen == [("before_call", "MainThread"), ("around_call", "delayed slot 0"), ("after_call", "MainThread")]


@pytest.mark.parametrize("hook", ["before_call", "around_call"])
def test_a_hook_that_raises_before_the_call_fails_the_run_as_the_function_would_and_loses_no_task(conn, hook):
    """B's hook raises: the function is not called, the task is retried as its options say (retry=1),
    then dead-lettered with the hook's error; every on_call_error and after_call is told."""
    queue = Queue("q", conn)
    handle = queue.enqueue(PyTask("tests.tasks:record", ["never"], retry=1), result_ttl=60)
    seen = []
    drain(queue, Recorder("A", seen), Recorder("B", seen, raises=[hook]))
    assert results(conn) == []  # the function never ran
    info = handle.info()
    assert info.status == "failed" and f"RuntimeError: B.{hook}" in info.error
    [letter] = queue.dead.list()
    assert letter["reason"] == "failed" and f"B.{hook}" in letter["error"]
    outcomes = [entry.split()[2] for entry in seen if entry.startswith("A.after_call")]
    assert outcomes == ["retried", "failed"]
    path = "tests.tasks:record"
    first_run = seen[:seen.index(f"A.after_call {path} retried RuntimeError") + 1]
    if hook == "before_call":
        assert first_run == [f"A.before_call {path}", f"B.before_call {path}",
                             "B.on_call_error RuntimeError True", "A.on_call_error RuntimeError True",
                             f"B.after_call {path} retried RuntimeError", f"A.after_call {path} retried RuntimeError"]
    else:  # B's around_call raised as it was entered: B is told at once, A as the error leaves its around_call
        assert first_run == [f"A.before_call {path}", f"B.before_call {path}",
                             f"A.around_call {path} current", f"B.around_call {path} current",
                             "B.on_call_error RuntimeError True",
                             "A.on_call_error RuntimeError True", "A.around_call.exit RuntimeError",
                             f"B.after_call {path} retried RuntimeError", f"A.after_call {path} retried RuntimeError"]


class FailsOnExit(Middleware):
    """An around_call whose exit raises, after the function returned."""

    def around_call(self, call):
        return self

    def __enter__(self):
        return None

    def __exit__(self, *exc_info):
        raise RuntimeError("around_call's exit failed")


class Swallows(Middleware):
    """An around_call that suppresses what the function raised."""

    def around_call(self, call):
        return self

    def __enter__(self):
        return None

    def __exit__(self, *exc_info):
        return True


@pytest.mark.parametrize("func", ["add", "async_add"])
def test_an_around_call_that_raises_as_it_exits_fails_the_run_though_the_function_returned(conn, func):
    queue = Queue("q", conn)
    handle = queue.enqueue(PyTask(f"tests.tasks:{func}", [1, 2]), result_ttl=60)
    seen = []
    drain(queue, Recorder("A", seen), FailsOnExit())
    assert handle.status() == "failed" and "around_call's exit failed" in handle.info().error
    assert seen[-3:] == ["A.on_call_error RuntimeError True", "A.around_call.exit RuntimeError",
                         f"A.after_call tests.tasks:{func} failed RuntimeError"]


def test_an_around_call_that_suppresses_the_error_makes_the_run_succeed(conn):
    queue = Queue("q", conn)
    handle = queue.enqueue(PyTask("tests.tasks:always_fail", ["f"]), result_ttl=60)
    seen = []
    drain(queue, Recorder("A", seen), Swallows())
    assert handle.result(timeout=5) is None and queue.dead.list() == []
    assert seen[-2:] == ["A.around_call.exit", "A.after_call tests.tasks:always_fail done None"]


@pytest.mark.parametrize("hook", ["on_call_error", "after_call"])
def test_a_hook_that_raises_after_the_call_is_logged_and_the_other_hooks_and_tasks_go_on(conn, caplog, hook):
    queue = Queue("q", conn)
    failing = queue.enqueue(PyTask("tests.tasks:always_fail", ["f"]), result_ttl=60)
    fine = queue.enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=60)
    seen = []
    with caplog.at_level(logging.ERROR, logger="delayed.worker"):
        drain(queue, Recorder("A", seen), Recorder("B", seen, raises=[hook]))
    assert failing.status() == "failed" and "always fails" in failing.info().error  # the function's error
    assert fine.result(timeout=5) == 3
    assert [entry for entry in seen if entry.startswith("A.after_call")] == [
        "A.after_call tests.tasks:always_fail failed ValueError", "A.after_call tests.tasks:add done None"]
    raised = [record for record in caplog.records if "middleware hook" in record.getMessage()]
    assert len(raised) == (1 if hook == "on_call_error" else 2) and f"B.{hook}" in str(raised[0].exc_info[1])


def test_after_call_is_told_of_tasks_refused_before_their_call(conn):
    """Not allowed, arguments that do not fit, a GoTask, a blob that is no task: after_call only, with
    the outcome the metrics count; the func path a task named, "" for none."""
    queue = Queue("q", conn)
    queue.enqueue(PyTask("tests.tasks:_private", ["x"]))
    queue.enqueue(PyTask("tests.tasks:add", [1, 2, 3]))
    conn.rpush("q", msgpack.packb(["main.Add", b"\x01"]), b"\xc1junk")
    conn.rpush("q_noti", 1, 1)
    seen = []
    drain(queue, Recorder("A", seen))
    assert seen == ["A.after_call tests.tasks:_private dead None", "A.after_call tests.tasks:add failed None",
                    "A.after_call main.Add dead None", "A.after_call  dead None"]


def test_observe_is_a_middleware_told_after_those_given(conn):
    queue = Queue("q", conn)
    queue.enqueue(PyTask("tests.tasks:add", [1, 2]))
    queue.enqueue(PyTask("tests.tasks:_private", ["x"]))
    seen, observed = [], []
    worker = Worker(queue, allow=["tests.tasks"], burst=True, sweep_interval=0, middleware=[Recorder("A", seen)],
                    observe=lambda *told: observed.append(told))
    assert isinstance(worker.middleware[-1], Observe)
    worker.run(handle_signals=False)
    [(queue_name, func, outcome, seconds), dead] = observed
    assert (queue_name, func, outcome) == ("q", "tests.tasks:add", "done") and seconds > 0
    assert dead == ("q", "", "dead", None)


def test_headers_a_producer_sent_reach_the_call(conn):
    queue = Queue("q", conn)
    queue.enqueue(PyTask("tests.tasks:add", [1, 2], headers={"traceparent": "00-abc-def-01", "tenant": "t1"}))
    drain(queue, SeenHeaders())
    assert recorded() == ["headers tenant=t1,traceparent=00-abc-def-01"]


def test_a_worker_takes_only_middleware(conn):
    with pytest.raises(TypeError, match="delayed.Middleware"):
        Worker(Queue("q", conn), allow=["tests.tasks"], middleware=[object()])


def test_worker_command_runs_middleware_named_by_instance_or_factory(conn, redis_server):
    queue = Queue("q", conn)
    queue.enqueue(PyTask("tests.tasks:add", [1, 2]))
    process = spawn("delayed.worker", "--queue", "q", "--burst", "--sweep-interval", "0",
                    "--middleware", "tests.recording:recorded_in_redis", "--middleware", "tests.recording:seen_headers",
                    "tests.tasks", redis_url=redis_server.url)
    status, output = finish(process)
    assert status == 0, output
    assert recorded() == ["cli.before_call tests.tasks:add", "headers ", "cli.around_call tests.tasks:add current",
                          "cli.around_call.exit", "cli.after_call tests.tasks:add done None"]


@pytest.mark.parametrize("spec, says", [
    ("tests.recording", "MODULE:ATTR"),
    ("tests.no_such_module:x", "cannot import"),
    ("tests.recording:missing", "has no attribute 'missing'"),
    ("tests.recording:not_middleware", "not a delayed.Middleware"),
])
def test_worker_command_refuses_a_middleware_it_cannot_load_in_one_line(redis_server, spec, says):
    process = spawn("delayed.worker", "--burst", "--middleware", spec, "tests.tasks", redis_url=redis_server.url)
    status, output = finish(process)
    assert status == 2 and says in output and len(output.strip().splitlines()) == 1, output



class OnlyAfter(Middleware):
    def after_call(self, call):
        pass


def test_hooks_a_middleware_does_not_override_are_not_in_the_workers_path(conn):
    """A middleware with after_call alone: no before_call step, no wrapped invoker; none at all: nothing."""
    from delayed.worker.hooks import AfterCall, BeforeCall, HookedInvoker

    def steps(worker):
        return {type(step) for step in worker._pipeline.middleware}

    plain = Worker(Queue("q", conn), allow=["tests.tasks"])
    after_only = Worker(Queue("q", conn), allow=["tests.tasks"], middleware=[OnlyAfter()])
    wrapped = Worker(Queue("q", conn), allow=["tests.tasks"], middleware=[Recorder("A", [])])
    assert not steps(plain) & {AfterCall, BeforeCall} and not isinstance(plain._invoker, HookedInvoker)
    assert AfterCall in steps(after_only) and BeforeCall not in steps(after_only)
    assert not isinstance(after_only._invoker, HookedInvoker)
    assert {AfterCall, BeforeCall} <= steps(wrapped) and isinstance(wrapped._invoker, HookedInvoker)
