"""Tools from MCP (Model Context Protocol) servers, by Dapr's two paths.

- `McpServer.app(app_id)`: an MCP server that is a Dapr app, reached by service invocation
  through the agent's own sidecar: MCP's streamable HTTP transport at
  `<sidecar>/v1.0/invoke/<app_id>/method/mcp` (mTLS, access policies, resiliency and tracing
  of every other call between apps). Each call opens an MCP session, calls, and ends it.
- `McpServer.resource(name)`: an `MCPServer` resource loaded by the agent's own daprd (Dapr
  1.18). Each call is the durable workflow `dapr.internal.mcp.<name>.CallTool.<tool>` that
  daprd runs itself; inside an agent app's run the workflow's instance id is fixed by the run,
  the call's position and its arguments, so a run that resumes after its app was killed picks
  up the call it had started (or its result) instead of calling the tool again.

Either way the server's tools become `Tool`s (name, description, input schema) that a
`ToolExecutor` runs like local ones: arguments are checked against the tool's schema, each call
has its timeout, and a tool's error (`isError`, a failed workflow, an unreachable server) comes
back to the model as the call's error.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal
from urllib.parse import quote

import httpx
import jsonschema  # type: ignore[import-untyped]
from mcp import ClientSession
from mcp import types as mcp_types
from mcp.client.streamable_http import streamablehttp_client
from pydantic import BaseModel, ConfigDict, Field

from agora.core.limits import MAX_NOTE_CHARS
from agora.sdk._tools import DEFAULT_TOOL_TIMEOUT_S, MAX_TOOL_NAME_CHARS, Tool

__all__ = [
    "MAX_MCP_SCHEMA_CHARS",
    "MAX_MCP_TOOLS",
    "McpServer",
    "McpTool",
    "McpToolFailed",
    "durable_call_scope",
    "mcp_tool",
    "result_text",
]

MAX_MCP_TOOLS = 128
"""Tools taken from one server; a server offering more is refused (name the ones you want)."""
MAX_MCP_SCHEMA_CHARS = 16_384
"""A tool's input schema, as JSON; a larger one is refused (the model reads it every step)."""
MAX_MCP_DESCRIPTION_CHARS = MAX_NOTE_CHARS
"""A tool's description is cut to this length."""
MAX_LIST_PAGES = 16
"""Pages of a server's tool list read before giving up on its cursor."""
MCP_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
"""An MCP tool name as the SDK accepts it (MCP's recommended characters, at most 64)."""
WORKFLOW_POLL_S = (0.1, 1.0)
"""First and longest wait between looks at a tool call's workflow."""
STATE_READ_ATTEMPTS = 30
"""Times a workflow's state is asked for when the sidecar answers with an error."""

CallFunction = Callable[[str, dict[str, Any]], Awaitable[mcp_types.CallToolResult]]


class McpToolFailed(Exception):
    """An MCP tool's call ended in an error (the tool's `isError` result, its workflow failed,
    or its server could not be reached); the executor hands its message to the model."""


class InvalidArguments(Exception):
    """Arguments that do not match an MCP tool's input schema (the same name as the executor's
    error for a local tool's arguments)."""


@dataclass(frozen=True)
class McpServer:
    """Where some of an agent's tools come from: an MCP server reached through Dapr.

    Give it to a `ToolExecutor` among the tools (`ToolExecutor([add, McpServer.app("search")])`);
    an agent app lists the server's tools when it starts (`ToolExecutor.connect`)."""

    name: str
    """The MCP server's Dapr app id (`via="app"`) or the `MCPServer` resource's name."""
    via: Literal["app", "resource"]
    method: str = "mcp"
    """The app's method serving MCP's streamable HTTP transport (`via="app"` only)."""
    prefix: str = ""
    """Put before each tool's name (for two servers with a tool of the same name)."""
    timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    """Each tool call's timeout (the executor gives up waiting; a resource's workflow goes on)."""
    only: frozenset[str] | None = None
    """The server's tools to take (all of them when None)."""

    @classmethod
    def app(
        cls,
        app_id: str,
        *,
        method: str = "mcp",
        prefix: str = "",
        timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
        only: set[str] | frozenset[str] | None = None,
    ) -> McpServer:
        """An MCP server that is a Dapr app, called through this app's sidecar."""
        return cls(app_id, "app", method, prefix, timeout_s, frozenset(only) if only is not None else None)

    @classmethod
    def resource(
        cls,
        name: str,
        *,
        prefix: str = "",
        timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
        only: set[str] | frozenset[str] | None = None,
    ) -> McpServer:
        """An `MCPServer` resource of this app's daprd: each call a durable Dapr workflow."""
        return cls(name, "resource", "mcp", prefix, timeout_s, frozenset(only) if only is not None else None)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", self.name):
            raise ValueError(f"MCP server name {self.name!r}: letters, digits, '_', '.', '-' (at most 63)")
        if self.via == "resource" and "." in self.name:
            # daprd splits its workflow names (`dapr.internal.mcp.<server>.CallTool.<tool>`) at dots
            raise ValueError(
                f"MCPServer resource name {self.name!r}: no '.' (daprd's workflow names split at it)"
            )
        if self.timeout_s <= 0:
            raise ValueError("an MCP server's timeout must be positive")
        if self.prefix and not re.fullmatch(r"[A-Za-z0-9_.-]{1,32}", self.prefix):
            raise ValueError(f"tool prefix {self.prefix!r}: at most 32 letters, digits, '_', '.', '-'")

    def describe(self) -> str:
        return f"MCP server {self.name} ({'Dapr app' if self.via == 'app' else 'MCPServer resource'})"

    async def load_tools(self, dapr_http_endpoint: str) -> list[Tool]:
        """List the server's tools through the sidecar at `dapr_http_endpoint` and make each
        a `Tool` that calls it the same way."""
        endpoint = dapr_http_endpoint.rstrip("/")
        if self.via == "app":
            client: _Transport = _AppTransport(f"{endpoint}/v1.0/invoke/{self.name}/method/{self.method}")
        else:
            client = _ResourceTransport(endpoint, self.name)
        async with asyncio.timeout(max(self.timeout_s, 10.0)):
            listed = await client.list_tools()
        chosen = [t for t in listed if self.only is None or t.name in self.only]
        missing = sorted((self.only or frozenset()) - {t.name for t in listed})
        if missing:
            raise ValueError(f"{self.describe()} has no tool named {', '.join(missing)}")
        dotted = sorted(t.name for t in chosen if self.via == "resource" and "." in t.name)
        if dotted:
            raise ValueError(
                f"{self.describe()}: daprd cannot call a tool whose name has a '.' ({', '.join(dotted)}); "
                "leave it out with `only`"
            )
        if len(chosen) > MAX_MCP_TOOLS:
            raise ValueError(f"{self.describe()} offers {len(chosen)} tools, more than {MAX_MCP_TOOLS}")
        return [mcp_tool(t, client.call, prefix=self.prefix, timeout_s=self.timeout_s) for t in chosen]


class McpTool(Tool):
    """A tool of an MCP server: its schema is the server's `inputSchema`, its call goes to the
    server (by Dapr service invocation, or as a durable workflow of the app's daprd)."""

    def __init__(
        self,
        *,
        name: str,
        remote_name: str,
        description: str,
        input_schema: dict[str, Any],
        call: CallFunction,
        timeout_s: float,
    ) -> None:
        if not MCP_NAME.fullmatch(name) or len(name) > MAX_TOOL_NAME_CHARS:
            raise ValueError(f"MCP tool name {name!r}: 1 to 64 letters, digits, '_', '.', '-'")
        if timeout_s <= 0:
            raise ValueError("a tool's timeout must be positive")
        schema_text = json.dumps(input_schema)
        if len(schema_text) > MAX_MCP_SCHEMA_CHARS:
            raise ValueError(
                f"MCP tool {name}: input schema of {len(schema_text)} chars, over {MAX_MCP_SCHEMA_CHARS}"
            )
        try:
            validator_type = jsonschema.validators.validator_for(input_schema)
            validator_type.check_schema(input_schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(
                f"MCP tool {name}: its input schema is not a JSON Schema ({exc.message})"
            ) from exc
        self.name = name
        self.remote_name = remote_name
        self.description = " ".join(description.split())[:MAX_MCP_DESCRIPTION_CHARS]
        self.timeout_s = timeout_s
        self.input_schema = input_schema
        self._validator = validator_type(input_schema)
        self._call = call
        self.function = call

    @property
    def parameters(self) -> dict[str, Any]:
        schema = dict(self.input_schema)
        schema.pop("title", None)
        return schema

    async def __call__(self, arguments: Mapping[str, Any]) -> Any:
        given = dict(arguments)
        problems = sorted(self._validator.iter_errors(given), key=lambda e: list(e.absolute_path))
        if problems:
            described = "; ".join(
                f"{'.'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}"
                for e in problems[:5]
            )
            raise InvalidArguments(f"{len(problems)} invalid: {described}")
        return result_text(await self._call(self.remote_name, given))


def mcp_tool(
    definition: mcp_types.Tool,
    call: CallFunction,
    *,
    prefix: str = "",
    timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
) -> McpTool:
    """The SDK `Tool` for one of an MCP server's tools (`call(name, arguments)` reaches it)."""
    return McpTool(
        name=f"{prefix}{definition.name}",
        remote_name=definition.name,
        description=definition.description or definition.title or definition.name,
        input_schema=definition.inputSchema or {"type": "object"},
        call=call,
        timeout_s=timeout_s,
    )


def result_text(result: mcp_types.CallToolResult) -> str:
    """What the model reads of a tool's result: its text content (other content by kind), or
    its structured content when it has no text. An `isError` result raises `McpToolFailed`."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            parts.append(
                resource.text
                if isinstance(resource, mcp_types.TextResourceContents)
                else f"[resource {resource.uri}]"
            )
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[{block.type} content]")
    text = "\n".join(parts)
    if not text and result.structuredContent is not None:
        text = json.dumps(result.structuredContent)
    if result.isError:
        raise McpToolFailed(text or "the tool reported an error")
    return text


# -- the transports ---------------------------------------------------------------------------


class CallToolInput(BaseModel):
    """The input of daprd's `dapr.internal.mcp.<server>.CallTool.<tool>` workflow."""

    arguments: dict[str, Any] = Field(default_factory=dict)


class WorkflowState(BaseModel):
    """What the workflow API tells of an instance (`GET /v1.0/workflows/dapr/<instance>`)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    instance_id: str = Field(alias="instanceID")
    runtime_status: str = Field(alias="runtimeStatus")
    properties: dict[str, str] = Field(default_factory=dict)


class _Transport:
    async def list_tools(self) -> list[mcp_types.Tool]:
        raise NotImplementedError

    async def call(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        raise NotImplementedError


class _AppTransport(_Transport):
    """MCP's streamable HTTP transport to an app, through Dapr service invocation: the
    sidecar passes the exchange (POSTed JSON-RPC, answered as JSON or an SSE stream, the
    `mcp-session-id` header, the closing DELETE) through both ways."""

    def __init__(self, url: str) -> None:
        self.url = url

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[ClientSession]:
        try:
            async with (
                streamablehttp_client(self.url, timeout=30, terminate_on_close=True) as (read, write, _),
                ClientSession(read, write, read_timeout_seconds=timedelta(seconds=300)) as session,
            ):
                await session.initialize()
                yield session
        except McpToolFailed:
            raise
        except Exception as exc:
            raise McpToolFailed(f"MCP server at {self.url} failed: {_describe(exc)}") from exc

    async def list_tools(self) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        async with self._session() as session:
            cursor: str | None = None
            for _ in range(MAX_LIST_PAGES):
                page = await session.list_tools(cursor=cursor)
                tools += page.tools
                cursor = page.nextCursor
                if not cursor:
                    return tools
        raise McpToolFailed(f"MCP server at {self.url} lists more than {MAX_LIST_PAGES} pages of tools")

    async def call(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        async with self._session() as session:
            return await session.call_tool(name, arguments)


def _describe(exc: BaseException) -> str:
    """The innermost cause of an exception group (anyio task groups wrap what failed)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:MAX_NOTE_CHARS]


class _ResourceTransport(_Transport):
    """An `MCPServer` resource of the app's daprd, through the workflow API: ListTools and
    each CallTool are workflows daprd runs in-process (`dapr.internal.mcp.<server>.*`)."""

    def __init__(self, dapr_http_endpoint: str, server: str) -> None:
        self.endpoint = dapr_http_endpoint
        self.server = server

    async def list_tools(self) -> list[mcp_types.Tool]:
        output = await self._run(
            f"dapr.internal.mcp.{self.server}.ListTools", f"mcp-list-{uuid.uuid4().hex}", None
        )
        return mcp_types.ListToolsResult.model_validate_json(output).tools

    async def call(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        instance = _call_instance_id(self.server, name, arguments)
        output = await self._run(
            f"dapr.internal.mcp.{self.server}.CallTool.{name}", instance, CallToolInput(arguments=arguments)
        )
        return mcp_types.CallToolResult.model_validate_json(output)

    async def _run(self, workflow: str, instance: str, given: BaseModel | None) -> str:
        """Start `workflow` as `instance` unless that instance exists already (a resumed run's
        call), then wait for it to end; its output, or `McpToolFailed` when it failed."""
        base = f"{self.endpoint}/v1.0/workflows/dapr"
        async with httpx.AsyncClient(timeout=10.0) as http:
            if await self._state(http, f"{base}/{quote(instance)}") is None:
                started = await http.post(
                    f"{base}/{quote(workflow)}/start",
                    params={"instanceID": instance},
                    content=given.model_dump_json() if given is not None else b"{}",
                    headers={"content-type": "application/json"},
                )
                if started.status_code >= 300:
                    raise McpToolFailed(
                        f"starting {workflow} failed: {started.status_code} {started.text[:500]}"
                    )
            wait = WORKFLOW_POLL_S[0]
            while True:
                state = await self._state(http, f"{base}/{quote(instance)}")
                status = state.runtime_status if state is not None else None
                properties = state.properties if state is not None else {}
                if status == "COMPLETED":
                    return properties.get("dapr.workflow.output") or "{}"
                if status in ("FAILED", "TERMINATED"):
                    reason = properties.get("dapr.workflow.failure.error_message") or status.lower()
                    raise McpToolFailed(f"{workflow} {status.lower()}: {reason}"[:MAX_NOTE_CHARS])
                await asyncio.sleep(wait)
                wait = min(wait * 2, WORKFLOW_POLL_S[1])

    @staticmethod
    async def _state(http: httpx.AsyncClient, url: str) -> WorkflowState | None:
        """The instance's state, None when there is no such instance. A sidecar error is asked
        again (reading an instance while daprd writes it can fail: `ERR_GET_WORKFLOW ... missing
        from state store`); the call's timeout bounds the asking."""
        wait = WORKFLOW_POLL_S[0]
        for _ in range(STATE_READ_ATTEMPTS):
            answer = await http.get(url)
            if answer.status_code == 404 or "ERR_INSTANCE_ID_NOT_FOUND" in answer.text:
                return None
            if answer.status_code < 300:
                return WorkflowState.model_validate_json(answer.content)
            if answer.status_code < 500:
                break
            await asyncio.sleep(wait)
            wait = min(wait * 2, WORKFLOW_POLL_S[1])
        raise McpToolFailed(f"workflow state: {answer.status_code} {answer.text[:500]}")


# -- durable call identities --------------------------------------------------------------------


@dataclass
class _CallScope:
    key: str
    calls: int = 0


_SCOPE: contextvars.ContextVar[_CallScope | None] = contextvars.ContextVar(
    "agora_mcp_call_scope", default=None
)


@contextmanager
def durable_call_scope(key: str) -> Iterator[None]:
    """Within it, the n-th call of a resource's tool with given arguments has a workflow
    instance id made of `key`, n and the call: the same on each attempt of a run, so a retried
    run waits for (or reads) the call it had started instead of making it again. An agent
    app opens one for each award's run, keyed by the run's workflow instance."""
    # The workflow API takes instance ids of letters, digits, '_' and '-' only.
    token = _SCOPE.set(_CallScope(re.sub(r"[^A-Za-z0-9_-]", "_", key)[:80]))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def _call_instance_id(server: str, tool_name: str, arguments: dict[str, Any]) -> str:
    scope = _SCOPE.get()
    if scope is None:
        return f"mcp-call-{uuid.uuid4().hex}"
    scope.calls += 1
    digest = hashlib.sha256(
        json.dumps([server, tool_name, arguments], sort_keys=True, default=str).encode()
    ).hexdigest()[:16]
    return f"{scope.key}_mcp_{scope.calls}_{digest}"
