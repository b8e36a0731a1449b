"""Model calls through the sidecar's Conversation API (Dapr 1.18, alpha2).

The vendor, its key, retries and PII scrubbing are the Dapr component's business, so swapping
OpenAI for Anthropic is a YAML change. Request, as daprd 1.18 decodes it (protojson of
`ConversationRequestAlpha2`):

    POST /v1.0-alpha2/conversation/{component}/converse
    {"inputs": [{"messages": [{"ofSystem": {"content": [{"text": "..."}]}},
                              {"ofUser": {"content": [{"text": "..."}]}}]}],
     "temperature": 0.0,
     "responseFormat": {<JSON Schema>}}

Response: {"outputs": [{"choices": [{"finishReason": "stop", "message": {"content": "..."}}],
"model": "...", "usage": {"promptTokens": "4", "completionTokens": "4"}}]} (uint64 counts are
JSON strings). Errors: {"errorCode": "ERR_CONVERSATION_NOT_FOUND", "message": "..."}.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from agora.llm.client import (
    ChatMessage,
    Completion,
    ModelError,
    ModelUnavailable,
    TracedModelClient,
    Usage,
    schema_instruction,
)
from agora.runtime.sidecar import DaprError, DaprSidecar, SidecarUnavailable

_MESSAGE_TYPE = {"system": "ofSystem", "user": "ofUser", "assistant": "ofAssistant", "tool": "ofTool"}


class DaprConversationClient(TracedModelClient):
    """`component` names the Dapr conversation component; `model` only labels spans and
    completions (the component's metadata picks the real model), defaulting to the component
    name."""

    backend = "dapr-conversation"

    def __init__(
        self, sidecar: DaprSidecar, component: str, *, model: str | None = None, timeout_s: float = 60
    ) -> None:
        self.sidecar = sidecar
        self.component = component
        self.model = model or component
        self.timeout_s = timeout_s

    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None,
        temperature: float,
        max_tokens: int | None,
    ) -> Completion:
        # The alpha2 API has no max-tokens field; the component's metadata sets any limit.
        body: dict[str, Any] = {"temperature": temperature}
        if json_schema is not None:
            # `responseFormat` reaches only the providers that support structured output, and
            # the sidecar silently drops schemas its converter cannot read, so the schema also
            # goes into the prompt: that is what every provider sees.
            messages = with_schema_instruction(messages, json_schema)
            response_format = structured_output_schema(json_schema)
            if response_format is not None:
                body["responseFormat"] = response_format
        body["inputs"] = [{"messages": [_to_dapr_message(m) for m in messages]}]
        path = f"/v1.0-alpha2/conversation/{self.component}/converse"
        try:
            response = await asyncio.wait_for(
                self.sidecar.request("POST", path, json_body=body, timeout=self.timeout_s, idempotent=False),
                timeout=self.timeout_s,
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
        return self._completion(response.json() if response.content else {})

    def _completion(self, payload: dict[str, Any]) -> Completion:
        outputs = payload.get("outputs") or []
        choices = (outputs[0].get("choices") if outputs else None) or []
        if not choices:
            raise ModelError(f"conversation component {self.component!r} returned no choices: {payload}")
        usage = outputs[0].get("usage") or {}
        return Completion(
            text=(choices[0].get("message") or {}).get("content", ""),
            model=outputs[0].get("model") or self.model,
            backend=self.backend,
            usage=Usage(
                prompt_tokens=int(usage.get("promptTokens", 0)),
                completion_tokens=int(usage.get("completionTokens", 0)),
            ),
            finish_reason=choices[0].get("finishReason"),
        )


def _to_dapr_message(message: ChatMessage) -> dict[str, Any]:
    content: dict[str, Any] = {"content": [{"text": message.content}]}
    if message.role == "tool":
        content["name"] = "tool"  # required by the proto; ChatMessage carries no tool name
    return {_MESSAGE_TYPE[message.role]: content}


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
