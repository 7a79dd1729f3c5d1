"""The handles of tracked tasks and workflows that enqueue returns: read a task's record (a workflow's
hash), wait for its result, cancel it.

`TaskHandle` and `AsyncTaskHandle` (`WorkflowHandle` and `AsyncWorkflowHandle`) are two faces of one core: what a handle does is planned once
(`_Handle`, through its queue's plans: see calls.py), and each face runs it with its queue's executor."""
from typing import Any, Awaitable, Generic, List, Optional, Protocol, TypeVar

from ..wire.flow import WorkflowInfo
from ..wire.tracking import ENDED, Cancel, TaskInfo, outcome
from . import workflows
from .calls import Plan, Sleep
from .polls import polls

T = TypeVar("T")


class Records(Protocol):
    """What a handle reads through: a Queue's or an AsyncQueue's plans (producer.Producer)."""

    @property
    def name(self) -> str: ...

    def _plan_task_info(self, task_id: str) -> Plan[TaskInfo]: ...

    def _plan_cancel(self, task_id: str) -> Plan[Cancel]: ...


class SyncRecords(Records, Protocol):
    """A Queue: its plans, run by redis-py."""

    def _run(self, plan: Plan[T]) -> T: ...


class AsyncRecords(Records, Protocol):
    """An AsyncQueue: its plans, awaited on redis.asyncio."""

    def _run(self, plan: Plan[T]) -> Awaitable[T]: ...


Q = TypeVar("Q", bound=Records)


class _Handle(Generic[Q]):
    """A tracked task on a queue, its operations planned once for both faces."""

    def __init__(self, queue: Q, task_id: str) -> None:
        self.queue = queue
        self.id = task_id

    def _plan_info(self) -> Plan[TaskInfo]:
        return (yield from self.queue._plan_task_info(self.id))

    def _plan_status(self) -> Plan[str]:
        return (yield from self._plan_info()).status

    def _plan_cancel(self) -> Plan[Cancel]:
        return (yield from self.queue._plan_cancel(self.id))

    def _plan_result(self, timeout: Optional[float]) -> Plan[Any]:
        info = yield from self.queue._plan_task_info(self.id)
        for wait in polls(timeout):
            if info.status in ENDED:
                break
            yield Sleep(wait)
            info = yield from self.queue._plan_task_info(self.id)
        if info.status not in ENDED:
            raise TimeoutError(f"task {self.id} still {info.status} after {timeout} s")
        return outcome(info)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, queue={self.queue.name!r})"


class TaskHandle(_Handle[SyncRecords]):
    """A tracked task on a Queue: read its status, wait for its result, cancel it.

    `Queue.enqueue(..., result_ttl=...)` returns one (and `enqueue_many`, one per task), and so does
    `queue.task(id)` for an id you kept. A handle holds only the queue and the id, and reads the
    task's record in Redis at each call: a handle made from the id in another process works the same.

    Attributes:
        id (str): The task's id, 32 hex digits: keep it to look the task up later.
        queue (Queue): The queue the task was enqueued to.

    Example:
        ```python title="tasks.py"
        def add(a, b):
            return a + b
        ```

        ```python
        from delayed import PyTask, Queue, Worker, connect

        queue = Queue("default", connect())
        handle = queue.enqueue(PyTask("tasks:add", [1, 2]), result_ttl=3600)
        handle.status()                             # 'pending'
        Worker(queue, ["tasks"], burst=True).run()  # runs it (most workers run elsewhere)
        handle.result(timeout=30)                   # 3
        ```
    """

    def info(self) -> TaskInfo:
        """The task's record, read now.

        Returns:
            Its status and what goes with it.

        Raises:
            TaskNotFoundError: The record expired (or the id was never tracked).
        """
        return self.queue._run(self._plan_info())

    def status(self) -> str:
        """The task's status, read now: `"pending"`, `"running"`, `"done"`, ... (see `TaskInfo`).

        Returns:
            A `Status` value; `info()` has what goes with it.

        Raises:
            TaskNotFoundError: The record expired (or the id was never tracked).
        """
        return self.queue._run(self._plan_status())

    def result(self, timeout: Optional[float] = None) -> Any:
        """Wait for the task to end, and return what it returned.

        Looks at the record after 5 ms, then twice as long each time, at most every 0.5 s.

        Args:
            timeout: The most seconds to wait; None waits as long as it takes.

        Returns:
            The task's return value, through msgpack as its arguments are (a tuple comes back as a list).
            A value msgpack cannot take comes back as its `repr()`, and one over the queue's
            `max_task_size` as None; `info().note` says so.

        Raises:
            TaskFailedError: The task failed, went dead or was cancelled; its `info` says how.
            TimeoutError: The task had not ended within `timeout` seconds.
            TaskNotFoundError: The record expired (or the id was never tracked).
        """
        return self.queue._run(self._plan_result(timeout))

    def cancel(self) -> Cancel:
        """Cancel the task: `queue.cancel(handle.id)`. One that waits is removed; a running one is stopped
        by its worker (a coroutine gets `CancelledError`, a function in a thread sees
        `delayed.current().cancelled`), and ends `cancelled` whatever it does.

        Returns:
            What it did: true if cancelled or requested, with the status the task had and why.

        Raises:
            TaskNotFoundError: The record expired (or the id was never tracked).
        """
        return self.queue._run(self._plan_cancel())


class AsyncTaskHandle(_Handle[AsyncRecords]):
    """A tracked task on an AsyncQueue: `TaskHandle` with coroutines, e.g. `await handle.result()`.

    `AsyncQueue.enqueue(..., result_ttl=...)` returns one, and so does `queue.task(id)`.

    Attributes:
        id (str): The task's id, 32 hex digits.
        queue (AsyncQueue): The queue the task was enqueued to.
    """

    async def info(self) -> TaskInfo:
        """The task's record, read now.

        Returns:
            Its status and what goes with it.

        Raises:
            TaskNotFoundError: The record expired (or the id was never tracked).
        """
        return await self.queue._run(self._plan_info())

    async def status(self) -> str:
        """The task's status, read now (see `TaskHandle.status`).

        Returns:
            A `Status` value.

        Raises:
            TaskNotFoundError: The record expired (or the id was never tracked).
        """
        return await self.queue._run(self._plan_status())

    async def result(self, timeout: Optional[float] = None) -> Any:
        """Wait for the task to end, and return what it returned, as `TaskHandle.result`.

        Args:
            timeout: The most seconds to wait; None waits as long as it takes.

        Returns:
            The task's return value.

        Raises:
            TaskFailedError: The task failed, went dead or was cancelled; its `info` says how.
            TimeoutError: The task had not ended within `timeout` seconds.
            TaskNotFoundError: The record expired (or the id was never tracked).
        """
        return await self.queue._run(self._plan_result(timeout))

    async def cancel(self) -> Cancel:
        """Cancel the task, as `TaskHandle.cancel`.

        Returns:
            What it did: true if cancelled or requested, with the status the task had and why.

        Raises:
            TaskNotFoundError: The record expired (or the id was never tracked).
        """
        return await self.queue._run(self._plan_cancel())


class WorkflowHandle(workflows.Workflows[Any]):
    """A workflow on a Queue (a chain, a group, or a task enqueued with depends_on, on_success or
    on_failure): read its status, wait for its result, reach its steps, cancel it.

    `Queue.enqueue(chain(...))` returns one, and so does `queue.workflow(id)` for an id you kept. A
    handle holds only the queue and the id, and reads the workflow's hash in Redis at each call.

    Attributes:
        id (str): The workflow's id, 32 hex digits: keep it to look the workflow up later.
        queue (Queue): The queue it was enqueued on, which holds its hash (its steps may run on others).

    Example:
        ```python title="tasks.py"
        def resize(photo, width):
            return f"{photo}@{width}"


        def notify(user, photo):
            return f"sent {photo} to {user}"
        ```

        ```python
        from delayed import PyTask, Queue, Step, Worker, chain, connect

        queue = Queue("default", connect())
        handle = queue.enqueue(chain(PyTask("tasks:resize", ["cat.png", 800]),
                                     Step(PyTask("tasks:notify", ["ann"]), takes_result=True)))
        handle.status()                               # 'running'
        [step.status() for step in handle.steps()]    # ['pending', 'waiting']
        Worker(queue, ["tasks"], burst=True).run()    # runs both steps (most workers run elsewhere)
        handle.result(timeout=30)                     # 'sent cat.png@800 to ann'
        queue.workflow(handle.id).info().left         # 0
        ```
    """

    def info(self) -> WorkflowInfo:
        """The workflow's state, read now: its status, its steps, and the step that stopped it, if one did.

        Returns:
            Its hash, as a `WorkflowInfo`.

        Raises:
            TaskNotFoundError: It expired (or the id is no workflow of this queue).
        """
        return self.queue._run(self._plan_info())

    def status(self) -> str:
        """The workflow's status, read now: `"running"`, `"done"`, `"failed"` or `"cancelled"` (`FlowStatus`).

        Returns:
            A `FlowStatus` value; `info()` has what goes with it.

        Raises:
            TaskNotFoundError: It expired (or the id is no workflow of this queue).
        """
        return self.queue._run(self._plan_status())

    def result(self, timeout: Optional[float] = None) -> Any:
        """Wait for the workflow to end, and return its result.

        Looks at its hash after 5 ms, then twice as long each time, at most every 0.5 s.

        Args:
            timeout: The most seconds to wait; None waits as long as it takes.

        Returns:
            Its last step's result (a chain), its callback's (a group), or the list of its members'
            results (a group without callback); an `on_success` or `on_failure` step's result is
            not it (read it from `steps()`).

        Raises:
            TaskFailedError: A step failed and stopped it (at once: the steps after it wait), or it
                ended failed, or it was cancelled; the message names the step and its error, and
                `info` is the `WorkflowInfo`.
            TimeoutError: It had not ended within `timeout` seconds.
            TaskNotFoundError: It expired (or the id is no workflow of this queue).
        """
        return self.queue._run(self._plan_result(timeout))

    def steps(self) -> List[TaskHandle]:
        """Every step's handle, read now.

        Returns:
            A `TaskHandle` per step, in the order the workflow lists them (a step on another queue
            has a handle on that queue). A step's status is a task's, or `"waiting"`: it waits on
            the steps before it.

        Raises:
            TaskNotFoundError: The workflow expired (or the id is no workflow of this queue).
        """
        return self._step_handles(self.info())

    def cancel(self) -> Cancel:
        """Cancel every step that has not started, and request the cancel of every running one, in one
        script: a running step is stopped as `TaskHandle.cancel` stops a task, ends `cancelled`, and
        nothing runs after it. A failed step's record, kept to let it run again, then expires.

        Returns:
            What it did: true if the workflow was cancelled, with the status it had (running or
            failed) and a reason that counts the steps; false if it had ended (done, or cancelled
            before).

        Raises:
            TaskNotFoundError: It expired (or the id is no workflow of this queue).
        """
        return self.queue._run(self._plan_cancel())


class AsyncWorkflowHandle(workflows.Workflows[Any]):
    """A workflow on an AsyncQueue: `WorkflowHandle` with coroutines, e.g. `await handle.result()`.

    Attributes:
        id (str): The workflow's id.
        queue (AsyncQueue): The queue it was enqueued on.
    """

    async def info(self) -> WorkflowInfo:
        """The workflow's state, read now (see `WorkflowHandle.info`)."""
        return await self.queue._run(self._plan_info())

    async def status(self) -> str:
        """The workflow's status, read now (see `WorkflowHandle.status`)."""
        return await self.queue._run(self._plan_status())

    async def result(self, timeout: Optional[float] = None) -> Any:
        """Wait for the workflow to end, and return its result (see `WorkflowHandle.result`)."""
        return await self.queue._run(self._plan_result(timeout))

    async def steps(self) -> List[AsyncTaskHandle]:
        """Every step's `AsyncTaskHandle` (see `WorkflowHandle.steps`)."""
        return self._step_handles(await self.info())

    async def cancel(self) -> Cancel:
        """Cancel every step, running ones too (see `WorkflowHandle.cancel`)."""
        return await self.queue._run(self._plan_cancel())
