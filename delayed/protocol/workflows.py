"""What enqueueing a workflow sends: each step's record and blob, the edges between them, and the
tasks outside it that some steps wait on (depends_on), as enqueue_flow.lua's arguments (see
delayed.wire.flow for the graph, and lua/flow.lua for what the scripts do with it)."""
import functools
import time
from typing import Any, Dict, Generic, List, Optional, Sequence, Tuple, TypeVar, Union

from redis.crc import key_slot

from ..errors import TaskFailedError, TaskNotFoundError
from ..wire import tracking
from ..wire.flow import (
    DEFAULT_RESULT_TTL,
    FlowStatus,
    Inputs,
    Node,
    Step,
    When,
    Workflow,
    WorkflowInfo,
    check_flow_queue_name,
    parse_info,
    step_of,
)
from ..wire.hooks import Enqueuing
from ..wire.keys import CANCELS_SUFFIX, QueueKeys, check_queue_name, hash_tag
from ..wire.options import make
from ..wire.task import Task
from ..wire.tracking import Cancel, outcome
from .calls import Command, Pipeline, Plan, RunScript, Sleep
from .connection import is_cluster
from .polls import polls
from .producer import Producer, blobs_of, due_time, refused_when_full, scheduled_members, stamped, task_info_of
from .scripts import Script

Dependency = Any
"""What a workflow's first steps wait on (depends_on): a TaskHandle or AsyncTaskHandle (the task), or a
WorkflowHandle or AsyncWorkflowHandle (its final steps: its last step, a group's callback or members)."""

ENQUEUE_FLOW = Script("enqueue_flow")
CANCEL_FLOW = Script("cancel_flow")


def with_handlers(part: Union[Workflow, Step, Task], on_success: Union[None, Step, Task],
                  on_failure: Union[None, Step, Task]) -> Workflow:
    """enqueue's task or workflow as a workflow, with its on_success and on_failure steps. on_success
    runs once the part's final steps all succeeded (taking their result if it asks). on_failure runs at
    the first failure of any of the part's steps (taking a StepFailed if it asks), except a group
    member whose failure its callback takes (on_member_failure="pass"), and is cancelled once they all
    succeeded. The workflow's result stays the part's own."""
    workflow = Workflow.of(part)._taken(0)  # enqueue's copy: the caller's workflow stays as it was
    tails, shape, watched = workflow.tails, workflow.shape, len(workflow.nodes)
    if on_success is not None:
        workflow = workflow.then(Workflow.of(on_success))
    if on_failure is not None:
        handler = Workflow.of(on_failure)._taken(len(workflow.nodes))
        [node] = handler.nodes
        passing = {before for step in workflow.nodes[:watched] for before, when in step.inputs_from
                   if when is When.ALWAYS}
        node.inputs_from = [(index, When.FAILURE) for index in range(watched) if index not in passing]
        node.first = True
        workflow = Workflow(workflow.nodes + handler.nodes, workflow.heads, tails, shape)
    workflow.tails, workflow.shape = tails, shape
    return workflow


def _checked(node: Node, index: int) -> None:
    """TypeError or ValueError for a step option a workflow cannot honour."""
    options = node.task.options
    if options.unique_for is not None:
        raise TypeError(f"step {index + 1} ({node.task.func_path}) has unique_for: a workflow's steps cannot be unique")
    if node.waits and (options.delay is not None or options.at is not None):
        raise ValueError(f"step {index + 1} ({node.task.func_path}) has a delay or at, but runs once the steps before "
                         "it end: only a workflow's first steps can wait for a time")
    if options.result_ttl is not None:
        raise TypeError(f"step {index + 1} ({node.task.func_path}) has result_ttl: give it to enqueue, for the whole "
                        "workflow")


def flow_call(keys: QueueKeys, workflow: Workflow, dependencies: Sequence[Tuple[str, str]], ttl: int,
              due: Optional[float], cluster: bool, max_task_size: int) -> Tuple[str, List[str], Dict[str, Any]]:
    """The workflow's id, its steps' task ids, and the enqueue_flow script's arguments. dependencies:
    (queue, task id) of the tasks every first step waits on; due: when the first steps are (None: now).
    Steps run on their Step's queue, else on keys' queue."""
    flow_id = tracking.new_id()
    ids = [tracking.new_id() for _ in workflow.nodes]
    queues = [node.queue or keys.name for node in workflow.nodes]
    for name in {keys.name, *queues}:
        check_flow_queue_name(name)
    for name in set(queues) - {keys.name}:
        check_queue_name(name, cluster)
        if cluster and key_slot(name.encode()) != key_slot(keys.name.encode()):
            raise ValueError(f"a workflow's queues live in one slot of a Redis Cluster: {name!r} and {keys.name!r} "
                             f"have different hash tags ({hash_tag(name)!r}, {hash_tag(keys.name)!r})")
    records = [QueueKeys.of(queue).task(task_id) for queue, task_id in zip(queues, ids)]
    for index in workflow.heads:
        workflow.nodes[index].external = len(dependencies)
        workflow.nodes[index].gathers = True
    edges = [""] * len(workflow.nodes)
    for index, node in enumerate(workflow.nodes):
        _checked(node, index)
        for slot, (before, when) in enumerate(node.inputs_from, 1):
            edges[before] += f"{when}|{records[index]}|{slot};"
    now = time.time()  # a step's expires counts from the workflow's enqueue, whenever its turn comes
    blobs = blobs_of([stamped(node.task, node.task.options, now).with_options(id=task_id)
                      for node, task_id in zip(workflow.nodes, ids)], max_task_size)
    steps: List[Any] = []
    for index, (node, blob) in enumerate(zip(workflow.nodes, blobs)):
        own_due = due
        if node.task.options.delay is not None or node.task.options.at is not None:
            own_due = due_time(node.task.options)
        member = b"" if own_due is None or node.waits else next(iter(scheduled_members((blob,), own_due)))
        inputs = node.inputs() if node.waits else Inputs.NONE
        steps += [queues[index], node.task.func_path, blob, "" if own_due is None or node.waits else own_due, member,
                  node.waits, inputs.value, node.waits, edges[index]]
    depending: List[Any] = []
    for position, (queue, task_id) in enumerate(dependencies, 1):
        record = QueueKeys.of(queue).task(task_id)
        for index in workflow.heads:
            depending += [record, index + 1, len(workflow.nodes[index].inputs_from) + position]
    final = "\n".join(records[index] for index in workflow.tails)
    call = dict(flow=keys.flow(flow_id), records=records, ttl=ttl, final=final, shape=workflow.shape.value,
                step_count=len(workflow.nodes), steps=steps, dependencies=depending)
    return flow_id, ids, call


def check_enqueued(reply: List[Any]) -> None:
    """TaskNotFoundError for enqueue_flow's refusal: a task depends_on named has no record, or was cancelled."""
    if int(reply[0]) == 1:
        return
    record, status = reply[1].decode(), reply[2].decode()
    why = "was cancelled" if status == "cancelled" else "has no record (never tracked, or it expired)"
    raise TaskNotFoundError(f"depends_on: task {step_of(record)[1]} {why}; nothing was enqueued")


def plan_enqueue_flow(producer: Producer[Any], part: Union[Workflow, Step, Task], depends_on: Sequence[Dependency],
                      on_success: Union[None, Step, Task], on_failure: Union[None, Step, Task],
                      result_ttl: Optional[float], delay: Optional[float], at: Any) -> Plan[str]:
    """Enqueue a workflow (a chain, a group, or a task with depends_on, on_success or on_failure) in one
    script call; returns its id (each face gives its handle). result_ttl: how long it is kept once it
    ended (default DEFAULT_RESULT_TTL); delay, at: when its first steps are due. With the producer's
    enqueue hooks, each step is a task through them (delayed.protocol.enqueue_hooks), a step's own
    queue its Enqueuing's."""
    given = {"result_ttl": result_ttl, "delay": delay, "at": at}
    chosen = make(**{name: value for name, value in given.items() if value is not None})
    ttl = tracking.ttl_seconds(DEFAULT_RESULT_TTL if chosen.result_ttl is None else chosen.result_ttl)
    workflow = with_handlers(part, on_success, on_failure)
    if depends_on and (delay is not None or at is not None):
        raise ValueError("a workflow with depends_on starts once those tasks succeeded: it takes no delay or at")
    hooks = producer._hooks
    write = functools.partial(_plan_write_flow, producer, workflow, depends_on, ttl, due_time(chosen))
    if hooks is None:
        flow_id, _ = yield from write([node.task for node in workflow.nodes])
        return flow_id
    # each step is a task through the hooks: around the one script that writes them all, told its handle
    enqueuings = [Enqueuing(node.task, node.queue or producer.name) for node in workflow.nodes]
    flow_id, _ = yield from hooks.run(enqueuings, write, lambda written: [
        producer._sibling(enqueuing.queue).task(task_id) for enqueuing, task_id in zip(enqueuings, written[1])])
    return flow_id


def _plan_write_flow(producer: Producer[Any], workflow: Workflow, depends_on: Sequence[Dependency], ttl: int,
                     due: Optional[float], tasks: List[Task]) -> Plan[Tuple[str, List[str]]]:
    """Write the workflow, its steps' tasks now tasks: the enqueue_flow script (after reading the final
    steps of the workflows depends_on names), and the replicas' acknowledgement (with wait_replicas).
    Returns the workflow's id and its steps' task ids."""
    for node, task in zip(workflow.nodes, tasks):
        node.task = task
    dependencies: List[Tuple[str, str]] = []
    for dependency in depends_on:
        if isinstance(dependency, Workflows):
            info = yield from plan_flow_info(producer._sibling(dependency.queue.name), dependency.id)
            dependencies += info.final
        else:
            dependencies.append((dependency.queue.name, dependency.id))
    flow_id, ids, call = flow_call(producer.keys, workflow, dependencies, ttl, due, is_cluster(producer.conn),
                                   producer.max_task_size)
    with refused_when_full(producer.name):
        reply = yield RunScript(ENQUEUE_FLOW, call)
    check_enqueued(reply)
    yield from producer._plan_replicated()
    return flow_id, ids


def plan_flow_info(producer: Producer[Any], flow_id: str) -> Plan[WorkflowInfo]:
    """A workflow's hash and its time to live, read in one MULTI; TaskNotFoundError if there is none."""
    key = producer.keys.flow(flow_id)
    fields, ttl = yield Pipeline((Command("hgetall", (key,)), Command("ttl", (key,))))
    if isinstance(fields, list):  # RESP2 in a cluster transaction (see producer.task_info_of)
        fields = dict(zip(fields[::2], fields[1::2]))
    if not fields:
        raise TaskNotFoundError(f"no workflow {flow_id} in {producer.name}: never enqueued there, or it expired "
                                "result_ttl seconds after it ended")
    return parse_info(flow_id, producer.name, fields, ttl)


def plan_flow_result(producer: Producer[Any], flow_id: str, timeout: Optional[float]) -> Plan[Any]:
    """Wait for the workflow to end; its result: its final step's, or the list of its final steps'.
    TaskFailedError if a step's failure stopped it or it was cancelled; TimeoutError after timeout s."""
    info = yield from plan_flow_info(producer, flow_id)
    for wait in polls(timeout):
        if info.status != FlowStatus.RUNNING:
            break
        yield Sleep(wait)
        info = yield from plan_flow_info(producer, flow_id)
    if info.status == FlowStatus.RUNNING:
        raise TimeoutError(f"workflow {flow_id} still running after {timeout} s ({info.left} of {info.total} steps left)")
    if info.status != FlowStatus.DONE:
        step = "" if info.failed is None else f": step {info.failed[1]} in {info.failed[0]} {info.error}"
        raise TaskFailedError(f"workflow {flow_id} {info.status}{step}", info)
    records = [QueueKeys.of(queue).task(task_id) for queue, task_id in info.final]
    replies = yield Pipeline(tuple(Command("hgetall", (record,)) for record in records), transaction=False)
    results = [outcome(task_info_of(QueueKeys.of(queue), task_id, fields, -1))
               for (queue, task_id), fields in zip(info.final, replies)]
    return results[0] if info.shape == Inputs.ONE else results


def plan_cancel_flow(producer: Producer[Any], flow_id: str) -> Plan[Cancel]:
    """The cancel_flow script, and what it did said for people (TaskNotFoundError for no workflow)."""
    cancelled, running, status = yield RunScript(CANCEL_FLOW, {"flow": producer.keys.flow(flow_id),
                                                               "cancels_suffix": CANCELS_SUFFIX})
    status = status.decode()
    if cancelled == -1:
        yield from plan_flow_info(producer, flow_id)  # raises TaskNotFoundError
    if cancelled == -2:
        return Cancel(False, status, f"workflow {flow_id} already ended ({status})")
    busy = f"; cancel requested of {running} running step(s), which end cancelled" if running else ""
    return Cancel(True, status, f"cancelled workflow {flow_id} ({status}): {cancelled} step(s) that had not "
                                f"started{busy}")


Q = TypeVar("Q", bound=Producer[Any])
"""The queue a workflow handle reads through: a Queue or an AsyncQueue (handles.py's faces)."""


class Workflows(Generic[Q]):
    """A workflow on the queue it was enqueued on, its operations planned once for both faces."""

    def __init__(self, queue: Q, flow_id: str) -> None:
        self.queue = queue
        self.id = flow_id

    def _plan_info(self) -> Plan[WorkflowInfo]:
        return (yield from plan_flow_info(self.queue, self.id))

    def _plan_status(self) -> Plan[str]:
        return (yield from self._plan_info()).status

    def _plan_result(self, timeout: Optional[float]) -> Plan[Any]:
        return (yield from plan_flow_result(self.queue, self.id, timeout))

    def _plan_cancel(self) -> Plan[Cancel]:
        return (yield from plan_cancel_flow(self.queue, self.id))

    def _step_handles(self, info: WorkflowInfo) -> List[Any]:
        return [self.queue._sibling(queue).task(task_id) for queue, task_id in info.steps]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, queue={self.queue.name!r})"
