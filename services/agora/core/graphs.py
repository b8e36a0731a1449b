"""A graph's shape, checked before it runs: named nodes, one entry, and for each node at most one
way out: a plain edge to the next node (or to the end), or a condition whose answer picks the
next node (or the end) from a table. A node with no way out ends the run.

`validate_graph` names every problem at once: edges from or to unknown nodes, a node with two
ways out, no entry or several, nodes the entry never reaches, and a cycle of plain edges (with
no condition in it nothing could ever leave it). A cycle through a condition is allowed (a
retry loop, a review loop); `DEFAULT_MAX_STEPS` bounds every run all the same.

Checks are linear in the graph's size: each node is visited a bounded number of times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agora.core.errors import AgoraError
from agora.core.limits import Name

__all__ = [
    "DEFAULT_MAX_STEPS",
    "MAX_GRAPH_NODES",
    "MAX_ROUTES_PER_CONDITION",
    "ConditionalEdge",
    "GraphRunFailed",
    "GraphShape",
    "InvalidGraph",
    "has_condition",
    "next_node",
    "validate_graph",
]

MAX_GRAPH_NODES = 200
MAX_ROUTES_PER_CONDITION = 50
DEFAULT_MAX_STEPS = 100
"""Nodes one run may execute (a loop through a condition included) before it fails."""


class InvalidGraph(AgoraError):
    """A graph that cannot run; `problems` names each reason."""

    code = "INVALID_GRAPH"
    http_status = 422

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("invalid graph: " + "; ".join(problems))
        self.problems = list(problems)

    @classmethod
    def from_message(cls, message: str, details: Mapping[str, JsonValue] | None = None) -> InvalidGraph:
        return cls(message.removeprefix("invalid graph: ").split("; "))


class GraphRunFailed(AgoraError):
    """A graph's run could not go on: a node raised, a condition answered a route its table
    lacks, or the run reached its step limit. The message names the node."""

    code = "GRAPH_RUN_FAILED"
    http_status = 422


class ConditionalEdge(BaseModel):
    """The way out of a node decided by a condition: its answer is looked up in `routes` (a
    route to None ends the run)."""

    model_config = ConfigDict(frozen=True)

    routes: dict[Name, Name | None] = Field(min_length=1, max_length=MAX_ROUTES_PER_CONDITION)


class GraphShape(BaseModel):
    """The nodes and edges of a graph, without their code."""

    model_config = ConfigDict(frozen=True)

    graph_id: Name
    nodes: list[Name] = Field(max_length=MAX_GRAPH_NODES)
    entries: list[Name] = Field(default_factory=list, max_length=MAX_GRAPH_NODES)
    edges: list[tuple[Name, Name | None]] = Field(default_factory=list, max_length=MAX_GRAPH_NODES * 2)
    """Plain edges (source, target); a target of None ends the run."""
    conditional: list[tuple[Name, ConditionalEdge]] = Field(
        default_factory=list, max_length=MAX_GRAPH_NODES * 2
    )

    @property
    def entry(self) -> str:
        return self.entries[0]


def validate_graph(shape: GraphShape) -> None:
    """Raise `InvalidGraph` naming every reason `shape` cannot run."""
    problems: list[str] = []
    known = set(shape.nodes)
    if not shape.nodes:
        problems.append("it has no nodes")
    seen: set[str] = set()
    for name in shape.nodes:
        if name in seen:
            problems.append(f"node {name!r} is added twice")
        seen.add(name)
    if len(shape.entries) != 1:
        problems.append(
            "it has no entry node (mark one with entry=True)"
            if not shape.entries
            else f"it has {len(shape.entries)} entry nodes ({', '.join(shape.entries)}), not one"
        )
    problems += [f"entry node {e!r} is not a node" for e in shape.entries if e not in known]

    ways_out: dict[str, int] = {}
    successors: dict[str, list[str]] = {name: [] for name in shape.nodes}
    plain_next: dict[str, str] = {}
    for source, target in shape.edges:
        ways_out[source] = ways_out.get(source, 0) + 1
        if source not in known:
            problems.append(f"edge {source} → {target or 'end'} leaves unknown node {source!r}")
        if target is not None and target not in known:
            problems.append(f"edge {source} → {target} goes to unknown node {target!r}")
        if source in known and target in known and target is not None:
            successors[source].append(target)
            plain_next[source] = target
    for source, condition in shape.conditional:
        ways_out[source] = ways_out.get(source, 0) + 1
        if source not in known:
            problems.append(f"the condition on unknown node {source!r}")
        for route, target in condition.routes.items():
            if target is not None and target not in known:
                problems.append(f"route {route!r} of {source}'s condition goes to unknown node {target!r}")
            elif target is not None and source in known:
                successors[source].append(target)
    problems += [
        f"node {name!r} has {count} ways out (at most one: an edge or a condition)"
        for name, count in ways_out.items()
        if count > 1 and name in known
    ]
    if len(shape.entries) == 1 and shape.entry in known:
        reached = _reachable(shape.entry, successors)
        unreached = [name for name in shape.nodes if name not in reached]
        if unreached:
            problems.append(f"the entry {shape.entry!r} never reaches {', '.join(unreached)}")
    problems += [
        f"the cycle {' → '.join(cycle)} has no condition: a run would never leave it"
        for cycle in _plain_cycles(shape.nodes, plain_next)
    ]
    if problems:
        raise InvalidGraph(problems)


def next_node(shape: GraphShape, node: str, route: str | None = None) -> str | None:
    """The node after `node`: its plain edge's target, or, for a node with a condition, the
    target of the condition's `route` (None: the run ends). A route the table lacks is
    `GraphRunFailed`."""
    for source, condition in shape.conditional:
        if source == node:
            if route not in condition.routes:
                known = ", ".join(sorted(condition.routes))
                raise GraphRunFailed(
                    f"the condition of node {node!r} answered {route!r}; its routes are {known}"
                )
            return condition.routes[route]
    return next((target for source, target in shape.edges if source == node), None)


def has_condition(shape: GraphShape, node: str) -> bool:
    return any(source == node for source, _ in shape.conditional)


def _reachable(entry: str, successors: Mapping[str, Sequence[str]]) -> set[str]:
    reached, frontier = {entry}, [entry]
    while frontier:
        for target in successors.get(frontier.pop(), []):
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    return reached


def _plain_cycles(nodes: Sequence[str], plain_next: Mapping[str, str]) -> list[list[str]]:
    """Cycles made of plain edges only. Each node has at most one plain edge out (two are
    reported as a problem of their own; the last one counts here), so following them from
    each node not yet walked finds every such cycle once, visiting each node once."""
    walked: set[str] = set()
    cycles: list[list[str]] = []
    for start in nodes:
        path: list[str] = []
        on_path: dict[str, int] = {}
        node: str | None = start
        while node is not None and node not in walked:
            walked.add(node)
            on_path[node] = len(path)
            path.append(node)
            node = plain_next.get(node)
        if node is not None and node in on_path:
            cycles.append([*path[on_path[node] :], node])
    return cycles
