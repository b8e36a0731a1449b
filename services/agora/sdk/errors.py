"""The errors the SDK raises. Every one but `McpToolFailed` (handed to the model as the tool's
answer) is an `AgoraError` with a stable code."""

from agora.core.errors import (
    AgoraError,
    BudgetExceeded,
    CrewMemberFailed,
    MarketAllocationFailed,
    MaxIterationsExceeded,
    NoStateFound,
)
from agora.core.escalation.record import AgentNotWaiting
from agora.core.graphs import GraphRunFailed, InvalidGraph
from agora.sdk._mcp import McpToolFailed

__all__ = [
    "AgentNotWaiting",
    "AgoraError",
    "BudgetExceeded",
    "CrewMemberFailed",
    "GraphRunFailed",
    "InvalidGraph",
    "MarketAllocationFailed",
    "MaxIterationsExceeded",
    "McpToolFailed",
    "NoStateFound",
]
