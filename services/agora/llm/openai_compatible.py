"""Model calls to any OpenAI-compatible `/chat/completions` endpoint (OpenAI, vLLM, Ollama,
LiteLLM, ...), for deployments that reach a vendor directly rather than through a Dapr
conversation component.

Vendors shed load with 429s and fail transiently with 5xx, so those (and transport errors) are
retried with exponential backoff, waiting at least as long as a `Retry-After` header asks.
Other 4xx answers (bad key, bad request) are final.

Within `streaming_text` a call streams (`"stream": true`, server-sent events of
`chat.completion.chunk`s): each delta's `content` is passed on as it arrives, `tool_calls` deltas
are put together by their index, and the usage is the server's own, from the last chunk
(`stream_options.include_usage`). A stream is retried like a call only until its first piece of
text was passed on; a failure after that is `ModelUnavailable` saying the stream broke.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from agora.llm.client import (
    AnswerStream,
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
T = TypeVar("T")

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
    streams = True

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
        answer: AnswerStream | None = None,
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
        if answer is not None:
            streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
            return await self._with_retries(lambda: self._stream(streamed, answer))
        response = await self._with_retries(lambda: self._post(body))
        return self._completion(response)

    async def _with_retries(self, attempt_call: Callable[[], Awaitable[T]]) -> T:
        """`attempt_call` until it returns, retrying its `_Retryable` failures with backoff."""
        for attempt in range(self.max_retries + 1):
            try:
                return await attempt_call()
            except _Retryable as retryable:
                failure, retry_after = retryable.failure, retryable.retry_after
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

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        try:
            response = await self._http.post("/chat/completions", json=body)
        except httpx.TransportError as exc:
            raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
        self._check_status(response)
        return response

    def _check_status(self, response: httpx.Response) -> None:
        """Nothing for a success; `_Retryable` for 429 and 5xx, `ModelError` for other failures.
        The response's body must have been read."""
        if response.status_code < 400:
            return
        failure = f"HTTP {response.status_code}: {response.text[:500]}"
        if response.status_code != 429 and response.status_code < 500:
            raise ModelError(f"{self.backend} {self.model}: {failure}")
        raise _Retryable(failure, _retry_after_seconds(response.headers.get("retry-after")))

    async def _stream(self, body: dict[str, Any], answer: AnswerStream) -> Completion:
        """One streamed attempt: the answer put together from its chunks, each piece of text
        passed on as it arrives."""
        chunks = _Chunks()
        passing_on = False
        try:
            async with self._http.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    self._check_status(response)
                async for data in _server_sent_data(response):
                    if data == "[DONE]":
                        chunks.done = True
                        break
                    piece = self._read_chunk(data, chunks, answer)
                    if piece:
                        passing_on = True
                        await answer.text(piece)
                        passing_on = False
        except httpx.TransportError as exc:
            if passing_on:  # the caller's own failure, not the stream's: never retried
                raise
            failure = f"{type(exc).__name__}: {exc}"
            if answer.passed_on:
                raise ModelUnavailable(
                    f"{self.backend} {self.model}: the stream broke after its answer began ({failure})"
                ) from exc
            raise _Retryable(failure) from exc
        if not (chunks.done or chunks.finish_reason is not None):
            failure = "the stream ended before the answer did"
            if answer.passed_on:
                raise ModelUnavailable(f"{self.backend} {self.model}: {failure}, after its answer began")
            raise _Retryable(failure)
        return chunks.completion(self.model, self.backend)

    def _read_chunk(self, data: str, chunks: _Chunks, answer: AnswerStream) -> str:
        """The chunk's piece of text (empty if none), with the rest it says added to `chunks`."""
        try:
            chunk = json.loads(data)
            if not isinstance(chunk, dict):
                raise TypeError(f"a chunk is a JSON object, not {type(chunk).__name__}")
            error = chunk.get("error")
            chunks.model = chunk.get("model") or chunks.model
            if chunk.get("usage"):
                chunks.usage = chunk["usage"]
            choices = chunk.get("choices") or [{}]
            delta = choices[0].get("delta") or {}
            for call in delta.get("tool_calls") or []:
                answer.began()
                chunks.add_tool_call_delta(call)
            piece = delta.get("content")
            if choices[0].get("finish_reason") is not None:
                chunks.finish_reason = str(choices[0]["finish_reason"])
        except (ValueError, LookupError, TypeError, AttributeError) as exc:
            raise ModelError(f"{self.backend} {self.model}: unexpected stream chunk {data[:500]}") from exc
        if error is not None:
            raise ModelError(f"{self.backend} {self.model}: the server ended the stream: {str(error)[:500]}")
        if not isinstance(piece, str):
            return ""
        chunks.text.append(piece)
        return piece

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


class _Retryable(Exception):
    """An attempt's failure that another attempt may not have (transport errors, 429, 5xx)."""

    def __init__(self, failure: str, retry_after: float | None = None) -> None:
        super().__init__(failure)
        self.failure = failure
        self.retry_after = retry_after


@dataclass
class _PartialToolCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Chunks:
    """A streamed answer as its chunks so far make it."""

    text: list[str] = field(default_factory=list)
    tool_calls: dict[int, _PartialToolCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    done: bool = False
    """The server said the stream is complete (`data: [DONE]`)."""

    def add_tool_call_delta(self, delta: dict[str, Any]) -> None:
        """A call's first delta names it; the ones after add to its arguments' JSON text."""
        call = self.tool_calls.setdefault(int(delta.get("index") or 0), _PartialToolCall())
        call.id = call.id or str(delta.get("id") or "")
        function = delta.get("function") or {}
        call.name = call.name or str(function.get("name") or "")
        arguments = function.get("arguments")
        if arguments is not None:
            # Some servers send the arguments as an object rather than its JSON text.
            call.arguments.append(arguments if isinstance(arguments, str) else json.dumps(arguments))

    def completion(self, model: str, backend: str) -> Completion:
        calls = [
            ModelToolCall(id=call.id, name=call.name, arguments="".join(call.arguments) or "{}")
            for _, call in sorted(self.tool_calls.items())
        ]
        return Completion(
            text="".join(self.text),
            model=self.model or model,
            backend=backend,
            usage=Usage(
                prompt_tokens=self.usage.get("prompt_tokens") or 0,
                completion_tokens=self.usage.get("completion_tokens") or 0,
            ),
            finish_reason=self.finish_reason,
            tool_calls=calls,
        )


async def _server_sent_data(response: httpx.Response) -> AsyncIterator[str]:
    """The `data` of each server-sent event (its `data:` lines joined by newlines); comments
    and other fields are left out."""
    lines: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if lines:
                yield "\n".join(lines)
                lines = []
            continue
        name, _, value = line.partition(":")
        if name == "data":
            lines.append(value.removeprefix(" "))
    if lines:
        yield "\n".join(lines)


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
