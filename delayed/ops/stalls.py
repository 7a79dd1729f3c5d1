"""Workflows stalled behind a step that a worker which does not track tasks took, for `delayed stats`,
the dashboard and a workflow's own view.

A stock go-delayed worker (or keakon/delayed 1.x's) runs a workflow's GoTask step as any task: its
dequeue pops the blob from the queue and HSETs it into `<queue>_processing` under the worker's own
id, and it never writes the step's record, which keeps saying the step waits. Nothing then reports
the step's end, so the steps after it wait and the workflow never ends. Such a step shows as a
waiting record whose blob a worker holds, or, once that worker took another task, whose blob is
nowhere: in neither its queue, its scheduled set nor any processing entry (see
lua/stalled_steps.lua, which looks at a queue's workflows in one script call).

Every look is bounded, and says when it stopped short: `delayed stats` and the dashboard read the
status of at most FLOW_LIMIT workflows of the queues they show (found with a SCAN, which stops
there), look at the first STEP_LIMIT steps of each running or failed one and STEP_BUDGET steps in
all, through the first DEPTH tasks of each queue and entries of its processing hash; a workflow's
own view looks at its first VIEW_STEP_LIMIT steps."""
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import redis

from ..protocol import flow_reads
from ..wire.flow import FlowStatus, step_of
from ..wire.keys import FLOW_INFIX

FLOW_LIMIT = 1000
"""Workflows whose status a look of the queues reads at most."""
STEP_LIMIT = 1000
"""Steps of one workflow a look of the queues looks at, in the workflow's order."""
STEP_BUDGET = 10_000
"""Steps a look of the queues looks at in all."""
VIEW_STEP_LIMIT = 10_000
"""Steps a workflow's own view looks at."""
DEPTH = 10_000
"""Tasks of a queue, and entries of its processing hash, looked through for a waiting step's blob: a
step in a longer one counts as unchecked."""
LOOKED = (FlowStatus.RUNNING, FlowStatus.FAILED)
"""The workflows whose steps may still wait: the only ones looked at."""


def look(conn: redis.Redis, flow_key: str, status: str) -> flow_reads.StallLook:
    """The stalled steps of the workflow flow_key (status: its status as read), among its first
    VIEW_STEP_LIMIT steps; nothing is looked at in a workflow that ended."""
    if status not in LOOKED:
        return flow_reads.StallLook(status, 0, 0, [])
    return flow_reads.stalled_steps(conn, [flow_key], VIEW_STEP_LIMIT, VIEW_STEP_LIMIT, DEPTH)[0]


@dataclass(frozen=True)
class Scan:
    """What a look of the queues found: per queue (the one each workflow was enqueued on), its stalled
    steps (rows: workflow, step, step_queue, func, status, worker: the id of the worker holding it,
    None if it is nowhere) and how many of its workflows were read; the steps looked at, those that
    could not be told (in a queue or processing hash longer than DEPTH), and whether the look covered
    every workflow of those queues and every step of each (no bound cut it short, nothing unchecked)."""

    stalled: Dict[str, List[Dict[str, Optional[str]]]]
    workflows: Dict[str, int]
    steps: int
    unchecked: int
    complete: bool

    def checked(self, queue: str) -> Dict[str, object]:
        """What a stats row of queue says of the look ("workflows_checked")."""
        return {"workflows": self.workflows.get(queue, 0), "steps": self.steps, "unchecked": self.unchecked,
                "complete": self.complete}


def scan(conn: redis.Redis, names: Sequence[str]) -> Scan:
    """The stalled steps of the workflows enqueued on these queues, within the bounds (see the module):
    nothing for queues whose counts say no workflow was ever enqueued on them; else one SCAN, stopping
    at FLOW_LIMIT workflows of these queues; their statuses, CHUNK a round trip; and a
    script call per queue for the running or failed ones of each chunk."""
    stalled: Dict[str, List[Dict[str, Optional[str]]]] = {name: [] for name in names}
    wanted = set(flow_reads.with_workflows(conn, names))
    if not wanted:  # no workflow was ever enqueued on them: no SCAN of the whole database
        return Scan(stalled, {}, 0, 0, True)
    workflows: Dict[str, int] = {}
    steps = unchecked = 0
    complete = True
    batch: List[str] = []

    def looked_at(keys: List[str]) -> None:
        nonlocal steps, unchecked, complete
        running: Dict[str, List[Tuple[str, int]]] = {}
        for key, (status, total) in zip(keys, flow_reads.workflow_states(conn, keys)):
            if status in LOOKED:
                running.setdefault(key.rpartition(FLOW_INFIX)[0], []).append((key, total))
        for queue, found in running.items():
            looks = flow_reads.stalled_steps(conn, [key for key, _ in found], STEP_LIMIT, STEP_BUDGET - steps, DEPTH)
            for (key, total), seen in zip(found, looks):
                steps, unchecked = steps + seen.looked, unchecked + seen.unchecked
                complete = complete and seen.looked >= total and not seen.unchecked
                for step in seen.stalled:
                    step_queue, step_id = step_of(step.record)
                    stalled[queue].append({"workflow": key.rpartition(FLOW_INFIX)[2], "step": step_id,
                                           "step_queue": step_queue, "func": step.func, "status": step.status,
                                           "worker": step.worker})

    for key in flow_reads.workflow_keys(conn):
        queue = key.rpartition(FLOW_INFIX)[0]
        if queue not in wanted:
            continue
        if sum(workflows.values()) >= FLOW_LIMIT:
            complete = False
            break
        workflows[queue] = workflows.get(queue, 0) + 1
        batch.append(key)
        if len(batch) >= flow_reads.CHUNK:
            looked_at(batch)
            batch = []
    looked_at(batch)
    return Scan(stalled, workflows, steps, unchecked, complete)


def warning(queue: str, row: Dict[str, Optional[str]]) -> str:
    """A stalled step (a row of Scan.stalled) in one line: what happened, and what to do."""
    where = (f"held by worker {row['worker']}, which does not track tasks" if row["worker"] else
             "in neither its queue, its scheduled set nor any worker's hands: a worker that does not track tasks "
             "took it, and has taken another task since")
    return (f"queue {queue!r}: workflow {row['workflow']} is stalled: its step {row['step']} ({row['func']}) still "
            f"says {row['status']}, but is {where} (a stock go-delayed worker?); nothing will report the step's end, "
            f"so the steps after it wait: run workflows' steps on workers of ours (Python, or the Go module's)")


def bounds(found: Scan) -> str:
    """What a look that stopped short left out, in one line ('' for a complete one)."""
    if found.complete:
        return ""
    return (f"the look for stalled workflows stopped short: it reads at most {FLOW_LIMIT} workflows, "
            f"{STEP_LIMIT} steps of each and {STEP_BUDGET} in all, and looks through {DEPTH} tasks of a queue "
            f"({found.steps} steps looked at, {found.unchecked} in a longer queue unchecked): "
            "delayed task WORKFLOW_ID looks at one workflow further")
