"""How the worker calls a task's function: arguments are checked against its signature before the call
(bad_arguments), whatever wraps the function or the call, and every coroutine runs on the worker's one
event loop."""
import ast
import inspect

import pytest

from delayed import PyTask, Queue, Worker
from delayed.worker.callee import Callee
from delayed.worker.middleware import Middleware, Pipeline

from . import pipeline_tasks
from .conftest import results, wait_for

ALLOW = ("tests.tasks", "tests.pipeline_tasks")


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


def letters(queue):
    return {letter["error"]: letter["reason"] for letter in queue.dead.list()}


def test_arguments_a_decorated_function_does_not_take_are_dead_lettered_before_its_wrapper_runs(
        conn, queue, run_worker):
    # The TypeError of such a call is raised in the wrapper's frame: only the signature tells it apart
    # from one raised inside the function (which is an ordinary failure, and retried).
    queue.enqueue(PyTask(pipeline_tasks.wrapped, ["a", "b", "c"], retry=3))
    run_worker(allow=ALLOW)
    wait_for(lambda: queue.dead.count(), what="a dead letter")
    assert letters(queue) == {"TypeError: wrapped() too many positional arguments": "bad_arguments"}
    assert conn.get("wrapper calls") is None and results(conn) == []


def test_a_type_error_inside_a_decorated_function_is_a_failure_and_retried(conn, queue, run_worker):
    queue.enqueue(PyTask(pipeline_tasks.wrapped, ["a", 1], retry=1))
    run_worker(allow=ALLOW)
    wait_for(lambda: queue.dead.count(), what="a dead letter")
    assert letters(queue) == {"TypeError: object of type 'int' has no len()": "failed"}
    assert conn.get("wrapper calls") == b"2"  # the run and its retry


class Counting(Middleware):
    """A middleware of a test's own, around every call: counts its hooks."""

    def __init__(self):
        self.calls = {"before": 0, "after": 0}

    def before(self, run):
        self.calls["before"] += 1

    def after(self, run):
        self.calls["after"] += 1


def test_a_middleware_around_the_call_does_not_change_what_a_failure_is(conn, queue):
    worker = Worker(queue, ALLOW)
    counting = Counting()
    worker._pipeline = Pipeline([*worker._pipeline.middleware, counting])  # innermost: right around the call
    settled = [worker.execute(PyTask(pipeline_tasks.wrapped, args).serialize())
               for args in (["bad"], ["raises", 1], ["runs", "ok"])]
    assert [getattr(settlement, "reason", "released") for settlement in settled] == [
        "bad_arguments", "failed", "released"]
    assert counting.calls == {"before": 2, "after": 3}  # the refused task never got as far as its before()
    assert results(conn) == [repr(("runs", (2,), {}))]


@pytest.mark.parametrize("threads", [1, 3])
def test_every_coroutine_a_task_makes_runs_on_the_worker_s_one_event_loop(conn, queue, run_worker, threads):
    queue.enqueue_many([PyTask(pipeline_tasks.loop_of, ["coroutine"]),
                        PyTask(pipeline_tasks.returns_loop_of, ["returned"]),
                        PyTask(pipeline_tasks.loop_of, ["coroutine again"]),
                        PyTask(pipeline_tasks.returns_loop_of, ["returned again"])])
    run_worker(allow=ALLOW, threads=threads)
    wait_for(lambda: len(results(conn)) == 4, what="four results")
    loops = {tag: args[0] for tag, args, _ in map(ast.literal_eval, results(conn))}
    assert len(loops) == 4 and len(set(loops.values())) == 1, loops


def _fits(signature, args, kwargs):
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def f0(): pass
def f1(a): pass
def f2(a, b=1): pass
def f3(a, /, b, *, c=1): pass
def f4(a, *args): pass
def f5(*, a): pass
def f6(a, b=1, *args, c, d=2, **kwargs): pass
def f7(**kwargs): pass
def f8(a, /, b=2, *args): pass


@pytest.mark.parametrize("func", [f0, f1, f2, f3, f4, f5, f6, f7, f8, len, print, dict, Callee])
def test_a_callee_fits_arguments_exactly_as_its_signature_binds_them(func):
    callee = Callee(func)
    try:
        signature = inspect.signature(func)
    except ValueError:  # unreadable: any arguments are tried
        signature = None
    for count in range(5):
        for kwargs in ({}, {"a": 1}, {"b": 1}, {"c": 1}, {"z": 1}, {"a": 1, "c": 2}):
            args = tuple(range(count))
            expected = True if signature is None else _fits(signature, args, kwargs)
            assert (callee.misfit(args, kwargs) is None) is expected, (func, args, kwargs)
