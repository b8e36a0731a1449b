"""Agora's agent SDK: bring your own agents to the market.

An agent is a capability profile plus a runner: an `AgentRunner` (the ReAct loop over a
`ModelRouter`, with `Tool`s run by a `ToolExecutor`, costs tracked by a `CostTracker`) or a
handler function of your own. This package is the public API; everything else under
`agora.sdk` is private. Tools may also come from MCP servers reached through Dapr
(`McpServer.app(app_id)`, `McpServer.resource(name)`). See docs/sdk.md.

    from agora.sdk import AgentDefinition, AgentRunner, ToolExecutor, tool

    @tool
    def add(a: float, b: float) -> float:
        \"\"\"Add two numbers.\"\"\"
        return a + b

    runner = AgentRunner(model, ToolExecutor([add]))
    result = await runner.run(AgentDefinition(name="calc"), "What is 2 + 3?", session_id="s-1")
"""

from agora.core.errors import AgoraError as OrchestrationError
from agora.core.errors import (
    BudgetExceededError,
    CrewMemberFailed,
    MarketAllocationError,
    MaxIterationsExceeded,
    NoStateFound,
)
from agora.core.escalation.record import AgentNotWaiting
from agora.core.graphs import GraphRunFailed, InvalidGraph
from agora.sdk._app import Agent, AgentAppSettings, AgentLoad, HandlerResult, load_agents, serve_agents
from agora.sdk._cost import CostSummary, CostTracker, EventPublisher, StepCost
from agora.sdk._crew import (
    Crew,
    CrewMember,
    CrewPattern,
    CrewResult,
    DaprMarket,
    MarketCrew,
    MarketCrewResult,
)
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
    conditional_node,
    debate_node,
    guard_route,
    human_node,
    llm_node,
    market_node,
    planning_node,
    tool_node,
    uncertainty_guard_node,
)
from agora.sdk._learning import InMemoryOutcomeHistory, OutcomeHistory
from agora.sdk._mcp import McpServer, McpToolError
from agora.sdk._recovery import RecoveryPolicy
from agora.sdk._router import (
    DEFAULT_FALLBACK_CHAIN,
    ModelRouter,
    ModelSpec,
    ModelTier,
    RoutedCompletion,
    RoutingRule,
)
from agora.sdk._runner import (
    AgentDefinition,
    AgentRunner,
    AgentState,
    AgentStateStore,
    Escalator,
    ExecutionResult,
    InMemoryStateStore,
    MemoryManager,
    ReactStep,
    RunnerConfig,
    RunStatus,
    StepCheck,
    StepMonitor,
)
from agora.sdk._tools import (
    DEFAULT_TOOL_TIMEOUT_S,
    Tool,
    ToolCall,
    ToolExecutor,
    ToolResult,
    ToolSource,
    tool,
)

__all__ = [
    "DEFAULT_FALLBACK_CHAIN",
    "DEFAULT_TOOL_TIMEOUT_S",
    "Agent",
    "AgentAppSettings",
    "AgentDefinition",
    "AgentLoad",
    "AgentNotWaiting",
    "AgentRunner",
    "AgentState",
    "AgentStateStore",
    "BudgetExceededError",
    "CompiledGraph",
    "CostSummary",
    "CostTracker",
    "Crew",
    "CrewMember",
    "CrewMemberFailed",
    "CrewPattern",
    "CrewResult",
    "DaprMarket",
    "DebateNode",
    "Escalator",
    "EventPublisher",
    "ExecutionResult",
    "Graph",
    "GraphRun",
    "GraphRunFailed",
    "GraphState",
    "GraphStatus",
    "HandlerResult",
    "InMemoryOutcomeHistory",
    "InMemoryStateStore",
    "InvalidGraph",
    "MarketAllocationError",
    "MarketCrew",
    "MarketCrewResult",
    "MarketNode",
    "MarketResult",
    "MaxIterationsExceeded",
    "McpServer",
    "McpToolError",
    "MemoryManager",
    "ModelRouter",
    "ModelSpec",
    "ModelTier",
    "NoStateFound",
    "OrchestrationError",
    "OutcomeHistory",
    "PlanningNode",
    "ReactStep",
    "RecoveryPolicy",
    "RoutedCompletion",
    "RoutingRule",
    "RunStatus",
    "RunnerConfig",
    "StepCheck",
    "StepCost",
    "StepMonitor",
    "Tool",
    "ToolCall",
    "ToolExecutor",
    "ToolResult",
    "ToolSource",
    "asked_for_a_tool",
    "conditional_node",
    "debate_node",
    "guard_route",
    "human_node",
    "llm_node",
    "load_agents",
    "market_node",
    "planning_node",
    "serve_agents",
    "tool",
    "tool_node",
    "uncertainty_guard_node",
]
