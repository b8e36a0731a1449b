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
import logging
import re
import time
from typing import Any

import httpx

from agora.llm.client import ChatMessage, Completion, ModelError, ModelUnavailable, TracedModelClient, Usage

log = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 60.0
"""Longest `Retry-After` honoured; a vendor asking for more is treated as unavailable."""


DEFAULT_MAX_TOKENS = 512
"""The output limit of a call whose caller sets none: without one, a model writes until its
context is full (a small model may never stop on its own)."""


class OpenAICompatibleClient(TracedModelClient):
    """`max_retries` is the number of retries after the first attempt; `backoff_s` the first
    delay (doubled per retry); `max_tokens` the output limit of calls that name none."""

    backend = "openai-compatible"

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
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
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
    ) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [m.model_dump() for m in messages],
            "temperature": temperature,
            "max_tokens": max_tokens if max_tokens is not None else self.max_tokens,
        }
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
            content = choice["message"]["content"]
        except (ValueError, LookupError, TypeError) as exc:
            raise ModelError(
                f"{self.backend} {self.model}: unexpected response {response.text[:500]}"
            ) from exc
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
