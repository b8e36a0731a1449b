"""Model calls through the sidecar's Conversation API (Dapr 1.18, alpha2).

The vendor, its key, retries and PII scrubbing are the Dapr component's business, so swapping
OpenAI for Anthropic is a YAML change. Request, as daprd 1.18 decodes it (protojson of
`ConversationRequestAlpha2`, lowerCamelCase names):

    POST /v1.0-alpha2/conversation/{component}/converse
    {"inputs": [{"messages": [
        {"ofSystem": {"content": [{"text": "..."}]}},
        {"ofUser": {"content": [{"text": "..."}]}},
        {"ofAssistant": {"toolCalls": [{"id": "call_1",
                                        "function": {"name": "multiply", "arguments": "{...}"}}]}},
        {"ofTool": {"toolId": "call_1", "name": "multiply", "content": [{"text": "391"}]}}]}],
     "temperature": 0.0,
     "tools": [{"function": {"name": "multiply", "description": "...", "parameters": {<JSON Schema>}}}],
     "toolChoice": "auto" | "required" | "none",
     "responseFormat": {<JSON Schema>}}

An assistant message carries `content` when it has text (an empty text part would reach some
vendors as an empty content block); a tool result names the call it answers (`toolId`) and the
tool (`name`, which `ChatMessage` does not carry: it is the name of the call with that id in an
earlier assistant message, left out when no such call is in the conversation). Each tool
result is one content part: the OpenAI component takes exactly one. daprd hands `tools` and
`toolChoice` to the component unchanged (`toolChoice` defaults to `auto` when tools are given,
and `required` without tools is refused), so `conversation.openai` sends them to the vendor as
OpenAI `tools` and `tool_choice`, the assistant's calls as `tool_calls` and a result as a
`tool` message with its `tool_call_id` (that component drops the tool's name).

Response: {"outputs": [{"choices": [{"finishReason": "tool_calls", "message": {"content": "...",
"toolCalls": [{"id": "...", "function": {"name": "...", "arguments": "{...}"}}]}}],
"model": "...", "usage": {"promptTokens": "4", "completionTokens": "4"}}]} (uint64 counts are
JSON strings; empty fields are left out, so a message with only tool calls has no `content`).
Errors: {"errorCode": "ERR_CONVERSATION_NOT_FOUND", "message": "..."}.

The alpha2 API has no output limit and no stop sequences (`max_tokens` goes nowhere): any limit
is the component's or the vendor's, and `conversation.openai` 1.18 sets none. A model that
calls a tool it must call only when its answer is begun for it gets that opening
(`required_call_opening`) as a last assistant message of a `required` call: the component
sends it as such, and an OpenAI-compatible server such as llama.cpp's continues it as the start
of the answer (and parses the call out of it). With no stop sequence, such a model may write
more than one call.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

from agora.llm.client import (
    ChatMessage,
    Completion,
    ModelError,
    ModelToolCall,
    ModelUnavailable,
    ToolChoice,
    ToolSpec,
    TracedModelClient,
    Usage,
    schema_instruction,
)
from agora.runtime.sidecar import DaprError, DaprSidecar, SidecarUnavailable

BACKEND = "dapr-conversation"
_MESSAGE_TYPE = {"system": "ofSystem", "user": "ofUser", "assistant": "ofAssistant", "tool": "ofTool"}


class DaprConversationClient(TracedModelClient):
    """`component` names the Dapr conversation component; `model` only labels spans and
    completions (the component's metadata picks the real model), defaulting to the component
    name. `required_call_opening`: for a model that does not call a tool it must call unless
    its answer is begun for it (small models with a Hermes-style template), the text a call
    with `tool_choice="required"` begins the answer with (as a last assistant message)."""

    backend = BACKEND
    supports_tools = True

    def __init__(
        self,
        sidecar: DaprSidecar,
        component: str,
        *,
        model: str | None = None,
        timeout_s: float = 60,
        required_call_opening: str | None = None,
    ) -> None:
        self.sidecar = sidecar
        self.component = component
        self.model = model or component
        self.timeout_s = timeout_s
        self.required_call_opening = required_call_opening

    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None,
        temperature: float,
        max_tokens: int | None,
        tools: list[ToolSpec] | None = None,
        tool_choice: ToolChoice = "auto",
    ) -> Completion:
        body = converse_request(
            messages,
            json_schema=json_schema,
            temperature=temperature,
            tools=tools or (),
            tool_choice=tool_choice,
            required_call_opening=self.required_call_opening,
        )
        path = f"/v1.0-alpha2/conversation/{self.component}/converse"
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await self.sidecar.request(
                    "POST", path, json_body=body, timeout=self.timeout_s, idempotent=False
                )
        except TimeoutError as exc:
            raise ModelUnavailable(
                f"conversation component {self.component!r} did not answer within {self.timeout_s}s"
            ) from exc
        except SidecarUnavailable as exc:
            raise ModelUnavailable(f"conversation component {self.component!r}: {exc}") from exc
        except DaprError as exc:
            code = exc.error_code or f"HTTP {exc.status_code}"
            detail = f"conversation component {self.component!r}: {code} {exc.message}"
            raise (ModelUnavailable(detail) if exc.status_code >= 500 else ModelError(detail)) from exc
        return completion_of(response.json() if response.content else {}, self.component, self.model)


def converse_request(
    messages: Sequence[ChatMessage],
    *,
    temperature: float = 0.0,
    json_schema: dict[str, Any] | None = None,
    tools: Sequence[ToolSpec] = (),
    tool_choice: ToolChoice = "auto",
    required_call_opening: str | None = None,
) -> dict[str, Any]:
    """The alpha2 request body for a call (the module docstring shows its shape)."""
    body: dict[str, Any] = {"temperature": temperature}
    if json_schema is not None:
        # `responseFormat` reaches only the providers that support structured output, and
        # the sidecar silently drops schemas its converter cannot read, so the schema also
        # goes into the prompt: that is what every provider sees.
        messages = with_schema_instruction(list(messages), json_schema)
        response_format = structured_output_schema(json_schema)
        if response_format is not None:
            body["responseFormat"] = response_format
    wire = _to_dapr_messages(messages)
    if tools:
        body["tools"] = [
            {"function": tool.model_dump(include={"name", "description", "parameters"})} for tool in tools
        ]
        body["toolChoice"] = tool_choice
        if tool_choice == "required" and required_call_opening is not None:
            wire.append({"ofAssistant": {"content": [{"text": required_call_opening}]}})
    body["inputs"] = [{"messages": wire}]
    return body


def completion_of(payload: dict[str, Any], component: str, model: str) -> Completion:
    """The completion in an alpha2 response: its first output's first choice. `model` names
    the model when the component does not."""
    outputs = payload.get("outputs") or []
    choices = (outputs[0].get("choices") if outputs else None) or []
    if not choices:
        raise ModelError(f"conversation component {component!r} returned no choices: {payload}")
    message = choices[0].get("message") or {}
    try:
        calls = [_tool_call_of(raw) for raw in message.get("toolCalls") or []]
    except (LookupError, TypeError, AttributeError) as exc:
        raise ModelError(
            f"conversation component {component!r} returned a malformed tool call: {message}"
        ) from exc
    usage = outputs[0].get("usage") or {}
    return Completion(
        text=message.get("content", ""),
        model=outputs[0].get("model") or model,
        backend=BACKEND,
        usage=Usage(
            prompt_tokens=int(usage.get("promptTokens", 0)),
            completion_tokens=int(usage.get("completionTokens", 0)),
        ),
        finish_reason=choices[0].get("finishReason"),
        tool_calls=calls,
    )


def _tool_call_of(raw: dict[str, Any]) -> ModelToolCall:
    function = raw["function"]
    return ModelToolCall(
        id=str(raw.get("id") or ""),
        name=str(function["name"]),
        # protojson leaves an empty string out: a call without arguments.
        arguments=str(function.get("arguments") or "{}"),
    )


def _to_dapr_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    tool_names: dict[str, str] = {}  # call id -> tool, from the assistant messages read so far
    wire = []
    for message in messages:
        if message.role == "tool":
            wire.append({"ofTool": _tool_result(message, tool_names)})
            continue
        fields: dict[str, Any] = {}
        if message.content or not message.tool_calls:
            fields["content"] = [{"text": message.content}]
        if message.tool_calls:
            fields["toolCalls"] = [
                {**({"id": c.id} if c.id else {}), "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.tool_calls
            ]
            tool_names.update((c.id, c.name) for c in message.tool_calls)
        wire.append({_MESSAGE_TYPE[message.role]: fields})
    return wire


def _tool_result(message: ChatMessage, tool_names: dict[str, str]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if message.tool_call_id is not None:
        fields["toolId"] = message.tool_call_id
        if message.tool_call_id in tool_names:
            fields["name"] = tool_names[message.tool_call_id]
    fields["content"] = [{"text": message.content}]
    return fields


def with_schema_instruction(messages: list[ChatMessage], json_schema: dict[str, Any]) -> list[ChatMessage]:
    """Append the schema instruction to the last user message (or add one)."""
    instruction = schema_instruction(json_schema)
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            updated = ChatMessage(role="user", content=f"{messages[index].content}\n\n{instruction}")
            return [*messages[:index], updated, *messages[index + 1 :]]
    return [*messages, ChatMessage(role="user", content=instruction)]


def structured_output_schema(json_schema: dict[str, Any]) -> dict[str, Any] | None:
    """The schema in the shape daprd's structured-output converter reads: every node with a
    `type`, no `$ref`s, optional values as their non-null type. None when it cannot be put in
    that shape (the prompt instruction then carries the schema alone)."""
    defs = json_schema.get("$defs", {})

    def simplify(node: Any, seen: frozenset[str]) -> dict[str, Any] | None:
        if not isinstance(node, dict):
            return None
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name in seen or name not in defs:
                return None  # recursive models cannot be inlined
            return simplify({**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}, seen | {name})
        if "anyOf" in node:
            branches = [b for b in node["anyOf"] if b != {"type": "null"}]
            if len(branches) != 1:
                return None
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            return simplify({**branches[0], **rest}, seen)
        if not isinstance(node.get("type"), str):
            return None
        out = {k: v for k, v in node.items() if k not in ("$defs", "properties", "items", "default")}
        if "properties" in node:
            props = {name: simplify(sub, seen) for name, sub in node["properties"].items()}
            if any(p is None for p in props.values()):
                return None
            out["properties"] = props
        if "items" in node:
            items = simplify(node["items"], seen)
            if items is None:
                return None
            out["items"] = items
        return out

    simplified = simplify(json_schema, frozenset())
    if simplified is not None:
        simplified["name"] = re.sub(r"[^A-Za-z0-9_-]", "_", str(json_schema.get("title", "response")))[:64]
    return simplified
