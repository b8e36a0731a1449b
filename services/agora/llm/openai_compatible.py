"""Model calls to any OpenAI-compatible `/chat/completions` endpoint (OpenAI, vLLM, Ollama,
LiteLLM, ...), for deployments that reach a vendor directly rather than through a Dapr
conversation component.

Vendors shed load with 429s and fail transiently with 5xx, so those (and transport errors) are
retried with exponential backoff, waiting at least as long as a `Retry-After` header asks.
Other 4xx answers (bad key, bad request) are final.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import re
import time
from typing import Any

import httpx

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
)

log = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 60.0
"""Longest `Retry-After` honoured; a vendor asking for more is treated as unavailable."""


DEFAULT_MAX_TOKENS = 512
"""The output limit of a call whose caller sets none: without one, a model writes until its
context is full (a small model may never stop on its own)."""


class OpenAICompatibleClient(TracedModelClient):
    """`max_retries` is the number of retries after the first attempt; `backoff_s` the first
    delay (doubled per retry); `max_tokens` the output limit of calls that name none.

    Tools go as `tools` and come back as `tool_calls`. `required_call_prefill`, for a model
    that does not call a tool it must call unless its answer is begun for it (small models with
    a Hermes-style template): an `(opening, closing)` pair; a call with `tool_choice="required"`
    then ends with an assistant message `opening` for the model to continue, and stops at
    `closing`."""

    backend = "openai-compatible"
    supports_tools = True

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        *,
        timeout_s: float = 60,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        required_call_prefill: tuple[str, str] | None = None,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.required_call_prefill = required_call_prefill
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

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
        wire = [_to_openai_message(m) for m in messages]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "temperature": temperature,
            "max_tokens": max_tokens if max_tokens is not None else self.max_tokens,
        }
        if tools:
            body["tools"] = [
                {"type": "function", "function": t.model_dump(include={"name", "description", "parameters"})}
                for t in tools
            ]
            body["tool_choice"] = tool_choice
            if tool_choice == "required" and self.required_call_prefill is not None:
                opening, closing = self.required_call_prefill
                wire.append({"role": "assistant", "content": opening})
                body["stop"] = [closing]
        if json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(json_schema), "schema": json_schema},
            }
        response = await self._post_with_retries(body)
        return self._completion(response)

    async def _post_with_retries(self, body: dict[str, Any]) -> httpx.Response:
        for attempt in range(self.max_retries + 1):
            retry_after: float | None = None
            try:
                response = await self._http.post("/chat/completions", json=body)
            except httpx.TransportError as exc:
                failure = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 400:
                    return response
                failure = f"HTTP {response.status_code}: {response.text[:500]}"
                if response.status_code != 429 and response.status_code < 500:
                    raise ModelError(f"{self.backend} {self.model}: {failure}")
                retry_after = _retry_after_seconds(response.headers.get("retry-after"))
            if attempt == self.max_retries:
                break
            delay = max(self.backoff_s * 2**attempt, retry_after or 0.0)
            if delay > MAX_RETRY_AFTER_S:
                break
            log.warning("model endpoint failed, retrying", extra={"failure": failure, "delay_s": delay})
            await asyncio.sleep(delay)
        raise ModelUnavailable(
            f"{self.backend} {self.model}: gave up after {attempt + 1} attempt(s); {failure}"
        )

    def _completion(self, response: httpx.Response) -> Completion:
        try:
            payload = response.json()
            choice = payload["choices"][0]
            message = choice["message"]
            content = message.get("content")
            calls = [_tool_call_of(c) for c in message.get("tool_calls") or []]
        except (ValueError, LookupError, TypeError, AttributeError) as exc:
            raise ModelError(
                f"{self.backend} {self.model}: unexpected response {response.text[:500]}"
            ) from exc
        if content is None and calls:
            content = ""
        if not isinstance(content, str):
            raise ModelError(
                f"{self.backend} {self.model}: answer has no text content: {payload['choices'][0]}"
            )
        usage = payload.get("usage") or {}
        return Completion(
            text=content,
            model=payload.get("model") or self.model,
            backend=self.backend,
            usage=Usage(
                prompt_tokens=usage.get("prompt_tokens") or 0,
                completion_tokens=usage.get("completion_tokens") or 0,
            ),
            finish_reason=choice.get("finish_reason"),
            tool_calls=calls,
        )


def _to_openai_message(message: ChatMessage) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        wire["tool_call_id"] = message.tool_call_id
    return wire


def _tool_call_of(raw: dict[str, Any]) -> ModelToolCall:
    function = raw["function"]
    arguments = function.get("arguments")
    return ModelToolCall(
        id=str(raw.get("id") or ""),
        name=str(function["name"]),
        # Some servers send the arguments as an object rather than its JSON text.
        arguments=arguments if isinstance(arguments, str) else json.dumps(arguments or {}),
    )


def _schema_name(json_schema: dict[str, Any]) -> str:
    """OpenAI requires `^[a-zA-Z0-9_-]{1,64}$`; pydantic schemas carry the model name as title."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(json_schema.get("title") or "response"))
    return name[:64]


def _retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` is either seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
