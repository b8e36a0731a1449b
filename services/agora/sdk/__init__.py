"""Agora's agent SDK: an agent in a few lines, runnable here and servable on the market.

    from agora.sdk import Agent, tool

    @tool
    def add(a: float, b: float) -> float:
        \"\"\"Add two numbers.\"\"\"
        return a + b

    agent = Agent("calc", instructions="Compute exactly; use the tools.", tools=[add], skills=["arithmetic"])
    print(agent.run_sync("What is 2 + 3?").output)

An agents file (`agents = [agent]`) runs on the market with `agora-agent run my_agents.py`
(`make run AGENTS=my_agents.py`): the agent bids for tasks that need its skills and runs each
one it wins. This module holds what that path needs; the rest is in submodules:
`agora.sdk.runner` (the ReAct runner, its extension points and a run's events, as
`Agent.stream` gives them), `agora.sdk.tools`, `agora.sdk.models` (routing and costs),
`agora.sdk.crews`, `agora.sdk.graphs`, `agora.sdk.app` (serving agents), `agora.sdk.errors`,
`agora.sdk.testing` (a scripted model and in-memory parts for tests) and
`agora.sdk.dapr_agents`. See docs/sdk-tutorial.md and docs/sdk.md.
"""

from agora.core.errors import (
    AgoraError,
    BudgetExceeded,
    CrewMemberFailed,
    MarketAllocationFailed,
    MaxIterationsExceeded,
)
from agora.core.graphs import GraphRunFailed
from agora.core.models import ModelTier
from agora.sdk._a2a import A2AAgent
from agora.sdk._agent import Agent
from agora.sdk._app import serve_agents
from agora.sdk._crew import Crew, CrewMember, CrewPattern, MarketCrew
from agora.sdk._graph import (
    Graph,
    GraphState,
    debate_node,
    human_node,
    llm_node,
    market_node,
    planning_node,
    tool_node,
)
from agora.sdk._mcp import McpServer
from agora.sdk._router import ModelRouter, ModelSpec
from agora.sdk._runner import ExecutionResult, RunStatus
from agora.sdk._tools import Tool, tool

__all__ = [  # noqa: RUF022 (grouped by use, not sorted)
    # An agent: a model, instructions, tools, the skills it offers and its price
    "Agent",
    "ExecutionResult",
    "RunStatus",
    "Tool",
    "tool",
    "McpServer",
    # Models: several behind one router, each step on the tier it needs
    "ModelRouter",
    "ModelSpec",
    "ModelTier",
    # Teams: a crew of agents, or a crew that puts its task on the market
    "Crew",
    "CrewMember",
    "CrewPattern",
    "MarketCrew",
    # Graphs: steps on a typed state; the market, plans, debates and people as steps
    "Graph",
    "GraphState",
    "debate_node",
    "human_node",
    "llm_node",
    "market_node",
    "planning_node",
    "tool_node",
    # On the market: this process's agents, and A2A agents of any framework
    "serve_agents",
    "A2AAgent",
    # Errors (every one an AgoraError with a code)
    "AgoraError",
    "BudgetExceeded",
    "CrewMemberFailed",
    "GraphRunFailed",
    "MarketAllocationFailed",
    "MaxIterationsExceeded",
]
