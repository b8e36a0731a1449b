"""The deterministic offline model: same input, same answer; schema-conforming JSON; and the
knobs tests use to simulate slow and failing models."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel, Field

from agora.llm import (
    ChatMessage,
    ModelOutputInvalid,
    ModelSettings,
    ModelUnavailable,
    OfflineModelClient,
    OpenAICompatibleClient,
    complete_json,
    extract_json_object,
    model_client_from_settings,
)
from agora.llm.offline import SchemaValueGenerator


def conversation(task: str) -> list[ChatMessage]:
    return [
        ChatMessage(role="system", content="You are a bidding agent in a task market."),
        ChatMessage(role="user", content=task),
    ]


class Tier(StrEnum):
    BRONZE = "bronze"
    SILVER = "silver"
    GOLD = "gold"


class Address(BaseModel):
    city: str = Field(min_length=3, max_length=12)
    postcode: str = Field(min_length=20)


class Bid(BaseModel):
    agent_id: str
    price: float = Field(gt=0, le=1000)
    confidence: float = Field(ge=0, le=1)
    eta_minutes: int = Field(ge=5, lt=60)
    priority: int = Field(gt=-10, lt=-2)
    attempts: int
    discount: float
    accepted: bool
    stance: Literal["agree", "disagree", "abstain"]
    tier: Tier
    tags: list[str] = Field(min_length=2, max_length=4)
    address: Address
    backup: Address | None = None
    note: str | None
    scores: dict[str, float]
    pair: tuple[int, str]
    ids: set[int]
    due: datetime
    request_id: UUID
    step: float = Field(multiple_of=0.25, ge=1, le=3)


class Node(BaseModel):
    label: str
    children: list[Node] = []
    parent: Node | None = None


class Verdict(BaseModel):
    winner: str
    margin: int = Field(ge=0, le=10)


async def test_same_messages_same_answer_and_different_messages_differ() -> None:
    client = OfflineModelClient()
    first = await client.complete(conversation("Summarise the market"))
    again = await OfflineModelClient().complete(conversation("Summarise the market"))
    other = await client.complete(conversation("Summarise the registry"))
    assert first == again
    assert first.text != other.text
    assert first.backend == "offline" and first.model == "offline-deterministic"
    assert "Summarise the market" in first.text


async def test_usage_counts_words() -> None:
    completion = await OfflineModelClient().complete([ChatMessage(role="user", content="one two three")])
    assert completion.usage.prompt_tokens == 3
    assert completion.usage.completion_tokens == len(completion.text.split())


def test_answers_do_not_depend_on_the_process_hash_seed() -> None:
    """sha256, not hash(): two interpreters with different PYTHONHASHSEEDs agree."""
    script = (
        "import asyncio, sys\n"
        "from agora.llm import ChatMessage, OfflineModelClient\n"
        "from tests.unit.test_llm_offline import Bid\n"
        "m = [ChatMessage(role='user', content='stable?')]\n"
        "c = OfflineModelClient()\n"
        "print(asyncio.run(c.complete(m)).text)\n"
        "print(asyncio.run(c.complete(m, json_schema=Bid.model_json_schema())).text)\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=Path(__file__).parents[2],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


async def test_schema_answers_validate_against_nested_pydantic_models() -> None:
    schema = Bid.model_json_schema()
    assert "$defs" in schema  # nested models come as $refs, as pydantic emits them
    client = OfflineModelClient()
    bids = []
    for i in range(200):
        completion = await client.complete(conversation(f"task {i}"), json_schema=schema)
        bids.append(Bid.model_validate_json(completion.text, strict=True))
    bid = bids[0]
    assert len(bid.address.postcode) >= 20 and 3 <= len(bid.address.city) <= 12
    assert len(bid.scores) == 2 and bid.backup is not None  # optional values are filled in

    # Numbers spread over their allowed range, unbounded ones over a small positive range.
    prices = [b.price for b in bids]
    assert min(prices) < 200 and max(prices) > 800
    etas = {b.eta_minutes for b in bids}
    assert etas <= set(range(5, 60)) and len(etas) > 45
    assert {b.priority for b in bids} == set(range(-9, -2))
    assert all(1 <= b.attempts <= 100 for b in bids) and len({b.attempts for b in bids}) > 50
    assert all(0 < b.discount <= 100 for b in bids)
    assert {b.step for b in bids} == {1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0}
    assert {b.stance for b in bids} == {"agree", "disagree", "abstain"}
    assert set(Tier) == {b.tier for b in bids}
    assert {b.accepted for b in bids} == {True, False}
    assert len({b.request_id for b in bids}) == 200


@pytest.mark.parametrize(
    "schema",
    [
        {
            "type": "object",
            "properties": {"x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1e-6}},
        },
        {"type": "integer", "minimum": 3, "maximum": 3},
        {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "maxItems": 2},
        {"type": ["string", "null"], "maxLength": 0},
        {"type": "object", "properties": {"c": {"const": "fixed"}}, "required": ["c"]},
        {"allOf": [{"type": "object", "properties": {"a": {"type": "integer", "maximum": -500}}}]},
    ],
)
def test_schema_edge_cases(schema: dict[str, Any]) -> None:
    for i in range(30):
        value = SchemaValueGenerator(schema, f"seed {i}".encode()).generate()
        _assert_conforms(value, schema)


def _assert_conforms(value: Any, schema: dict[str, Any]) -> None:
    """The few checks the edge-case schemas above need (no JSON Schema library is pinned)."""
    if "allOf" in schema:
        for part in schema["allOf"]:
            _assert_conforms(value, part)
        return
    if "const" in schema:
        assert value == schema["const"]
        return
    kind = schema.get("type")
    if kind == "object":
        assert isinstance(value, dict)
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                _assert_conforms(value[name], sub)
        assert set(schema.get("required", [])) <= set(value)
    elif kind == "array":
        assert isinstance(value, list) and len(value) <= schema.get("maxItems", len(value))
        if schema.get("uniqueItems"):
            assert len({json.dumps(v) for v in value}) == len(value)
    elif kind == ["string", "null"]:
        assert value is None or len(value) <= schema["maxLength"]
    elif kind in ("integer", "number"):
        assert isinstance(value, int if kind == "integer" else (int, float))
        assert value >= schema.get("minimum", value) and value <= schema.get("maximum", value)
        assert value > schema.get("exclusiveMinimum", value - 1) and value < schema.get(
            "exclusiveMaximum", value + 1
        )


async def test_recursive_models_terminate() -> None:
    completion = await OfflineModelClient().complete(
        conversation("tree"), json_schema=Node.model_json_schema()
    )
    node = Node.model_validate_json(completion.text, strict=True)
    depth, cursor = 0, node
    while cursor.parent is not None:
        depth, cursor = depth + 1, cursor.parent
    assert depth < 10


async def test_complete_json_returns_the_validated_model() -> None:
    client = OfflineModelClient()
    verdict, completion = await complete_json(client, conversation("who won?"), Verdict)
    assert isinstance(verdict, Verdict) and 0 <= verdict.margin <= 10
    assert completion.backend == "offline"
    assert (await complete_json(client, conversation("who won?"), Verdict))[0] == verdict


@pytest.mark.parametrize(
    "answer",
    [
        '{"winner": "a", "margin": 3}',
        'Sure! Here is the verdict:\n```json\n{"winner": "a", "margin": 3}\n```\nAnything else?',
        'Reasoning {not json} then {"winner": "a", "margin": 3} and {"other": 1}',
    ],
)
async def test_complete_json_tolerates_fences_and_prose(answer: str) -> None:
    client = OfflineModelClient(overrides=lambda messages: answer)
    verdict, _ = await complete_json(client, conversation("who won?"), Verdict)
    assert verdict == Verdict(winner="a", margin=3)


@pytest.mark.parametrize("answer", ["I cannot decide.", '{"winner": "a", "margin": 11}', "[1, 2]"])
async def test_complete_json_rejects_invalid_answers(answer: str) -> None:
    client = OfflineModelClient(overrides=lambda messages: answer)
    with pytest.raises(ModelOutputInvalid) as raised:
        await complete_json(client, conversation("who won?"), Verdict)
    assert raised.value.text == answer
    assert raised.value.error is not None


def test_extract_json_object_needs_an_object() -> None:
    with pytest.raises(ValueError):
        extract_json_object("no braces here")


async def test_overrides_apply_only_where_they_answer() -> None:
    def override(messages: Any) -> str | None:
        return "forced" if "force" in messages[-1].content else None

    client = OfflineModelClient(overrides=override)
    assert (await client.complete(conversation("please force it"))).text == "forced"
    assert (await client.complete(conversation("leave it"))).text != "forced"


async def test_latency_makes_timeouts_testable() -> None:
    client = OfflineModelClient(latency_s=0.5)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(client.complete(conversation("slow")), timeout=0.05)
    fast = await asyncio.wait_for(OfflineModelClient(latency_s=0.01).complete(conversation("slow")), 1)
    assert fast.text


async def test_fail_every_nth_call(spans: InMemorySpanExporter) -> None:
    client = OfflineModelClient(fail_every=3)
    outcomes = []
    for _ in range(6):
        try:
            await client.complete(conversation("flaky"))
            outcomes.append("ok")
        except ModelUnavailable:
            outcomes.append("unavailable")
    assert outcomes == ["ok", "ok", "unavailable"] * 2
    failed = [s for s in spans.get_finished_spans() if s.status.status_code is StatusCode.ERROR]
    assert len(failed) == 2
    assert failed[0].attributes is not None and failed[0].attributes["error.type"] == "ModelUnavailable"


async def test_every_call_emits_a_genai_client_span(spans: InMemorySpanExporter) -> None:
    completion = await OfflineModelClient().complete(conversation("trace me"), max_tokens=50)
    [span] = [s for s in spans.get_finished_spans() if s.name == "chat offline-deterministic"]
    assert span.kind is SpanKind.CLIENT
    assert (
        dict(span.attributes or {}).items()
        >= {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "offline",
            "gen_ai.provider.name": "offline",
            "gen_ai.request.model": "offline-deterministic",
            "gen_ai.request.max_tokens": 50,
            "gen_ai.usage.input_tokens": completion.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": completion.usage.completion_tokens,
        }.items()
    )


async def test_factory_builds_the_configured_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AGORA_MODEL_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)
    assert isinstance(model_client_from_settings(ModelSettings(), None), OfflineModelClient)
    with pytest.raises(ValueError, match="DaprSidecar"):
        model_client_from_settings(ModelSettings(backend="dapr"), None)
    with pytest.raises(ValueError, match="AGORA_MODEL_OPENAI_BASE_URL"):
        model_client_from_settings(ModelSettings(backend="openai", model="gpt-x"), None)
    with pytest.raises(ValueError, match="AGORA_MODEL_MODEL"):
        model_client_from_settings(ModelSettings(backend="openai", openai_base_url="http://x/v1"), None)

    monkeypatch.setenv("AGORA_MODEL_BACKEND", "openai")
    monkeypatch.setenv("AGORA_MODEL_MODEL", "gpt-x")
    monkeypatch.setenv("AGORA_MODEL_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = ModelSettings()
    assert settings.openai_api_key == "sk-test"
    client = model_client_from_settings(settings, None)
    assert isinstance(client, OpenAICompatibleClient) and client.backend == "openai-compatible"
    await client.aclose()
