"""Graphs: nodes are steps on a typed state, edges and conditions say what runs next; the
market, the planner, the debate service and people are nodes like any other. Served by an
agent app, each run is a durable workflow."""

from agora.core.graphs import GraphRunFailed, InvalidGraph
from agora.sdk._graph import (
    CompiledGraph,
    DebateNode,
    Graph,
    GraphRun,
    GraphState,
    GraphStatus,
    MarketNode,
    MarketResult,
    PlanningNode,
    asked_for_a_tool,
    debate_node,
    guard_route,
    human_node,
    llm_node,
    market_node,
    planning_node,
    tool_node,
    uncertainty_guard_node,
)

__all__ = [
    "CompiledGraph",
    "DebateNode",
    "Graph",
    "GraphRun",
    "GraphRunFailed",
    "GraphState",
    "GraphStatus",
    "InvalidGraph",
    "MarketNode",
    "MarketResult",
    "PlanningNode",
    "asked_for_a_tool",
    "debate_node",
    "guard_route",
    "human_node",
    "llm_node",
    "market_node",
    "planning_node",
    "tool_node",
    "uncertainty_guard_node",
]
