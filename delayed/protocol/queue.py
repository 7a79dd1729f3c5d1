"""Queue, the producer's face, and AsyncQueue, its asyncio face: enqueue, track, cancel, pause.

Both are thin: each operation is planned once in producer.Producer, and a face runs the plan with its
executor (calls.Executor on redis-py, calls.AsyncExecutor on redis.asyncio). keakon/delayed 1.x's
worker and sweeper calls are on its Queue, delayed.queue.Queue (protocol/keakon.py). The operations of
workers, sweepers and operators are objects of their own: WorkerOps, SweeperOps and DeadLetters
(queue.dead)."""
import datetime
from typing import Any, Dict, Iterable, List, Optional, Sequence, TypeVar, Union, overload

import redis.asyncio

from ..wire.flow import Step, Workflow
from ..wire.hooks import Middleware
from ..wire.tracking import Cancel, TaskInfo
from .base import QueueBase, queue_keys
from .calls import AsyncExecutor, Plan
from .handles import AsyncTaskHandle, AsyncWorkflowHandle, TaskHandle, WorkflowHandle
from .producer import DEFAULT_MAX_TASK_SIZE, Producer, Task
from .send_once import sent_once_async
from .workflows import plan_enqueue_flow

T = TypeVar("T")


def _is_workflow(task: Union[Task, Workflow, Step], depends_on: Sequence[Any], on_success: Any, on_failure: Any,
                 unique_for: Optional[float], unique_key: Optional[str], options: Dict[str, Any]) -> bool:
    """Whether enqueue's arguments are a workflow's (TypeError for options no workflow takes)."""
    if not (isinstance(task, (Workflow, Step)) or depends_on or on_success is not None or on_failure is not None):
        return False
    given = [name for name, value in (("unique_for", unique_for), ("unique_key", unique_key), *options.items())
             if value is not None]
    if given:
        raise TypeError(f"enqueue of a workflow takes result_ttl, delay and at, not {', '.join(given)}: give a "
                        "step's own options to its task")
    return True


class Queue(QueueBase):
    """A go-delayed queue on a redis-py connection: the producer's face.

    A Queue enqueues tasks (at once, later, unique or tracked), reads and cancels tracked tasks, and
    pauses and resumes the queue for our workers. Python and go-delayed producers, workers and
    sweepers share its keys. `AsyncQueue` does the same in asyncio code. keakon/delayed 1.x's worker
    and sweeper calls (`dequeue`, `release`, `keep_alive`, `requeue_lost`) are on its own import
    path's Queue, `delayed.queue.Queue`, a Queue with them.

    Each command is sent exactly once: the queue sends its commands on `conn`'s own connection pools
    with redis-py's retries off, since a retry would resend a command whose reply was lost and could
    enqueue a task twice; `conn` itself is left as it is, and keeps its retries for your own commands.
    A `RedisCluster` still follows `MOVED`, `ASK` and `TRYAGAIN` (the node applied nothing), inside
    transactions too. A call that raises `ConnectionError` or `TimeoutError` may or may not have been
    applied.

    Args:
        name: The queue's name. On a Redis Cluster it must carry a hash tag (`"{orders}"`), so that
            all the queue's keys live in one slot.
        conn: A `redis.Redis` on any pool (Sentinel, TLS, `connection_pool=...`), or a
            `redis.cluster.RedisCluster`; `connect()` gives one for `$DELAYED_REDIS_URL`.
        max_task_size: The largest task blob, in bytes (default 1 MiB): a larger one is refused at
            enqueue (`TaskTooLargeError`) and dead-lettered when a worker finds one in the queue.
        dead_max: Dead letters kept (default 10,000): as the queue writes one, the oldest past this
            many are trimmed. 0 turns the bound off.
        dead_max_age: Seconds a dead letter is kept (default 7 days): as the queue writes one, those
            older are trimmed. 0 turns the bound off. Both bounds trim whole stream nodes at a time,
            so a few more letters may stay (see `--dead-max`).
        wait_replicas: After each enqueue, wait (Redis's `WAIT`) until this many replicas have it, up
            to `wait_timeout_ms`, and raise `NotReplicatedError` if fewer did (the task is on the
            primary all the same). 0 (the default): return once the primary has it; a failover may
            then lose the last writes the primary acknowledged but had not yet sent to its replica.
        wait_timeout_ms: How long an enqueue waits for `wait_replicas` replicas, in milliseconds.
        middleware: `delayed.Middleware` instances whose enqueue hooks run around each enqueue (every
            task of `enqueue_many`, every step of a workflow, each `f.delay()`), the first one
            outermost: `before_enqueue` in order (it may replace the task), `around_enqueue` around
            the write, `on_enqueue_error` and `after_enqueue` (with the task's handle) in reverse. A
            hook that raises makes the enqueue raise; one before the write writes nothing.

    Raises:
        ValueError: A name no queue can have: empty, one of another queue's keys (`a_noti`), or, on
            a Redis Cluster, without a hash tag.
        TypeError: An item of `middleware` that is not a `delayed.Middleware`.

    Attributes:
        name (str): The queue's name.
        conn: The client the queue sends its commands through, each once (on `conn`'s pools).
        keys (delayed.wire.keys.QueueKeys): The names of the queue's Redis keys (`keys.name`,
            `keys.dead_letters`, ...).
        dead (DeadLetters): The queue's dead letters: list, show, requeue, delete, purge.
        slot (int): The Redis Cluster hash slot of the queue's keys.
        max_task_size (int): As given; so are `wait_replicas` and `wait_timeout_ms`.

    Example:
        ```python
        from delayed import PyTask, Queue, connect

        queue = Queue("default", connect())
        queue.enqueue(PyTask("tasks:add", [1, 2]))
        ```
    """

    # Producers

    @overload
    def enqueue(self, task: Union[Workflow, Step], delay: Optional[float] = None,
                at: Optional[datetime.datetime] = None, *, result_ttl: Optional[float] = None,
                depends_on: Sequence[Any] = (), on_success: Union[None, Step, Task] = None,
                on_failure: Union[None, Step, Task] = None) -> WorkflowHandle: ...

    @overload
    def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None, *,
                result_ttl: Optional[float] = None, depends_on: Sequence[Any],
                on_success: Union[None, Step, Task] = None,
                on_failure: Union[None, Step, Task] = None) -> WorkflowHandle: ...

    @overload
    def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None, *,
                result_ttl: Optional[float] = None, on_success: Union[Step, Task],
                on_failure: Union[None, Step, Task] = None) -> WorkflowHandle: ...

    @overload
    def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None, *,
                result_ttl: Optional[float] = None, on_failure: Union[Step, Task]) -> WorkflowHandle: ...

    @overload
    def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                result_ttl: None = None, **options: Any) -> Optional[TaskHandle]: ...

    @overload
    def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                result_ttl: float, **options: Any) -> TaskHandle: ...

    def enqueue(self, task: Union[Task, Workflow, Step], delay: Optional[float] = None,
                at: Optional[datetime.datetime] = None, unique_for: Optional[float] = None,
                unique_key: Optional[str] = None, *, result_ttl: Optional[float] = None,
                depends_on: Sequence[Any] = (), on_success: Union[None, Step, Task] = None,
                on_failure: Union[None, Step, Task] = None,
                **options: Any) -> Union[None, TaskHandle, WorkflowHandle]:
        """Enqueue a task (its blob and its notification go into the queue in one atomic command), or a workflow.

        With `delay` or `at`, the task waits in the queue's scheduled set until it is due; workers and
        sweepers move due tasks into the queue twice a second. Due times come from this host's clock. A
        delay of 0, or a time already past, enqueues at once.

        Args:
            task: A `PyTask` or a `GoTask`; or a workflow: a `chain`, a `group` or a `Step`.
            delay: Seconds to wait before the task is due (a workflow's first steps).
            at: When the task is due (a naive datetime is local time). Give `delay` or `at`, not both.
            unique_for: Refuse, with `DuplicateTaskError`, an identical task (same function, arguments and
                options) while this one is queued, waiting for a retry, or running. The lock goes when a
                worker finishes the task or dead-letters it (not between retries), and in any case after
                `unique_for` seconds, so a lost worker cannot hold it forever. A go-delayed worker never
                releases a GoTask's lock: it lasts `unique_for` (our Go worker releases it).
            unique_key: With `unique_for`: every task with this key (`"report:2026-11"`) is a duplicate,
                whatever its function and arguments.
            result_ttl: Track the task: its status and result are kept until `result_ttl` seconds
                (rounded up) after it ended, and the call returns its handle. Its blob carries an id
                option, which keakon/delayed 1.x cannot read; an untracked task's blob is unchanged. A
                GoTask's record is written by our Go worker; a go-delayed worker runs the task but
                never writes it, so it says pending, and never expires.
                With `unique_for` too, the lock is the untracked task's digest.
                A workflow is always tracked: each step's record is kept `result_ttl` seconds (default:
                a day) after that step ended, and the workflow's own after its last step ended.
            depends_on: Handles of tracked tasks (`TaskHandle`) or of workflows (`WorkflowHandle`: its
                final steps): the task runs once every one of them succeeded (at once if they all
                have). A `Step(task, takes_result=True)` receives the list of their results, one per
                task (per final step of a workflow), in order.
            on_success: A task (or `Step`) to run once the task (or workflow) succeeded; a Step that
                takes a result receives its result.
            on_failure: A task (or `Step`) to run if the task (or the workflow's final step) fails;
                a Step that takes a result receives a `StepFailed`. After a group without callback
                it runs only if every member failed (see the Workflows guide's limits).
            **options: Any other option `TaskOptions` takes, by name (`max_retries=5`, `time_limit=30`).
                Every option given here wins over the task's own (`PyTask(..., delay=10)`), which apply
                too. A workflow takes none: give each step's to its task.

        Returns:
            None; with `result_ttl` (given here or the task's), the task's `TaskHandle`. A workflow's
            `WorkflowHandle` for a workflow, and for a task with `depends_on`, `on_success` or `on_failure`.

        Raises:
            TaskTooLargeError: The blob is over `max_task_size`; nothing was written.
            TaskArgumentError: An argument msgpack cannot write (an object, a datetime, an int past 64
                bits); nothing was written.
            DuplicateTaskError: With `unique_for`: the lock is held by an identical task (or one with the
                same `unique_key`).
            QueueFullError: Redis refused the write for want of memory; nothing was written.
            NotReplicatedError: With `wait_replicas`: fewer replicas acknowledged the task in time (it is
                on the primary).
            ValueError: An option's value it cannot take (both `delay` and `at`; NaN, infinite, negative or
                over ten years), naming the option. Nothing was written.
            TypeError: An unknown option; an option a GoTask cannot carry (`retry`, a backoff function).
        """
        if _is_workflow(task, depends_on, on_success, on_failure, unique_for, unique_key, options):
            return self.workflow(self._run(plan_enqueue_flow(self, task, depends_on, on_success, on_failure,
                                                             result_ttl, delay, at)))
        assert not isinstance(task, (Workflow, Step))
        return self._run(self._plan_enqueue((task,), True, delay=delay, at=at, unique_for=unique_for,
                                            unique_key=unique_key, result_ttl=result_ttl, **options))

    @overload
    def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                     at: Optional[datetime.datetime] = None, *, result_ttl: None = None, **options: Any) -> int: ...

    @overload
    def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                     at: Optional[datetime.datetime] = None, *, result_ttl: float,
                     **options: Any) -> List[TaskHandle]: ...

    def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                     at: Optional[datetime.datetime] = None, *,
                     result_ttl: Optional[float] = None, **options: Any) -> Union[int, List[TaskHandle]]:
        """Enqueue many tasks in one atomic round trip: all of them, or none.

        Args:
            tasks: PyTasks and GoTasks.
            delay: Seconds to wait before they are due, as for `enqueue`.
            at: When they are due, as for `enqueue`.
            result_ttl: Track each task, as for `enqueue`.
            **options: Other options by name, as for `enqueue`. The tasks' own options apply too, but
                a batch goes in with one `delay`, `at` and `result_ttl`, and no `unique_for`.

        Returns:
            How many tasks were enqueued; with `result_ttl`, their `TaskHandle`s, in order.

        Raises:
            TaskTooLargeError: A blob is over `max_task_size`; nothing was written.
            TaskArgumentError: An argument msgpack cannot write; nothing was written.
            QueueFullError: Redis refused the write for want of memory; nothing was written.
            NotReplicatedError: With `wait_replicas`: fewer replicas acknowledged the tasks in time.
            ValueError: As for `enqueue`; tasks whose own `delay`, `at` or `result_ttl` differ.
            TypeError: As for `enqueue`; a task with `unique_for`.
        """
        return self._run(self._plan_enqueue(tasks, False, delay=delay, at=at, result_ttl=result_ttl, **options))

    # Tracked tasks

    def workflow(self, flow_id: str) -> WorkflowHandle:
        """The handle of a workflow enqueued on this queue, by its id (`handle.id`); nothing is read until you ask."""
        return WorkflowHandle(self, flow_id)

    def task(self, task_id: str) -> TaskHandle:
        """The handle of a tracked task of this queue, by its id; nothing is read until you ask.

        Args:
            task_id: The id a `TaskHandle` had (`handle.id`): 32 hex digits.

        Returns:
            Its handle.
        """
        return TaskHandle(self, task_id)

    def task_info(self, task_id: str) -> TaskInfo:
        """A tracked task's record, read now.

        Args:
            task_id: The task's id.

        Returns:
            Its status and what goes with it.

        Raises:
            TaskNotFoundError: No record of it: never tracked (enqueued without `result_ttl`), or expired.
        """
        return self._run(self._plan_task_info(task_id))

    def cancel(self, task_id: str) -> Cancel:
        """Cancel a tracked task: remove it before it runs, or stop it while it runs; either way its record
        ends as cancelled.

        A task that is `scheduled`, `pending` or `retrying` is removed (from the queue with one
        notification, or from the scheduled set), in one script. A running task (or one a worker is taking
        right now) has its cancel requested: the record notes it and the queue's workers hear of it (a
        coroutine gets `CancelledError`, a function in a thread sees `delayed.current().cancelled`, a Go
        handler's context is cancelled); whatever the task does then, it ends `cancelled`, its result not
        kept, never retried. A task that already ended is not touched. Cancelling searches the queue for
        the task (`LPOS`, then `LREM`): Redis's time grows with the queue's length, and it serves nothing
        else meanwhile: tens of milliseconds for the last task of a queue of a million (measured on a
        2-core machine, 2026-11-25).

        Args:
            task_id: The task's id.

        Returns:
            What it did: true if cancelled or requested, with the status the task had and why, in a line.

        Raises:
            TaskNotFoundError: No record of the task.
        """
        return self._run(self._plan_cancel(task_id))

    def len(self) -> int:
        """The number of tasks waiting in the queue, not counting those being processed or scheduled."""
        return self._run(self._plan_len())

    def pause(self) -> bool:
        """Pause the queue: our workers take no new task from it.

        A task a worker already claimed still runs. go-delayed's workers do not know about pausing.

        Returns:
            True; False if the queue was paused already.
        """
        return self._run(self._plan_pause())

    def resume(self) -> bool:
        """Resume a paused queue.

        Returns:
            True; False if the queue was not paused.
        """
        return self._run(self._plan_resume())

    def paused_since(self) -> Optional[float]:
        """When the queue was paused.

        Returns:
            The unix time it was paused, or None if it is not paused.
        """
        return self._run(self._plan_paused_since())

    def move_due(self, limit: int = 1000) -> int:
        """Move scheduled tasks that are due into the queue, with their notifications, in one script.

        Workers and sweepers call this twice a second; you need it only without either.

        Args:
            limit: The most tasks to move.

        Returns:
            How many moved.
        """
        return self._run(self._plan_move_due(limit))


class AsyncQueue(Producer[AsyncTaskHandle]):
    """A go-delayed queue on a `redis.asyncio` connection: `Queue`'s producer face, with coroutines.

    It enqueues (at once, later, unique or tracked), reads and cancels tracked tasks, and pauses and
    resumes the queue, as `Queue` does: each operation is the same plan, awaited (`await
    queue.enqueue(...)`). Each command is sent exactly once, as for `Queue`: the queue uses `conn`'s
    pools with redis-py's retries off. A `redis.asyncio` `RedisCluster` retries outside its pools, so
    it must be created without retries: `retry=Retry(NoBackoff(), 0)`. The dead letters are an
    operator's (`Queue.dead`, the `delayed dead` command): an AsyncQueue has none.

    Args:
        name: The queue's name (on a Redis Cluster, with a hash tag: `"{orders}"`).
        conn: A `redis.asyncio.Redis`, or a `redis.asyncio.cluster.RedisCluster` created with
            `retry=Retry(NoBackoff(), 0)`; `connect_async()` gives one for `$DELAYED_REDIS_URL`.
        max_task_size: The largest task blob, in bytes (default 1 MiB); a larger one is refused.
        wait_replicas: After each enqueue, wait until this many replicas have it, as for `Queue`.
        wait_timeout_ms: How long an enqueue waits for `wait_replicas` replicas, in milliseconds.
        middleware: `delayed.Middleware` instances whose enqueue hooks run around each enqueue, as for
            `Queue`.

    Raises:
        ValueError: A name no queue can have (as for `Queue`).
        TypeError: A `RedisCluster` that would resend a command whose reply was lost; an item of
            `middleware` that is not a `delayed.Middleware`.

    Attributes:
        name (str): The queue's name.
        conn: The client the queue sends its commands through.
        keys (delayed.wire.keys.QueueKeys): The names of the queue's Redis keys.
        slot (int): The Redis Cluster hash slot of the queue's keys.
        max_task_size (int): As given; so are `wait_replicas` and `wait_timeout_ms`.

    Example:
        ```python
        from delayed import AsyncQueue, PyTask, connect_async

        queue = AsyncQueue("default", connect_async())
        handle = await queue.enqueue(PyTask("tasks:add", [1, 2]), result_ttl=3600)
        ```
    """

    def __init__(
        self,
        name: str,
        conn: redis.asyncio.Redis,
        max_task_size: int = DEFAULT_MAX_TASK_SIZE,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
        middleware: Sequence[Middleware] = (),
    ) -> None:
        keys = queue_keys(name, conn)
        super().__init__(keys, sent_once_async(conn), max_task_size, wait_replicas, wait_timeout_ms, middleware)
        self._executor = AsyncExecutor(self.conn, self.keys)

    async def _run(self, plan: Plan[T]) -> T:
        return await self._executor.run(plan)

    @overload
    async def enqueue(self, task: Union[Workflow, Step], delay: Optional[float] = None,
                      at: Optional[datetime.datetime] = None, *, result_ttl: Optional[float] = None,
                      depends_on: Sequence[Any] = (), on_success: Union[None, Step, Task] = None,
                      on_failure: Union[None, Step, Task] = None) -> AsyncWorkflowHandle: ...

    @overload
    async def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None, *,
                      result_ttl: Optional[float] = None, depends_on: Sequence[Any],
                      on_success: Union[None, Step, Task] = None,
                      on_failure: Union[None, Step, Task] = None) -> AsyncWorkflowHandle: ...

    @overload
    async def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None, *,
                      result_ttl: Optional[float] = None, on_success: Union[Step, Task],
                      on_failure: Union[None, Step, Task] = None) -> AsyncWorkflowHandle: ...

    @overload
    async def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None, *,
                      result_ttl: Optional[float] = None, on_failure: Union[Step, Task]) -> AsyncWorkflowHandle: ...

    @overload
    async def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                      unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                      result_ttl: None = None, **options: Any) -> Optional[AsyncTaskHandle]: ...

    @overload
    async def enqueue(self, task: Task, delay: Optional[float] = None, at: Optional[datetime.datetime] = None,
                      unique_for: Optional[float] = None, unique_key: Optional[str] = None, *,
                      result_ttl: float, **options: Any) -> AsyncTaskHandle: ...

    async def enqueue(self, task: Union[Task, Workflow, Step], delay: Optional[float] = None,
                      at: Optional[datetime.datetime] = None, unique_for: Optional[float] = None,
                      unique_key: Optional[str] = None, *, result_ttl: Optional[float] = None,
                      depends_on: Sequence[Any] = (), on_success: Union[None, Step, Task] = None,
                      on_failure: Union[None, Step, Task] = None,
                      **options: Any) -> Union[None, AsyncTaskHandle, AsyncWorkflowHandle]:
        """Enqueue a task (at once, later, unique or tracked) or a workflow, as `Queue.enqueue`.

        Args:
            task: A `PyTask` or a `GoTask`; or a workflow: a `chain`, a `group` or a `Step`.
            delay: Seconds to wait before the task is due (a workflow's first steps).
            at: When the task is due (a naive datetime is local time).
            unique_for: Refuse an identical task while this one is queued, waiting for a retry, or
                running, for at most this many seconds.
            unique_key: With `unique_for`: every task with this key is a duplicate.
            result_ttl: Track the task: its record is kept this many seconds after it ended. A
                workflow is always tracked (default: a day).
            depends_on: Handles of tracked tasks or of workflows: the task runs once every one of them
                succeeded, as for `Queue.enqueue`.
            on_success: A task (or `Step`) to run once the task (or workflow) succeeded.
            on_failure: A task (or `Step`) to run if the task (or the workflow's final step) fails.
            **options: Other options by name, as for `Queue.enqueue`.

        Returns:
            None; with `result_ttl` (given here or the task's), the task's `AsyncTaskHandle`. An
            `AsyncWorkflowHandle` for a workflow, and for a task with `depends_on`, `on_success` or
            `on_failure`.

        Raises:
            TaskTooLargeError: The blob is over `max_task_size`; nothing was written.
            TaskArgumentError: An argument msgpack cannot write; nothing was written.
            DuplicateTaskError: With `unique_for`: the lock is held.
            QueueFullError: Redis refused the write for want of memory; nothing was written.
            NotReplicatedError: With `wait_replicas`: fewer replicas acknowledged the task in time.
            ValueError: As for `Queue.enqueue`.
            TypeError: As for `Queue.enqueue`.
        """
        if _is_workflow(task, depends_on, on_success, on_failure, unique_for, unique_key, options):
            return self.workflow(await self._run(plan_enqueue_flow(self, task, depends_on, on_success, on_failure,
                                                                   result_ttl, delay, at)))
        assert not isinstance(task, (Workflow, Step))
        return await self._run(self._plan_enqueue((task,), True, delay=delay, at=at, unique_for=unique_for,
                                                  unique_key=unique_key, result_ttl=result_ttl, **options))

    @overload
    async def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                           at: Optional[datetime.datetime] = None, *, result_ttl: None = None, **options: Any) -> int: ...

    @overload
    async def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                           at: Optional[datetime.datetime] = None, *,
                           result_ttl: float, **options: Any) -> List[AsyncTaskHandle]: ...

    async def enqueue_many(self, tasks: Iterable[Task], delay: Optional[float] = None,
                           at: Optional[datetime.datetime] = None, *,
                           result_ttl: Optional[float] = None,
                           **options: Any) -> Union[int, List[AsyncTaskHandle]]:
        """Enqueue many tasks in one atomic round trip, as `Queue.enqueue_many`.

        Args:
            tasks: PyTasks and GoTasks.
            delay: Seconds to wait before they are due.
            at: When they are due.
            result_ttl: Track each task.
            **options: Other options by name, as for `Queue.enqueue_many`.

        Returns:
            How many tasks were enqueued; with `result_ttl`, their `AsyncTaskHandle`s, in order.

        Raises:
            TaskTooLargeError: A blob is over `max_task_size`; nothing was written.
            TaskArgumentError: An argument msgpack cannot write; nothing was written.
            QueueFullError: Redis refused the write for want of memory; nothing was written.
            NotReplicatedError: With `wait_replicas`: fewer replicas acknowledged the tasks in time.
            ValueError: As for `Queue.enqueue_many`.
            TypeError: As for `Queue.enqueue_many`.
        """
        return await self._run(self._plan_enqueue(tasks, False, delay=delay, at=at, result_ttl=result_ttl,
                                                  **options))

    def workflow(self, flow_id: str) -> AsyncWorkflowHandle:
        """The handle of a workflow enqueued on this queue, by its id, as `Queue.workflow`."""
        return AsyncWorkflowHandle(self, flow_id)

    def task(self, task_id: str) -> AsyncTaskHandle:
        """The handle of a tracked task of this queue, by its id, as `Queue.task`.

        Args:
            task_id: The task's id.

        Returns:
            Its handle.
        """
        return AsyncTaskHandle(self, task_id)

    async def task_info(self, task_id: str) -> TaskInfo:
        """A tracked task's record, read now, as `Queue.task_info`.

        Args:
            task_id: The task's id.

        Returns:
            Its status and what goes with it.

        Raises:
            TaskNotFoundError: No record of it: never tracked, or expired.
        """
        return await self._run(self._plan_task_info(task_id))

    async def cancel(self, task_id: str) -> Cancel:
        """Cancel a tracked task, waiting or running, as `Queue.cancel`.

        Args:
            task_id: The task's id.

        Returns:
            What it did: true if cancelled or requested, with the status the task had and why.

        Raises:
            TaskNotFoundError: No record of the task.
        """
        return await self._run(self._plan_cancel(task_id))

    async def len(self) -> int:
        """The number of tasks waiting in the queue, not counting those being processed or scheduled."""
        return await self._run(self._plan_len())

    async def pause(self) -> bool:
        """Pause the queue, as `Queue.pause`: our workers take no new task from it.

        Returns:
            True; False if the queue was paused already.
        """
        return await self._run(self._plan_pause())

    async def resume(self) -> bool:
        """Resume a paused queue, as `Queue.resume`.

        Returns:
            True; False if the queue was not paused.
        """
        return await self._run(self._plan_resume())

    async def paused_since(self) -> Optional[float]:
        """When the queue was paused, as `Queue.paused_since`.

        Returns:
            The unix time it was paused, or None if it is not paused.
        """
        return await self._run(self._plan_paused_since())

    async def move_due(self, limit: int = 1000) -> int:
        """Move scheduled tasks that are due into the queue, as `Queue.move_due`.

        Args:
            limit: The most tasks to move.

        Returns:
            How many moved.
        """
        return await self._run(self._plan_move_due(limit))
