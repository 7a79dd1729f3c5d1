"""The public middleware in the Python producer (delayed/protocol/enqueue_hooks.py): the order of its
hooks around enqueue, enqueue_many, a workflow's steps and f.delay(), on Queue and AsyncQueue; what a
hook that raises does; headers a middleware adds reaching the worker's call; `delayed enqueue
--middleware`."""
import asyncio
import contextlib
import contextvars
import logging

import pytest
import redis.asyncio

from delayed import AsyncQueue, Middleware, PyTask, Queue, Step, TaskTooLargeError, Worker, chain, delayed

from .conftest import finish, spawn
from .recording import Headers, Recorder, SeenHeaders, recorded

ADD = "tests.tasks:add"


def test_two_middleware_run_in_the_documented_order_around_an_enqueue(conn):
    seen = []
    queue = Queue("q", conn, middleware=[Recorder("A", seen), Recorder("B", seen)])
    handle = queue.enqueue(PyTask(ADD, [1, 2]), result_ttl=60)
    assert seen == [f"A.before_enqueue {ADD}", f"B.before_enqueue {ADD}",
                    f"A.around_enqueue {ADD}", f"B.around_enqueue {ADD}",
                    "B.around_enqueue.exit", "A.around_enqueue.exit",
                    f"B.after_enqueue {ADD} {handle.id} None", f"A.after_enqueue {ADD} {handle.id} None"]
    assert queue.len() == 1 and handle.status() == "pending"


def test_an_untracked_task_is_told_no_handle_and_a_delayed_one_goes_through_too(conn):
    seen = []
    queue = Queue("q", conn, middleware=[Recorder("A", seen)])
    assert queue.enqueue(PyTask(ADD, [1, 2]), delay=3600) is None
    assert seen[-1] == f"A.after_enqueue {ADD} None None" and conn.zcard("q_scheduled") == 1


def test_a_batch_enters_every_tasks_around_enqueue_around_its_one_write(conn):
    seen = []
    queue = Queue("q", conn, middleware=[Recorder("A", seen), Recorder("B", seen)])
    handles = queue.enqueue_many([PyTask(ADD, [1, 2]), PyTask("tests.tasks:record", ["r"])], result_ttl=60)
    record = "tests.tasks:record"
    assert seen == [f"A.before_enqueue {ADD}", f"B.before_enqueue {ADD}",
                    f"A.before_enqueue {record}", f"B.before_enqueue {record}",
                    f"A.around_enqueue {ADD}", f"A.around_enqueue {record}",
                    f"B.around_enqueue {ADD}", f"B.around_enqueue {record}",
                    "B.around_enqueue.exit", "B.around_enqueue.exit", "A.around_enqueue.exit", "A.around_enqueue.exit",
                    f"B.after_enqueue {ADD} {handles[0].id} None", f"B.after_enqueue {record} {handles[1].id} None",
                    f"A.after_enqueue {ADD} {handles[0].id} None", f"A.after_enqueue {record} {handles[1].id} None"]
    assert queue.enqueue_many([PyTask(ADD, [3, 4])]) == 1 and seen[-1] == f"A.after_enqueue {ADD} None None"


def test_each_step_of_a_workflow_goes_through_the_middleware_with_its_own_queue_and_handle(conn):
    seen = []

    class Queues(Middleware):
        def after_enqueue(self, enqueuing):
            seen.append((enqueuing.queue, enqueuing.handle.queue.name, enqueuing.handle.id))

    queue = Queue("q", conn, middleware=[Queues(), Headers()])
    workflow = chain(PyTask(ADD, [1, 2]), Step(PyTask(ADD, [3]), queue="other", takes_result=True))
    handle = queue.enqueue(workflow)
    steps = handle.steps()
    assert seen == [("q", "q", steps[0].id), ("other", "other", steps[1].id)]
    Worker([Queue("q", conn), Queue("other", conn)], allow=["tests.tasks"], burst=True, sweep_interval=0,
           middleware=[SeenHeaders()]).run(handle_signals=False)
    assert handle.result(timeout=5) == 6
    assert recorded() == ["headers x-from=producer", "headers x-from=producer"]
    assert all(not step.task.options.headers for step in workflow.nodes)  # the caller's workflow is untouched


def test_headers_a_producer_middleware_adds_reach_the_workers_call_beside_the_tasks_own(conn):
    queue = Queue("q", conn, middleware=[Headers()])
    queue.enqueue(PyTask(ADD, [1, 2], headers={"tenant": "t1"}))
    queue.enqueue(PyTask(ADD, [1, 2]), headers={"tenant": "t2"})  # given to enqueue: in the task the hooks see
    Worker(Queue("q", conn), allow=["tests.tasks"], burst=True, sweep_interval=0,
           middleware=[SeenHeaders()]).run(handle_signals=False)
    assert recorded() == ["headers tenant=t1,x-from=producer", "headers tenant=t2,x-from=producer"]


def test_the_delayed_decorator_enqueues_through_the_middleware(conn):
    from . import tasks

    seen = []
    task = delayed(Queue("q", conn, middleware=[Recorder("A", seen)]))
    task(tasks.add).delay(1, 2)
    assert seen[0] == f"A.before_enqueue {ADD}" and seen[-1] == f"A.after_enqueue {ADD} None None"


def test_an_enqueue_that_fails_is_told_to_on_enqueue_error_inside_each_around_then_after_enqueue(conn):
    seen = []
    queue = Queue("q", conn, max_task_size=100, middleware=[Recorder("A", seen), Recorder("B", seen)])
    with pytest.raises(TaskTooLargeError):
        queue.enqueue(PyTask(ADD, ["x" * 200, 1]))
    assert seen == [f"A.before_enqueue {ADD}", f"B.before_enqueue {ADD}",
                    f"A.around_enqueue {ADD}", f"B.around_enqueue {ADD}",
                    "B.on_enqueue_error TaskTooLargeError True", "B.around_enqueue.exit TaskTooLargeError",
                    "A.on_enqueue_error TaskTooLargeError True", "A.around_enqueue.exit TaskTooLargeError",
                    f"B.after_enqueue {ADD} None TaskTooLargeError", f"A.after_enqueue {ADD} None TaskTooLargeError"]
    assert queue.len() == 0


@pytest.mark.parametrize("hook", ["before_enqueue", "around_enqueue"])
def test_a_hook_that_raises_before_the_write_makes_the_enqueue_raise_and_writes_nothing(conn, hook):
    seen = []
    queue = Queue("q", conn, middleware=[Recorder("A", seen), Recorder("B", seen, raises=[hook])])
    with pytest.raises(RuntimeError, match=f"B.{hook}"):
        queue.enqueue(PyTask(ADD, [1, 2]), result_ttl=60)
    assert queue.len() == 0 and conn.keys("q_task:*") == []
    told = ["B.on_enqueue_error RuntimeError True", "A.on_enqueue_error RuntimeError True"]
    if hook == "around_enqueue":  # B is told at once, A as the error leaves its around_enqueue
        told = [f"A.around_enqueue {ADD}", f"B.around_enqueue {ADD}", *told, "A.around_enqueue.exit RuntimeError"]
    assert seen == [f"A.before_enqueue {ADD}", f"B.before_enqueue {ADD}", *told,
                    f"B.after_enqueue {ADD} None RuntimeError", f"A.after_enqueue {ADD} None RuntimeError"]


def test_an_after_enqueue_that_raises_makes_the_enqueue_raise_once_every_hook_ran_and_the_task_is_written(conn):
    seen = []
    queue = Queue("q", conn, middleware=[Recorder("A", seen), Recorder("B", seen, raises=["after_enqueue"])])
    with pytest.raises(RuntimeError, match="B.after_enqueue"):
        queue.enqueue(PyTask(ADD, [1, 2]))
    assert queue.len() == 1 and seen[-1] == f"A.after_enqueue {ADD} None None"


def test_an_on_enqueue_error_that_raises_is_logged_and_the_enqueue_raises_its_own_error(conn, caplog):
    seen = []
    queue = Queue("q", conn, max_task_size=100,
                  middleware=[Recorder("A", seen), Recorder("B", seen, raises=["on_enqueue_error"])])
    with caplog.at_level(logging.ERROR, logger="delayed.producer"), pytest.raises(TaskTooLargeError):
        queue.enqueue(PyTask(ADD, ["x" * 200, 1]))
    assert "A.on_enqueue_error TaskTooLargeError True" in seen
    assert [record.exc_info[1].args for record in caplog.records] == [("B.on_enqueue_error",)]


def test_an_async_queue_runs_the_same_hooks_and_an_around_enqueues_context_is_the_enqueues(redis_server, conn):
    """around_enqueue is entered in the coroutine that awaits the enqueue: a context variable it sets is
    seen inside it (here: by the next middleware's around_enqueue), and gone once it exits."""
    inside = contextvars.ContextVar("inside", default="no")
    seen = []

    class Sets(Middleware):
        @contextlib.contextmanager
        def around_enqueue(self, enqueuing):
            token = inside.set("yes")
            try:
                yield
            finally:
                inside.reset(token)

    class Reads(Middleware):
        def around_enqueue(self, enqueuing):
            seen.append(("around", inside.get()))
            return contextlib.nullcontext()

        def after_enqueue(self, enqueuing):
            seen.append(("after", inside.get(), enqueuing.handle.id))

    async def enqueue():
        client = redis.asyncio.Redis.from_url(redis_server.url)
        try:
            queue = AsyncQueue("q", client, middleware=[Sets(), Reads(), Recorder("A", seen)])
            handle = await queue.enqueue(PyTask(ADD, [1, 2]), result_ttl=60)
            [other] = await queue.enqueue_many([PyTask(ADD, [3, 4])], result_ttl=60)
            return handle.id, other.id
        finally:
            await client.aclose()

    first, second = asyncio.run(enqueue())
    assert [entry for entry in seen if isinstance(entry, tuple)] == [
        ("around", "yes"), ("after", "no", first), ("around", "yes"), ("after", "no", second)]
    assert f"A.after_enqueue {ADD} {first} None" in seen and Queue("q", conn).len() == 2


def test_a_queue_takes_only_middleware(conn):
    with pytest.raises(TypeError, match="delayed.Middleware"):
        Queue("q", conn, middleware=[Recorder])


def test_enqueue_command_runs_the_middleware_it_names(conn, redis_server):
    process = spawn("delayed", "enqueue", "--queue", "q", "--middleware", "tests.recording:Headers",
                    "--middleware", "tests.recording:recorded_in_redis", ADD, "1", "2", redis_url=redis_server.url)
    status, output = finish(process)
    assert status == 0, output
    assert recorded() == [f"cli.before_enqueue {ADD}", f"cli.around_enqueue {ADD}", "cli.around_enqueue.exit",
                          f"cli.after_enqueue {ADD} None None"]
    Worker(Queue("q", conn), allow=["tests.tasks"], burst=True, sweep_interval=0,
           middleware=[SeenHeaders()]).run(handle_signals=False)
    assert recorded()[-1] == "headers x-from=producer"


def test_a_queue_whose_middleware_has_no_enqueue_hook_plans_its_enqueues_as_without_any(conn):
    assert Queue("q", conn, middleware=[SeenHeaders()])._hooks is None
    assert Queue("q", conn, middleware=[Headers()])._hooks is not None
