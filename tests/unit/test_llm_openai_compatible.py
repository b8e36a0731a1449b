"""OpenAICompatibleClient against a small local HTTP server standing in for the vendor."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import BaseModel, Field

from agora.llm import ChatMessage, ModelError, ModelUnavailable, OpenAICompatibleClient, complete_json


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


class StubVendor:
    """Answers POSTs with the queued replies (then with the last one), recording requests."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"null")
                stub.requests.append(
                    Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                reply = stub.replies.pop(0) if len(stub.replies) > 1 else stub.replies[0]
                payload = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                for name, value in {"content-type": "application/json", **reply.headers}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def answer(self, content: str, **extra: Any) -> Reply:
        return Reply(
            body={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": "vendor-model-2025",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
                **extra,
            }
        )


@pytest.fixture
def vendor() -> Iterator[StubVendor]:
    stub = StubVendor()
    stub.thread.start()
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


def client_for(vendor: StubVendor, **kwargs: Any) -> OpenAICompatibleClient:
    options: dict[str, Any] = {"backoff_s": 0.01, "timeout_s": 5, **kwargs}
    return OpenAICompatibleClient(vendor.base_url, "sk-test-key", "gpt-test", **options)


MESSAGES = [ChatMessage(role="system", content="Be terse."), ChatMessage(role="user", content="Hello there")]


class Answer(BaseModel):
    answer: str
    confidence: float = Field(ge=0, le=1)


async def test_request_shape_bearer_header_and_usage(vendor: StubVendor) -> None:
    vendor.replies = [vendor.answer("General Kenobi")]
    client = client_for(vendor)
    try:
        completion = await client.complete(MESSAGES, temperature=0.2, max_tokens=64)
    finally:
        await client.aclose()
    [request] = vendor.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test-key"
    assert request.body == {
        "model": "gpt-test",
        "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hello there"}],
        "temperature": 0.2,
        "max_tokens": 64,
    }
    assert completion.text == "General Kenobi"
    assert completion.model == "vendor-model-2025" and completion.backend == "openai-compatible"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (12, 5)


async def test_no_api_key_sends_no_authorization(vendor: StubVendor) -> None:
    vendor.replies = [vendor.answer("hi", usage=None)]
    client = OpenAICompatibleClient(vendor.base_url + "/", None, "local-model")
    try:
        completion = await client.complete(MESSAGES)
    finally:
        await client.aclose()
    assert "authorization" not in vendor.requests[0].headers
    assert completion.usage.prompt_tokens == 0 and completion.model == "vendor-model-2025"


async def test_json_schema_becomes_response_format(vendor: StubVendor) -> None:
    vendor.replies = [vendor.answer('```json\n{"answer": "42", "confidence": 0.9}\n```')]
    client = client_for(vendor)
    try:
        answer, _ = await complete_json(client, MESSAGES, Answer)
    finally:
        await client.aclose()
    assert answer == Answer(answer="42", confidence=0.9)
    assert vendor.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Answer", "schema": Answer.model_json_schema()},
    }


async def test_retries_500_and_429_then_succeeds(vendor: StubVendor) -> None:
    vendor.replies = [
        Reply(500, {"error": {"message": "boom"}}),
        Reply(429, {"error": {"message": "slow down"}}, {"retry-after": "0"}),
        Reply(503, {"error": {"message": "overloaded"}}),
        vendor.answer("finally"),
    ]
    client = client_for(vendor, max_retries=3)
    try:
        completion = await client.complete(MESSAGES)
    finally:
        await client.aclose()
    assert completion.text == "finally"
    assert len(vendor.requests) == 4


async def test_retry_after_is_honoured(vendor: StubVendor) -> None:
    vendor.replies = [Reply(429, {}, {"retry-after": "0.3"}), vendor.answer("ok")]
    client = client_for(vendor)
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await client.complete(MESSAGES)
        waited = loop.time() - started
    finally:
        await client.aclose()
    assert waited >= 0.3


async def test_gives_up_with_model_unavailable(vendor: StubVendor) -> None:
    vendor.replies = [Reply(502, {"error": "bad gateway"})]
    client = client_for(vendor, max_retries=2)
    try:
        with pytest.raises(ModelUnavailable, match="3 attempt"):
            await client.complete(MESSAGES)
    finally:
        await client.aclose()
    assert len(vendor.requests) == 3


async def test_client_errors_are_not_retried(vendor: StubVendor) -> None:
    vendor.replies = [Reply(401, {"error": {"message": "invalid api key"}})]
    client = client_for(vendor)
    try:
        with pytest.raises(ModelError, match="401") as raised:
            await client.complete(MESSAGES)
    finally:
        await client.aclose()
    assert not isinstance(raised.value, ModelUnavailable)
    assert len(vendor.requests) == 1


async def test_unreachable_endpoint_is_unavailable() -> None:
    stub = StubVendor()  # bound but never served: then closed, so the port refuses connections
    stub.server.server_close()
    client = OpenAICompatibleClient(stub.base_url, None, "m", max_retries=1, backoff_s=0.01)
    try:
        with pytest.raises(ModelUnavailable, match="ConnectError"):
            await client.complete(MESSAGES)
    finally:
        await client.aclose()
