"""A workflow's steps as a small graph, as SVG geometry the template draws (no script: the CSP allows
none): a column per depth (a step stands one column right of the deepest step it waits on), a node
per step coloured by its state and linking to its page, an edge per `next` entry (solid: once the
step before succeeded; dashed: once it failed; dotted: once it ended, either way).

A large workflow collapses, so the graph stays small whatever its size: a column of more than
MAX_PER_COLUMN steps (a group's members) is one node with the count of its steps per status, and
with more than MAX_COLUMNS columns (a long chain), those in the middle are one such node."""
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from ..flows import WHEN, WorkflowView

MAX_PER_COLUMN = 8
MAX_COLUMNS = 7
NODE_WIDTH, NODE_HEIGHT, LINE = 170, 38, 13
"""A node's width and height (an aggregate adds a LINE per status it counts), in px."""
GAP_X, GAP_Y, MARGIN = 44, 12, 8
LABEL = 22
"""Characters of a function's name a node shows (its title, on hover, has all)."""


@dataclass
class Node:
    """A node: one step (its place from 1, task id, function, status; current: the page's own step;
    stalled: a worker that does not track tasks took it), or an aggregate of several (steps: how many,
    counts: per status, most first; stalled: one of them is). Its box, once placed."""

    steps: int
    status: str
    counts: List[Tuple[str, int]] = field(default_factory=list)
    place: Optional[int] = None
    task_id: Optional[str] = None
    func: str = ""
    current: bool = False
    stalled: bool = False
    x: float = 0
    y: float = 0
    height: float = NODE_HEIGHT

    @property
    def width(self) -> float:
        return NODE_WIDTH

    @property
    def label(self) -> str:
        return self.func if len(self.func) <= LABEL else self.func[:LABEL - 1] + "…"


@dataclass(frozen=True)
class Edge:
    """An edge between two placed nodes, as an SVG path, and what its successor waits for (WHEN's words)."""

    path: str
    when: str


@dataclass(frozen=True)
class Graph:
    """The placed nodes and edges, the SVG's size, and how many steps a column shows before it collapses."""

    nodes: List[Node]
    edges: List[Edge]
    width: float
    height: float
    per_column: int = MAX_PER_COLUMN


def depths(after: Sequence[Sequence[Tuple[int, object]]]) -> List[int]:
    """Each step's column: 0 for a step that waits on no step of the workflow, else one more than the
    deepest it waits on (the steps come in an order where each follows those it waits on)."""
    found: List[int] = []
    for i, before in enumerate(after):
        found.append(max((found[p] + 1 for p, _ in before if p < i), default=0))
    return found


def layout(shown: WorkflowView) -> Graph:
    """The graph of the steps a view read."""
    steps = shown.steps
    columns: Dict[int, List[int]] = {}
    for i, depth in enumerate(depths(steps.after)):
        columns.setdefault(depth, []).append(i)
    ordered = [(columns[depth], len(columns[depth]) > MAX_PER_COLUMN) for depth in sorted(columns)]
    if len(ordered) > MAX_COLUMNS:  # (indexes, whether they make one node)
        head = (MAX_COLUMNS - 1) // 2
        tail = MAX_COLUMNS - 1 - head
        middle = [i for column, _ in ordered[head:len(ordered) - tail] for i in column]
        ordered = ordered[:head] + [(middle, True)] + ordered[len(ordered) - tail:]
    nodes: List[Node] = []
    node_of: List[int] = [0] * len(steps.keys)
    placed: List[List[Node]] = []
    for column, collapsed in ordered:
        if collapsed:
            counts = Counter(steps.statuses[i] for i in column).most_common()
            group = [Node(len(column), counts[0][0], counts, stalled=any(i in shown.stalled for i in column),
                          height=NODE_HEIGHT + LINE * (len(counts) - 1))]
        else:
            group = [Node(1, steps.statuses[i], place=i + 1, task_id=shown.info.steps[i][1], func=steps.funcs[i],
                          current=i == shown.current, stalled=i in shown.stalled) for i in column]
        for k, i in enumerate(column):
            node_of[i] = len(nodes) + (0 if collapsed else k)
        nodes += group
        placed.append(group)
    width, height = _place(placed)
    edges: Dict[Tuple[int, int, str], None] = {}
    for i, before in enumerate(steps.after):
        for p, when in before:
            if node_of[p] != node_of[i]:
                edges[(node_of[p], node_of[i], WHEN[when])] = None
    return Graph(nodes, [Edge(_path(nodes[a], nodes[b]), when) for a, b, when in edges], width, height)


def _place(columns: List[List[Node]]) -> Tuple[float, float]:
    """Each node's box: columns left to right, each column's nodes top to bottom, centred; the size."""
    heights = [sum(node.height for node in column) + GAP_Y * (len(column) - 1) for column in columns]
    tallest = max(heights, default=0)
    for c, (column, height) in enumerate(zip(columns, heights)):
        y = MARGIN + (tallest - height) / 2
        for node in column:
            node.x, node.y = MARGIN + c * (NODE_WIDTH + GAP_X), y
            y += node.height + GAP_Y
    return 2 * MARGIN + len(columns) * NODE_WIDTH + max(len(columns) - 1, 0) * GAP_X, 2 * MARGIN + tallest


def _path(start: Node, end: Node) -> str:
    """A curve from the middle of start's right side to the middle of end's left side."""
    x1, y1 = start.x + NODE_WIDTH, start.y + start.height / 2
    x2, y2 = end.x - 4, end.y + end.height / 2  # room for the arrowhead
    bend = max((x2 - x1) / 2, 10)
    return f"M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
