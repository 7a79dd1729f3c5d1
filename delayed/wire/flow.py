"""Workflows: `chain`, `group` and `Step`, the graph they make, and what a workflow's records say.

A workflow is a graph of steps, each a tracked task. A step that waits on others is kept in its
record (status "waiting") and enqueued by the script that settles the last step it waits on, in the
same Lua call (delayed/protocol/lua/flow.lua, which documents every field written here). Nothing
of a workflow rides in a task's blob but its id, so any worker that tracks tasks, Python or Go, runs
its steps without knowing workflows exist.

`chain(a, b, c)` runs each part once the one before it succeeded; `group(tasks, callback)` runs its
members at once and the callback once they all ended. Both nest (a chain of groups, a group of
chains), and both compile to the same graph (`Workflow`): nodes, edges and, at its ends, the steps
whose results are the workflow's.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

from .keys import TASK_INFIX
from .strenum import StrEnum
from .task import GoTask, PyTask, Task

DEFAULT_RESULT_TTL = 86400
"""Seconds a workflow and its steps' records are kept once it ended, when enqueue gives no result_ttl."""


class When(StrEnum):
    """When an edge's successor takes its input from the step before it (flow.lua's `next` entries)."""

    SUCCESS = "s"
    FAILURE = "f"
    ALWAYS = "a"


class Inputs(StrEnum):
    """How a step takes the results of the steps it waits on (flow.lua's `inputs`)."""

    NONE = ""
    ONE = "one"
    LIST = "list"


class FlowStatus(StrEnum):
    """A workflow's status, as its hash stores it.

    Attributes:
        RUNNING: `"running"`: steps are waiting, queued or running.
        DONE: `"done"`: every step ended, and no failure stopped it or went to an `on_failure` step
            (a member's failure a group passes to its callback does neither).
        FAILED: `"failed"`: a step failed and nothing took its failure: the steps after it wait
            (requeue its dead letter to go on: the workflow is `running` again once a worker claims
            it, and every failed step was requeued); or every step ended, and a failure was taken by
            an `on_failure` step.
        CANCELLED: `"cancelled"`: `cancel()` cancelled the steps that had not started, or a step was
            cancelled on its own (`queue.cancel(step_id)`) and the others ended.
    """

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


SEPARATORS = "|;\n"
"""What separates the fields and entries of a step's `next` edges and a workflow's list of steps
(flow.lua): no queue of a workflow can have one in its name."""


def check_flow_queue_name(name: str) -> None:
    """ValueError for a queue name a workflow's records cannot hold (one with a SEPARATORS character)."""
    if any(separator in name for separator in SEPARATORS):
        raise ValueError(f"a workflow's queue name cannot hold '|', ';' or a newline (they separate what a step's "
                         f"record lists of the steps after it), got {name!r}")


MEMBER_FAILURE = ("stop", "pass")
"""What a group's failed member does to its callback: stops it (it waits, as a chain's next step
does), or passes the failure on in its place (a `StepFailed` in the callback's list)."""


@dataclass(frozen=True)
class Step:
    """A task as a workflow's step, when it needs more than the task: another queue, or the results
    of the steps it waits on.

    A plain task in a workflow is a `Step` with the defaults: it runs on the workflow's queue, with
    its own arguments only.

    Args:
        task: The `PyTask` or `GoTask`.
        queue: The name of the queue it runs on (a GoTask's: one our Go worker serves); default: the
            queue the workflow is enqueued on, which keeps the workflow's hash and handle either way.
            On a Redis Cluster every queue of a workflow must hash to that queue's slot: give them
            the same hash tag (`{orders}`, `{orders}:emails`).
        takes_result: True: receive what the steps it waits on returned, as an extra last positional
            argument: one value after one step (the step before it in a chain, or the part an
            `on_success` step follows); the list of the results, in order, after a group without
            callback and after `depends_on` (even of one task); a `StepFailed` for an `on_failure`
            step. None (the default) and False: nothing, except for a group's callback, which
            receives its members' list unless given False.

    Example:
        ```python
        from delayed import PyTask, Step

        notify = Step(PyTask("tasks:notify", ["ann"]), takes_result=True)  # notify("ann", <result>)
        mail = Step(PyTask("tasks:notify", ["bob", "cat.png"]), queue="emails")  # its own arguments only
        ```
    """

    task: Task
    queue: Optional[str] = None
    takes_result: Optional[bool] = None


@dataclass
class Node:
    """One step of a workflow graph: its task, queue, how it takes its inputs, and its predecessors'
    edges, in slot order (the slot is the position in `inputs_from`, from 1)."""

    task: Task
    queue: Optional[str]
    takes_result: Optional[bool]
    gathers: bool = False
    """It takes its inputs as one list, whatever their number (a callback, or after depends_on)."""
    inputs_from: List[Tuple[int, When]] = field(default_factory=list)
    """(predecessor node index, when) per slot; depends_on's slots are counted in `external`."""
    external: int = 0
    first: bool = False
    """It runs at the first of its inputs, and takes that one (an on_failure step: the first failure)."""

    @property
    def waits(self) -> int:
        return len(self.inputs_from) + self.external

    def moved(self, offset: int) -> "Node":
        """A copy of this node, its predecessors' indexes `offset` higher (it joins a bigger workflow).
        Built field by field: `dataclasses.replace` costs 4 times as much, and a group of 10,000 copies
        its members twice."""
        return Node(self.task, self.queue, self.takes_result, self.gathers,
                    [(index + offset, when) for index, when in self.inputs_from], self.external, self.first)

    def inputs(self) -> Inputs:
        if not self.takes_result:
            return Inputs.NONE
        return Inputs.LIST if not self.first and (self.gathers or self.waits != 1) else Inputs.ONE


class Workflow:
    """A graph of steps, as `chain` and `group` build it: enqueue it with `Queue.enqueue`.

    Attributes:
        nodes (list): Its steps, in the order the workflow lists them.
        heads (list): The indexes of the steps that wait on nothing in it.
        tails (list): The indexes of the steps whose results are the workflow's.
        shape (str): `"one"`: the workflow's result is its one tail's; `"list"`: the tails' results.
    """

    def __init__(self, nodes: List[Node], heads: List[int], tails: List[int], shape: Inputs) -> None:
        self.nodes, self.heads, self.tails, self.shape = nodes, heads, tails, shape

    @classmethod
    def of(cls, part: Union["Workflow", Step, Task]) -> "Workflow":
        """A part of a workflow as a workflow: a task or a Step is one of one step."""
        if isinstance(part, Workflow):
            return part
        if isinstance(part, (PyTask, GoTask)):
            part = Step(part)
        if not isinstance(part, Step):
            raise TypeError(f"a workflow's step is a PyTask, a GoTask, a Step, a chain or a group, not "
                            f"{type(part).__name__}")
        return cls([Node(part.task, part.queue, part.takes_result)], [0], [0], Inputs.ONE)

    def _taken(self, offset: int) -> "Workflow":
        """A copy of this workflow, its nodes renumbered from offset (they join a bigger one): a
        workflow can be a part of several."""
        nodes = [node.moved(offset) for node in self.nodes]
        return Workflow(nodes, [i + offset for i in self.heads], [i + offset for i in self.tails], self.shape)

    def then(self, successor: "Workflow", when: When = When.SUCCESS, gathers: bool = False) -> "Workflow":
        """This workflow, then successor once its tails ended as `when` says: successor's heads take
        this workflow's result (one value, or the list of its tails')."""
        start = self._taken(0)
        successor = successor._taken(len(self.nodes))
        nodes = start.nodes + successor.nodes
        for head in successor.heads:
            node = nodes[head]
            node.gathers = node.gathers or gathers or self.shape is Inputs.LIST
            node.inputs_from.extend((tail, when) for tail in self.tails)
        return Workflow(nodes, self.heads, successor.tails, successor.shape)


def chain(*steps: Union[Workflow, Step, Task]) -> Workflow:
    """Steps that run one after the other, each once the one before it succeeded.

    A step that fails (out of retries, dead-lettered) stops the chain: the steps after it wait, the
    workflow's status says `failed` and which step, and requeuing its dead letter goes on.

    Args:
        *steps: Tasks (`PyTask`, `GoTask`), `Step`s, chains or groups, in order. A `Step` with
            `takes_result=True` receives the previous step's result as an extra last argument (the
            list of a group's results, after a group without callback); any other step runs with its
            own arguments only.

    Returns:
        The workflow: `queue.enqueue(chain(...))` enqueues it and returns its `WorkflowHandle`, whose
        `result()` is the last step's.

    Raises:
        ValueError: No steps.
        TypeError: A step that is no task, `Step`, chain or group.

    Example:
        ```python title="tasks.py"
        def add(a, b):
            return a + b
        ```

        ```python
        from delayed import PyTask, Queue, Step, Worker, chain, connect

        queue = Queue("default", connect())
        handle = queue.enqueue(chain(PyTask("tasks:add", [1, 2]), Step(PyTask("tasks:add", [10]), takes_result=True)))
        Worker(queue, ["tasks"], burst=True).run()  # runs both steps (most workers run elsewhere)
        handle.result(timeout=30)                   # 13: add(10, 3)
        ```
    """
    if not steps:
        raise ValueError("chain() needs at least one step")
    workflow = Workflow.of(steps[0])
    for step in steps[1:]:
        workflow = workflow.then(Workflow.of(step))
    return workflow


def group(tasks: Sequence[Union[Workflow, Step, Task]], callback: Union[None, Step, Task] = None,
          on_member_failure: str = "stop") -> Workflow:
    """Members that run at once, and a callback that runs once they all ended.

    Args:
        tasks: The members: tasks, `Step`s, chains or groups (a chain's result is its last step's).
        callback: A task (or `Step`) that receives the members' results as an extra last argument:
            a list, in the members' order (not the order they ended in), once every member ended. A
            `Step(task, takes_result=False)` receives nothing. None: the group's result is that list.
        on_member_failure: `"stop"` (the default): a member that fails stops the callback, which waits
            as a chain's next step does, while the other members run on (requeue the member's dead
            letter to go on). `"pass"`: the callback runs all the same, and a failed member's place in
            its list holds a `StepFailed` (its id, function, status and error); the workflow then ends
            `done` if the callback succeeds.

    Returns:
        The workflow: `queue.enqueue(group(...))` returns its `WorkflowHandle`, whose `result()` is
        the callback's (or, without one, the list of the members' results).

    Raises:
        ValueError: No members, or an `on_member_failure` other than `"stop"` and `"pass"`.

    Example:
        ```python title="tasks.py"
        def double(x):
            return 2 * x


        def total(numbers):
            return sum(numbers)
        ```

        ```python
        from delayed import PyTask, Queue, Worker, connect, group

        queue = Queue("default", connect())
        handle = queue.enqueue(group([PyTask("tasks:double", [n]) for n in (1, 2, 3)], callback=PyTask("tasks:total")))
        Worker(queue, ["tasks"], burst=True).run()  # runs the members, then total([2, 4, 6])
        handle.result(timeout=30)                   # 12
        ```
    """
    if on_member_failure not in MEMBER_FAILURE:
        raise ValueError(f"on_member_failure must be one of {', '.join(MEMBER_FAILURE)}, got {on_member_failure!r}")
    if not tasks:
        raise ValueError("group() needs at least one member")
    nodes: List[Node] = []
    heads: List[int] = []
    tails: List[int] = []
    for task in tasks:
        member = Workflow.of(task)._taken(len(nodes))
        nodes += member.nodes
        heads += member.heads
        tails += member.tails
    members = Workflow(nodes, heads, tails, Inputs.LIST)
    if callback is None:
        return members
    final = Workflow.of(callback)
    [node] = final.nodes
    node.takes_result = node.takes_result is not False
    when = When.ALWAYS if on_member_failure == "pass" else When.SUCCESS
    return members.then(final, when, gathers=True)


def step_of(key: str) -> Tuple[str, str]:
    """A record key's queue and task id: `<queue>_task:<id>` (see keys.QueueKeys.task)."""
    queue, _, task_id = key.rpartition(TASK_INFIX)
    return queue, task_id


def record_keys(text: bytes) -> List[str]:
    """A workflow hash's list of record keys (steps, final): one per line."""
    return [line for line in text.decode().split("\n") if line]


def next_edges(text: bytes) -> List[Tuple[When, str, int]]:
    """A step record's `next` (see flow.lua): its successors, each as (when, record key, slot)."""
    edges = []
    for entry in text.decode().split(";"):
        when, _, rest = entry.partition("|")
        successor, _, slot = rest.rpartition("|")
        if successor:
            edges.append((When(when), successor, int(slot)))
    return edges


@dataclass(frozen=True)
class WorkflowInfo:
    """A workflow's hash, as `WorkflowHandle.info()` reads it.

    Attributes:
        id (str): The workflow's id.
        queue (str): The queue it was enqueued on.
        status (str): A `FlowStatus` value: running, done, failed or cancelled.
        total (int): Its steps.
        left (int): Its steps not counted as ended yet: those waiting, queued or running, and a
            failed step that stopped it.
        steps (list): Every step, as (queue, task id), in the order the workflow lists them.
        final (list): The steps whose results are the workflow's.
        shape (str): `"one"` (its result is its one final step's) or `"list"`.
        failed (tuple | None): (queue, task id) of the step whose failure stopped it (or that an
            `on_failure` step took), or None.
        error (str | None): How the step that stopped it ended, and what it raised:
            `"failed: ValueError: ..."`.
        created_at (float | None): When it was enqueued (unix time).
        finished_at (float | None): When its last step ended, or it was cancelled.
        expires_in (int | None): Seconds its hash has left once it ended (None before).
    """

    id: str
    queue: str
    status: str
    total: int
    left: int
    steps: List[Tuple[str, str]]
    final: List[Tuple[str, str]]
    shape: str
    failed: Optional[Tuple[str, str]]
    error: Optional[str]
    created_at: Optional[float]
    finished_at: Optional[float]
    expires_in: Optional[int]


def parse_info(flow: str, queue: str, fields: Dict[bytes, bytes], ttl: int) -> WorkflowInfo:
    """A workflow hash's fields (HGETALL) and TTL as a WorkflowInfo."""
    def text(name: str) -> Optional[str]:
        value = fields.get(name.encode())
        return None if value is None else value.decode(errors="replace")

    def number(name: str) -> Optional[float]:
        value = text(name)
        return None if value is None else float(value)

    failed = (text("failed") or "").split("\n")[0] or text("handled")
    return WorkflowInfo(
        id=flow, queue=queue, status=text("status") or "?", total=int(number("total") or 0),
        left=int(number("left") or 0), steps=[step_of(key) for key in record_keys(fields.get(b"steps", b""))],
        final=[step_of(key) for key in record_keys(fields.get(b"final", b""))], shape=text("shape") or "one",
        failed=None if failed is None else step_of(failed), error=text("error"), created_at=number("created"),
        finished_at=number("finished"), expires_in=ttl if ttl >= 0 else None)
