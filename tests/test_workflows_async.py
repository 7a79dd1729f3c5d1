"""Workflows on an AsyncQueue: the same API as Queue's, awaited (enqueue, result, status, steps, cancel,
depends_on on AsyncTaskHandles, workflow(id), what enqueue refuses), run by the same workers."""
import asyncio

import pytest
import redis.asyncio

from delayed import AsyncQueue, AsyncTaskHandle, AsyncWorkflowHandle, FlowStatus, Queue, Step, chain, group
from delayed.errors import TaskFailedError, TaskNotFoundError

from .conftest import WAIT
from .flow_tasks import received
from .test_workflows import drain, snapshot, takes, task


def run(redis_server, scenario):
    """Run scenario(async_queue) on an AsyncQueue "q" of its own connection."""
    async def main():
        client = redis.asyncio.Redis.from_url(redis_server.url)
        try:
            return await scenario(AsyncQueue("q", client))
        finally:
            await client.aclose()

    return asyncio.run(main())


def test_a_chain_and_a_group_through_an_async_queue(conn, redis_server):
    async def scenario(queue):
        flow = await queue.enqueue(chain(task("plain", 1), takes("got", "b", queue="other")), result_ttl=60)
        fan = await queue.enqueue(group([task("plain", 2), task("plain", 3)], callback=task("got", "callback")))
        assert isinstance(flow, AsyncWorkflowHandle) and await flow.status() == FlowStatus.RUNNING
        steps = await flow.steps()
        assert all(isinstance(step, AsyncTaskHandle) for step in steps)
        assert [step.queue.name for step in steps] == ["q", "other"]
        drain(conn, "q", "other")
        assert await flow.result(timeout=WAIT) == [1] and await fan.result(timeout=WAIT) == [[2, 3]]
        assert [await step.status() for step in steps] == ["done", "done"]
        again = queue.workflow(fan.id)
        return (await again.info()).total, await again.status()

    assert run(redis_server, scenario) == (3, FlowStatus.DONE)
    assert received(conn, "callback") == [[[2, 3]]]


def test_an_async_workflow_s_failure_names_its_step_and_its_requeue_resumes_it(conn, redis_server):
    async def scenario(queue):
        handle = await queue.enqueue(chain(task("flaky", "middle", 4), takes("got", "last")), result_ttl=60)
        drain(conn)
        middle = (await handle.steps())[0]
        with pytest.raises(TaskFailedError, match=middle.id):
            await handle.result(timeout=WAIT)
        assert (await handle.info()).error == "failed: ValueError: middle fails once"
        Queue("q", conn).dead.requeue([(await middle.info()).letter])
        drain(conn)
        return await handle.result(timeout=WAIT)

    assert run(redis_server, scenario) == [4]


def test_an_async_workflow_s_cancel_cancels_its_waiting_steps(conn, redis_server):
    async def scenario(queue):
        handle = await queue.enqueue(chain(task("plain", 1), task("got", "after")), delay=3600)
        outcome = await handle.cancel()
        assert outcome.cancelled and "2 step(s)" in outcome.reason
        assert [await step.status() for step in await handle.steps()] == ["cancelled", "cancelled"]
        assert not (await handle.cancel()).cancelled
        return await handle.status()

    assert run(redis_server, scenario) == FlowStatus.CANCELLED
    assert not conn.zcard("q_scheduled")


def test_async_depends_on_takes_async_task_handles_and_refuses_a_missing_one_writing_nothing(conn, redis_server):
    async def scenario(queue):
        before = await queue.enqueue(task("plain", 9), result_ttl=60)
        handle = await queue.enqueue(Step(task("got", "after"), takes_result=True), depends_on=[before])
        assert await (await handle.steps())[0].status() == "waiting"
        already = snapshot(conn)
        with pytest.raises(TaskNotFoundError):
            await queue.enqueue(task("plain", 1), depends_on=[queue.task("0" * 32)])
        with pytest.raises(TypeError, match="unique_for"):
            await queue.enqueue(chain(task("plain", 1), task("plain", 2)), unique_for=60)
        assert snapshot(conn) == already
        drain(conn)
        return await handle.result(timeout=WAIT)

    assert run(redis_server, scenario) == [[9]]
