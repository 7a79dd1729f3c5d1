"""A workflow as people see it (`delayed task ID`, the dashboard's task page): its status, the step that
stopped it and why, and its steps in the order the workflow lists them (each after every step it
waits on), with their functions, states and what each waits on; counted per status, and listed in
part when there are many; and the waiting steps a worker that does not track tasks took (stalled).

Every read is bounded: the records of the first READ_LIMIT steps (their status, function and
successors: the counts and the graph cover those), in pipelined round trips of flow_reads.CHUNK, and
the stall look of the first stalls.VIEW_STEP_LIMIT steps, in one script call."""
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import redis

from ..protocol import flow_reads, inspect
from ..protocol.queue import Queue
from ..wire.flow import When, WorkflowInfo, next_edges
from ..wire.keys import FLOW_INFIX, QueueKeys
from ..wire.tracking import Status
from . import stalls

Row = Dict[str, Any]

READ_LIMIT = 200_000
"""Steps whose records a view reads at most."""
LISTED = 20
"""A workflow of at most this many steps lists them all; a longer one lists its first FIRST, its final
ones (whose results are its result), those that failed (at most FAILED_LISTED of them), the one that
stopped it, the stalled ones and the step a page is about."""
FIRST = 10
FAILED_LISTED = 10
FAILED = (Status.FAILED, Status.DEAD)
EXPIRED = "expired"
"""The status shown for a step whose record is gone (it expired, or was deleted)."""
WHEN = {When.SUCCESS: "succeeded", When.FAILURE: "failed", When.ALWAYS: "ended"}
"""What a step waits for of the step before it, by the edge's `when` (see flow.lua's `next`)."""


@dataclass(frozen=True)
class Steps:
    """A workflow's steps as read (at most READ_LIMIT), in its order: record keys, statuses, functions,
    per step the (index, when) of each step before it that it waits on, and how many inputs a waiting
    step still waits for (None for one that does not wait)."""

    keys: List[str]
    statuses: List[str]
    funcs: List[str]
    after: List[List[Tuple[int, When]]]
    waits: List[Optional[int]]


@dataclass(frozen=True)
class WorkflowView:
    """What a view read: the workflow's hash, its steps, the stall look, the indexes of the steps it
    lists, their errors (failed ones), the step the view is about (None for the workflow's own page)
    and the stalled steps by index, each with the id of the worker holding it (None: it is nowhere)."""

    info: WorkflowInfo
    steps: Steps
    stall: flow_reads.StallLook
    listed: List[int]
    errors: Dict[int, str]
    current: Optional[int]
    stalled: Dict[int, Optional[str]]

    def step_row(self, i: int) -> Row:
        """Step i (from 0) for people: its place (from 1), id, queue, function, status, what it waits on
        (runs of steps, and for what), the inputs it still waits for, its error, whether it is the step
        the view is about, and "stalled": the worker holding it ("" for nowhere), None if not stalled.
        A step beyond those read has only its place, id and queue."""
        queue, task_id = self.info.steps[i]
        row: Row = {"step": i + 1, "id": task_id, "queue": queue}
        if i >= len(self.steps.keys):
            return row
        return {**row, "func": self.steps.funcs[i], "status": self.steps.statuses[i],
                "after": _runs(self.steps.after[i]), "waits": self.steps.waits[i], "error": self.errors.get(i),
                "current": i == self.current, "stalled": (self.stalled[i] or "") if i in self.stalled else None}

    def as_dict(self) -> Row:
        """The view as JSON-able data: the workflow's fields (times as unix times), "stopped_by" (the step
        that stopped it, as a step row, or None), "counts" (steps per status, of those read, most first),
        "read" (steps read), "steps" (the rows of those listed), "listed_all", and "stall_look" (steps
        looked at for stalls, and those that could not be told); stalled steps say so in their rows."""
        info = self.info
        stopped = None if info.failed is None or info.failed not in info.steps else info.steps.index(info.failed)
        return {"id": info.id, "queue": info.queue, "status": info.status, "total": info.total, "left": info.left,
                "created_at": info.created_at, "finished_at": info.finished_at, "expires_in": info.expires_in,
                "error": info.error, "stopped_by": None if stopped is None else self.step_row(stopped),
                "counts": dict(Counter(self.steps.statuses).most_common()), "read": len(self.steps.keys),
                "steps": [self.step_row(i) for i in self.listed], "listed_all": len(self.listed) == info.total,
                "stall_look": {"looked": self.stall.looked, "unchecked": self.stall.unchecked}}

    def warnings(self) -> List[Tuple[int, str]]:
        """Each stalled step's place (from 1) and what stalls.warning says of it."""
        return [(i + 1, stalls.warning(self.info.queue, {
            "workflow": self.info.id, "step": self.info.steps[i][1], "func": self.steps.funcs[i],
            "status": self.steps.statuses[i], "worker": worker})) for i, worker in sorted(self.stalled.items())]


def view(conn: redis.Redis, queue: str, flow_id: str, every_step: bool = False,
         current: Optional[str] = None) -> WorkflowView:
    """The workflow flow_id of the queue: its hash, its steps' records (at most READ_LIMIT), the stall
    look (stalls.look), and the steps listed: all (every_step, or at most LISTED of them), else the
    first FIRST, the final ones, those that failed (at most FAILED_LISTED), stopped it or stalled, and
    the step whose id is current; never one beyond those read. TaskNotFoundError if there is no such
    workflow."""
    info = Queue(queue, conn).workflow(flow_id).info()
    keys = [QueueKeys.of(name).task(task_id) for name, task_id in info.steps[:READ_LIMIT]]
    steps = _read(conn, keys)
    stall = stalls.look(conn, QueueKeys.of(queue).flow(flow_id), info.status)
    index = {key: i for i, key in enumerate(keys)}
    stalled = {index[step.record]: step.worker for step in stall.stalled if step.record in index}
    ids = [task_id for _, task_id in info.steps[:READ_LIMIT]]
    at = ids.index(current) if current in ids else None
    if every_step or info.total <= LISTED:
        listed = list(range(len(keys)))
    else:
        failed = [i for i, status in enumerate(steps.statuses) if status in FAILED][:FAILED_LISTED]
        stopped = index.get(QueueKeys.of(info.failed[0]).task(info.failed[1])) if info.failed else None
        final = {index[QueueKeys.of(name).task(task_id)] for name, task_id in info.final
                 if QueueKeys.of(name).task(task_id) in index}
        chosen = set(range(FIRST)) | final | set(failed) | set(stalled) | {i for i in (stopped, at) if i is not None}
        listed = sorted(i for i in chosen if i < len(keys))
    erring = [i for i in listed if steps.statuses[i] in (*FAILED, Status.RETRYING)]
    errors = {i: text.decode(errors="replace")
              for i, (text,) in zip(erring, flow_reads.step_fields(conn, [keys[i] for i in erring], ("error",)))
              if text is not None}
    return WorkflowView(info, steps, stall, listed, errors, at, stalled)


def located(conn: redis.Redis, some_id: str) -> inspect.IdQueues:
    """The queues holding a tracked task's record of this id, and those holding a workflow of it (one SCAN)."""
    return inspect.id_queues(conn, some_id)


def workflow_of(conn: redis.Redis, queue: str, task_id: str) -> Optional[Tuple[str, str]]:
    """The workflow a tracked task is a step of, as (its queue, its id), or None: the record's `flow`."""
    key = flow_reads.record_field(conn, QueueKeys.of(queue).task(task_id), "flow")
    if key is None:
        return None
    name, _, flow_id = key.decode(errors="replace").rpartition(FLOW_INFIX)
    return name, flow_id


def _read(conn: redis.Redis, keys: Sequence[str]) -> Steps:
    """The steps' records: status, function, successors and waits."""
    fields = flow_reads.step_fields(conn, keys, ("status", "func", "next", "waits"))
    index = {key: i for i, key in enumerate(keys)}
    after: List[List[Tuple[int, When]]] = [[] for _ in keys]
    for i, (_, _, edges, _) in enumerate(fields):
        for when, successor, _ in next_edges(edges or b""):
            if successor in index:
                after[index[successor]].append((i, when))

    def text(value: Optional[bytes], missing: str = "") -> str:
        return missing if value is None else value.decode(errors="replace")

    return Steps(list(keys), [text(status, EXPIRED) for status, _, _, _ in fields],
                 [text(func) for _, func, _, _ in fields], after,
                 [None if waits is None else int(waits) for _, _, _, waits in fields])


def _runs(after: List[Tuple[int, When]]) -> List[Row]:
    """The steps a step waits on as runs of consecutive places (from 1) waited on for the same thing:
    [{"from": 1, "to": 3, "when": "succeeded"}]."""
    runs: List[Row] = []
    for i, when in sorted(after):
        if runs and runs[-1]["to"] == i and runs[-1]["when"] == WHEN[when]:
            runs[-1]["to"] = i + 1
        else:
            runs.append({"from": i + 1, "to": i + 1, "when": WHEN[when]})
    return runs


def note(step: Row) -> str:
    """What a step's row adds, in a line: that it is the task shown, stalled, why it failed, the inputs it
    still waits for."""
    notes = []
    if step.get("current"):
        notes.append("this task")
    if step.get("stalled") is not None:
        notes.append(f"stalled: held by {step['stalled']}" if step["stalled"] else "stalled: nowhere")
    if step.get("error"):
        notes.append(step["error"])
    if step.get("waits") and step.get("status") == Status.WAITING:
        notes.append(f"waits for {step['waits']}")
    return "; ".join(notes)


def after_text(runs: List[Row]) -> str:
    """A step's "after" runs in a line: "1-3", "4 (failed)", "1-3 (ended)"."""
    return ", ".join((f"{run['from']}" if run["from"] == run["to"] else f"{run['from']}-{run['to']}") +
                     ("" if run["when"] == WHEN[When.SUCCESS] else f" ({run['when']})") for run in runs)
