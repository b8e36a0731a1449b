"""Tools: Python functions (`@tool`) and the tools of MCP servers reached through Dapr, run by a
`ToolExecutor` within their timeouts."""

from agora.sdk._mcp import McpServer
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
    "DEFAULT_TOOL_TIMEOUT_S",
    "McpServer",
    "Tool",
    "ToolCall",
    "ToolExecutor",
    "ToolResult",
    "ToolSource",
    "tool",
]
