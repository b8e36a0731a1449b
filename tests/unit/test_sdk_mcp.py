"""Tools from MCP servers: an MCP server's tools become SDK tools (name, description, input
schema), run by the executor like local ones, with the server's errors, bad arguments and
timeouts reaching the model as the call's error. The server runs in process (the `mcp`
package's memory transport); Dapr's paths are covered by tests/integration/test_mcp_tools.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import ClientSession
from mcp import types as mcp_types
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

from agora.sdk import McpServer, Tool, tool
from agora.sdk._mcp import MAX_MCP_SCHEMA_CHARS, _call_instance_id, durable_call_scope, mcp_tool, result_text
from agora.sdk.errors import McpToolFailed
from agora.sdk.tools import ToolCall, ToolExecutor

server = FastMCP("unit-tools")


@server.tool()
def add(a: float, b: float = 1.0) -> float:
    """Add two numbers."""
    return a + b


@server.tool(name="shout-out")
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


@server.tool()
def refuse(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"refused: {reason}")


@server.tool()
async def dawdle(seconds: float) -> str:
    """Take its time."""
    await asyncio.sleep(seconds)
    return "done"


@asynccontextmanager
async def connected() -> AsyncIterator[ClientSession]:
    """A session to the in-process server (opened and closed in the test's own task: the
    `mcp` package's task groups must end where they began)."""
    async with create_connected_server_and_client_session(server) as session:
        yield session


async def executor_for(session: ClientSession, *, prefix: str = "", timeout_s: float = 5.0) -> ToolExecutor:
    listed = await session.list_tools()

    async def call(name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        return await session.call_tool(name, arguments)

    return ToolExecutor([mcp_tool(t, call, prefix=prefix, timeout_s=timeout_s) for t in listed.tools])


async def test_an_mcp_tool_becomes_a_tool_with_the_server_s_name_description_and_schema() -> None:
    async with connected() as session:
        executor = await executor_for(session)
        by_name = {t.name: t for t in executor.tools}

        assert set(by_name) == {"add", "shout-out", "refuse", "dawdle"}
        assert by_name["add"].description == "Add two numbers."
        schema = by_name["add"].parameters
        assert schema["type"] == "object" and schema["required"] == ["a"] and "title" not in schema
        assert schema["properties"]["b"]["default"] == 1.0
        assert "shout-out: Say it louder." in executor.catalogue()


async def test_an_mcp_tool_runs_like_a_local_one() -> None:
    async with connected() as session:
        executor = await executor_for(session)

        added = await executor.execute(ToolCall(name="add", arguments={"a": 2, "b": 3}))
        shouted = await executor.execute(ToolCall(name="shout-out", arguments={"text": "hi"}))

        assert added.ok and added.output == "5.0"
        assert shouted.ok and shouted.output == "HI"


async def test_a_tool_s_error_on_the_server_reaches_the_model_and_the_run_goes_on() -> None:
    async with connected() as session:
        executor = await executor_for(session)

        result = await executor.execute(ToolCall(name="refuse", arguments={"reason": "no"}))

        assert not result.ok and result.error is not None
        assert result.error.startswith("McpToolFailed:") and "refused: no" in result.error
        assert result.for_model().startswith("error: McpToolFailed:")


async def test_arguments_that_do_not_match_the_schema_are_refused_before_the_server_is_called() -> None:
    async with connected() as session:
        calls: list[str] = []
        listed = await session.list_tools()

        async def call(name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
            calls.append(name)
            return await session.call_tool(name, arguments)

        executor = ToolExecutor([mcp_tool(t, call) for t in listed.tools])
        missing = await executor.execute(ToolCall(name="add", arguments={"b": 2}))
        wrong = await executor.execute(ToolCall(name="add", arguments={"a": "two"}))

        assert missing.error is not None and missing.error.startswith("InvalidArguments:")
        assert "'a' is a required property" in missing.error
        assert wrong.error is not None and "a: 'two' is not of type 'number'" in wrong.error
        assert calls == []


async def test_a_slow_mcp_tool_times_out_as_the_call_s_error() -> None:
    async with connected() as session:
        executor = await executor_for(session, timeout_s=0.2)

        result = await executor.execute(ToolCall(name="dawdle", arguments={"seconds": 2}))

        assert result.error == "Timeout: dawdle did not finish within 0.2 s"


async def test_a_prefix_keeps_two_servers_tools_apart() -> None:
    async with connected() as session:
        executor = await executor_for(session, prefix="calc.")

        assert "calc.add" in {t.name for t in executor.tools}
        assert (await executor.execute(ToolCall(name="calc.add", arguments={"a": 1}))).output == "2.0"


def test_a_tool_result_reads_as_text_and_an_error_result_raises() -> None:
    text = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="a"), mcp_types.TextContent(type="text", text="b")]
    )
    structured = mcp_types.CallToolResult(content=[], structuredContent={"n": 3})
    failed = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="boom")], isError=True)

    assert result_text(text) == "a\nb"
    assert result_text(structured) == '{"n": 3}'
    with pytest.raises(McpToolFailed, match="boom"):
        result_text(failed)


def test_a_tool_the_sdk_cannot_offer_the_model_is_refused_when_listed() -> None:
    async def call(name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        raise AssertionError("not called")

    def definition(name: str, schema: dict[str, Any]) -> mcp_types.Tool:
        return mcp_types.Tool(name=name, description="d", inputSchema=schema)

    with pytest.raises(ValueError, match="MCP tool name"):
        mcp_tool(definition("has space", {"type": "object"}), call)
    with pytest.raises(ValueError, match="not a JSON Schema"):
        mcp_tool(definition("ok", {"type": "no-such-type"}), call)
    huge = {"type": "object", "description": "x" * MAX_MCP_SCHEMA_CHARS}
    with pytest.raises(ValueError, match="input schema of"):
        mcp_tool(definition("big", huge), call)


def test_a_server_spec_is_checked_when_declared() -> None:
    assert McpServer.app("search").via == "app" and McpServer.resource("weather").via == "resource"
    with pytest.raises(ValueError):
        McpServer.app("bad id")
    with pytest.raises(ValueError):
        McpServer.resource("ok", timeout_s=0)
    with pytest.raises(ValueError, match=r"no '\.'"):
        McpServer.resource("team.payments")


class Listed:
    """A tool source with fixed tools (an MCP server stands behind the real ones)."""

    def __init__(self, *tools: Tool, fail: int = 0) -> None:
        self.tools = list(tools)
        self.fail = fail
        self.loads = 0

    def describe(self) -> str:
        return "listed tools"

    async def load_tools(self, dapr_http_endpoint: str) -> list[Tool]:
        self.loads += 1
        if self.loads <= self.fail:
            raise McpToolFailed("not up yet")
        return self.tools


@tool
def local(x: int) -> int:
    """A local tool."""
    return x


async def test_an_executor_adds_its_sources_tools_on_connect_once_even_after_a_failure() -> None:
    @tool(name="remote")
    def remote(x: int) -> int:
        """A listed tool."""
        return x * 2

    source = Listed(remote, fail=1)
    executor = ToolExecutor([local, source])
    assert [t.name for t in executor.tools] == ["local"] and executor.sources == [source]

    with pytest.raises(McpToolFailed):
        await executor.connect("http://127.0.0.1:1")
    assert [t.name for t in executor.tools] == ["local"]
    await executor.connect("http://127.0.0.1:1")
    await executor.connect("http://127.0.0.1:1")

    assert [t.name for t in executor.tools] == ["local", "remote"] and source.loads == 2
    assert (await executor.execute(ToolCall(name="remote", arguments={"x": 4}))).output == "8"


async def test_two_tools_of_one_name_from_sources_are_refused() -> None:
    executor = ToolExecutor([local, Listed(local)])

    with pytest.raises(ValueError, match="two tools are named local"):
        await executor.connect("http://127.0.0.1:1")


def test_a_resource_call_s_workflow_id_is_the_same_on_each_attempt_of_a_run() -> None:
    def attempt() -> list[str]:
        with durable_call_scope("run.task/1"):
            return [
                _call_instance_id("tools", "stamp", {"label": "a"}),
                _call_instance_id("tools", "stamp", {"label": "a"}),
                _call_instance_id("tools", "stamp", {"label": "b"}),
            ]

    first, again = attempt(), attempt()

    assert first == again and len(set(first)) == 3
    assert first[0].startswith("run_task_1_mcp_1_")
    assert _call_instance_id("tools", "stamp", {}) != _call_instance_id("tools", "stamp", {})
