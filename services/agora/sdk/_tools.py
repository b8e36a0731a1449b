"""Tools: typed Python functions an agent's model may call.

A tool's JSON Schema comes from its signature (pydantic reads the annotations and defaults),
its description from its docstring. `ToolExecutor` runs a call with a timeout each; whatever
goes wrong (unknown tool, arguments that do not validate, the tool raising, the timeout) comes
back as the call's result with `error` set, for the model to read, and never ends the run.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, get_type_hints, overload, runtime_checkable

from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from agora.core.errors import describe_field_errors, field_errors
from agora.core.limits import MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.runtime.tracing import tracer

__all__ = ["DEFAULT_TOOL_TIMEOUT_S", "Tool", "ToolCall", "ToolExecutor", "ToolResult", "ToolSource", "tool"]

DEFAULT_TOOL_TIMEOUT_S = 30.0
MAX_TOOL_NAME_CHARS = 64

ToolFunction = Callable[..., Any]


class ToolCall(BaseModel):
    """A model's request to run a tool with arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=MAX_TOOL_NAME_CHARS)
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolResult(BaseModel):
    """What a tool call gave back: its output as text, or the error that stopped it (for the
    model to read; the run goes on)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    output: str = Field(default="", max_length=MAX_TEXT_CHARS)
    error: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    duration_s: float = Field(default=0.0, ge=0.0)

    @property
    def ok(self) -> bool:
        return self.error is None

    def for_model(self) -> str:
        """The text the model reads back."""
        return f"error: {self.error}" if self.error is not None else self.output


class Tool:
    """A typed function the model may call: `name`, `description`, `parameters` (JSON Schema of
    its arguments), and the function itself (sync or async), run with `timeout_s`."""

    def __init__(
        self,
        function: ToolFunction,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
    ) -> None:
        self.function = function
        self.name = name or function.__name__
        if not self.name.isidentifier() or len(self.name) > MAX_TOOL_NAME_CHARS:
            raise ValueError(f"tool name {self.name!r} is not an identifier of at most {MAX_TOOL_NAME_CHARS}")
        if timeout_s <= 0:
            raise ValueError("a tool's timeout must be positive")
        self.description = " ".join((description or inspect.getdoc(function) or "").split())
        self.timeout_s = timeout_s
        self.arguments_model = _arguments_model(function, self.name)

    @property
    def parameters(self) -> dict[str, Any]:
        schema = self.arguments_model.model_json_schema()
        schema.pop("title", None)
        return schema

    def describe(self) -> str:
        """One line for the model's tool catalogue: name, what it does, its arguments' schema."""
        return f"- {self.name}: {self.description} Arguments (JSON Schema): {json.dumps(self.parameters)}"

    async def __call__(self, arguments: Mapping[str, Any]) -> Any:
        """Validate `arguments` into the signature's types and run the function."""
        parsed = self.arguments_model.model_validate(dict(arguments))
        values = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if inspect.iscoroutinefunction(self.function):
            return await self.function(**values)
        return await asyncio.to_thread(self.function, **values)


@overload
def tool(function: ToolFunction) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    function: ToolFunction | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Make a function a `Tool` (as `@tool` or `@tool(timeout_s=5)`)."""

    def wrap(fn: ToolFunction) -> Tool:
        return Tool(fn, name=name, description=description, timeout_s=timeout_s)

    return wrap(function) if function is not None else wrap


def _arguments_model(function: ToolFunction, name: str) -> type[BaseModel]:
    hints = get_type_hints(function)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ValueError(f"tool {name}: *args and **kwargs have no schema; name every argument")
        annotation = hints.get(parameter.name)
        if annotation is None:
            raise ValueError(f"tool {name}: argument {parameter.name!r} needs a type annotation")
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


@runtime_checkable
class ToolSource(Protocol):
    """Somewhere tools are listed at run time (an MCP server: `McpServer`), through the app's
    sidecar."""

    def describe(self) -> str: ...

    async def load_tools(self, dapr_http_endpoint: str) -> list[Tool]: ...


class ToolExecutor:
    """Runs tool calls by name, each within its tool's timeout, each as a span
    (`execute_tool {name}`, OpenTelemetry GenAI conventions). Tools given as sources (MCP
    servers) join on `connect`, which an agent app calls when it starts."""

    def __init__(self, tools: Iterable[Tool | ToolFunction | ToolSource] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._sources: list[ToolSource] = []
        self._connected = False
        self._connecting = asyncio.Lock()
        for given in tools:
            if isinstance(given, Tool):
                self.add(given)
            elif isinstance(given, ToolSource):
                self._sources.append(given)
            else:
                self.add(Tool(given))

    @property
    def sources(self) -> list[ToolSource]:
        return list(self._sources)

    async def connect(self, dapr_http_endpoint: str) -> None:
        """List the tools of every source through the sidecar at `dapr_http_endpoint` and add
        them (once; a failure adds none, and the next call tries again)."""
        async with self._connecting:
            if self._connected:
                return
            loaded: list[Tool] = []
            for source in self._sources:
                loaded += await source.load_tools(dapr_http_endpoint)
            names = [t.name for t in loaded]
            clashes = sorted({n for n in names if names.count(n) > 1 or n in self._tools})
            if clashes:
                raise ValueError(f"two tools are named {', '.join(clashes)} (give a source a prefix)")
            for found in loaded:
                self.add(found)
            self._connected = True

    def add(self, given: Tool) -> None:
        if given.name in self._tools:
            raise ValueError(f"two tools are named {given.name!r}")
        self._tools[given.name] = given

    @property
    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def catalogue(self) -> str:
        return "\n".join(t.describe() for t in self._tools.values()) or "(no tools)"

    async def execute(self, call: ToolCall) -> ToolResult:
        started = time.monotonic()
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name}
        with tracer("agora.sdk").start_as_current_span(
            f"execute_tool {call.name}", kind=SpanKind.INTERNAL, attributes=attributes
        ) as span:
            output, error = await self._run(call)
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, error[:200]))
                span.set_attribute("error.type", error.split(":", 1)[0])
        return ToolResult(
            name=call.name,
            output=output[:MAX_TEXT_CHARS],
            error=error[:MAX_NOTE_CHARS] if error is not None else None,
            duration_s=time.monotonic() - started,
        )

    async def _run(self, call: ToolCall) -> tuple[str, str | None]:
        chosen = self._tools.get(call.name)
        if chosen is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return "", f"UnknownTool: no tool named {call.name!r} (tools: {known})"
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancellation of the
            # run that arrives as the tool finishes, and the run then outlives its deadline.
            async with asyncio.timeout(chosen.timeout_s):
                output = await chosen(call.arguments)
        except ValidationError as exc:
            errors = field_errors(exc.errors())
            return "", f"InvalidArguments: {describe_field_errors(errors, exc.error_count())}"
        except TimeoutError:
            return "", f"Timeout: {call.name} did not finish within {chosen.timeout_s:g} s"
        except Exception as exc:  # a tool's failure is the model's to read, never the run's end
            return "", f"{type(exc).__name__}: {exc}"
        return _as_text(output), None


def _as_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, BaseModel):
        return output.model_dump_json()
    try:
        return json.dumps(output, default=str)
    except (TypeError, ValueError):
        return str(output)
