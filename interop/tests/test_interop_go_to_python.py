"""Go -> Python: PyTasks written by go-delayed's own NewPyTask + Queue.Enqueue (interop/bin/goproducer),
run by our `python -m delayed.worker` with tests.tasks allowed."""
import ast

import pytest
from conftest import py_results, wait_for

from delayed.queue import Queue

# (goproducer flags, what tests.tasks.record received: repr((tag, args, kwargs)))
CALLS = [
    (["-args", '["mixed", 1, -2, 2.5, true, "é", [1, 2], {"m": 1}, null]', "-kwargs", '{"k": "v", "n": 3}'],
     "('mixed', (1, -2, 2.5, True, 'é', [1, 2], {'m': 1}, None), {'k': 'v', 'n': 3})"),
    (["-args", '["big", 9223372036854775807, -9223372036854775808]'],
     "('big', (9223372036854775807, -9223372036854775808), {})"),
    (["-args", "null", "-kwargs", '{"tag": "nil-args"}'], "('nil-args', (), {})"),
    (["-args", "[]", "-kwargs", '{"tag": "empty-args"}'], "('empty-args', (), {})"),
    (["-args", '["nil-kwargs"]', "-kwargs", "null"], "('nil-kwargs', (), {})"),
    (["-args", '["no-kwargs"]'], "('no-kwargs', (), {})"),
    (["-args", '["empty-kwargs"]', "-kwargs", "{}"], "('empty-kwargs', (), {})"),
]


@pytest.mark.parametrize("flags, expected", CALLS, ids=[" ".join(f)[:40] for f, _ in CALLS])
def test_go_pytask_runs_in_our_worker_with_its_arguments(procs, conn, flags, expected):
    """NewPyTask(func, args, kwargs) with args a list, nil or empty and kwargs a map, nil or empty
    runs once in our worker with exactly those arguments."""
    procs.py_worker("q")
    assert procs.go_producer("-kind", "py", "-func", "tests.tasks:record", *flags) == {"enqueued": 1}
    wait_for(lambda: py_results(conn), what="the task to run")
    # compared as values: a Go map's keys come in random order
    assert [ast.literal_eval(r) for r in py_results(conn)] == [ast.literal_eval(expected)]
    assert conn.xlen("q_dead_letters") == 0


def test_go_pytask_with_struct_kwargs_is_dead_lettered_and_the_worker_goes_on(procs, conn):
    """go-delayed writes a struct kwargs as an array (the field names are lost): our worker
    dead-letters that task as malformed, saying why, and runs the next task."""
    worker = procs.py_worker("q")
    procs.go_producer("-kind", "py", "-func", "tests.tasks:record", "-args", '["struct"]', "-kwargs-struct")
    procs.go_producer("-kind", "py", "-func", "tests.tasks:record", "-args", '["after"]')
    wait_for(lambda: py_results(conn), what="the task after the struct one to run")
    assert py_results(conn) == ["('after', (), {})"]
    [record] = Queue("q", conn).dead.list()
    assert (record["reason"], record["func"]) == ("malformed", "tests.tasks:record")
    assert "array" in record["error"] and "struct" in record["error"], record["error"]
    assert worker.alive()


def test_go_delayed_gotask_with_a_nil_argument_is_read_as_a_gotask(procs, conn):
    """NewGoTask(path, nil) writes [path, nil], no payload at all. Our worker must see a GoTask
    (dead letter reason go_task: only a Go worker can run it), not a PyTask naming a
    function it does not allow."""
    worker = procs.py_worker("q")
    procs.go_producer("-func", "main.Int", "-args", "null")
    procs.go_producer("-kind", "py", "-func", "tests.tasks:record", "-args", '["after"]')
    wait_for(lambda: py_results(conn), what="the task after the GoTask to run")
    [record] = Queue("q", conn).dead.list()
    assert (record["reason"], record["func"]) == ("go_task", "main.Int"), record
    assert worker.alive()
