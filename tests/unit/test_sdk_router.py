"""The model router: a step's tier from the first matching rule (BALANCED otherwise), a failed
call goes down the fallback chain, and every model call's span carries the GenAI attributes and
the call's cost at its model's prices."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agora.llm import ChatMessage, ModelUnavailable, OfflineModelClient
from agora.sdk import ModelRouter, ModelSpec, ModelTier
from agora.sdk.models import RoutingRule
from agora.sdk.runner import AgentDefinition, AgentRunner
from agora.sdk.tools import ToolExecutor

FAST = ModelSpec(model_id="small", tier=ModelTier.FAST, input_usd_per_1k=0.1)
BALANCED = ModelSpec(model_id="medium", tier=ModelTier.BALANCED, input_usd_per_1k=1.0)
POWERFUL = ModelSpec(model_id="large", tier=ModelTier.POWERFUL, input_usd_per_1k=10.0)
HELLO = [ChatMessage(role="user", content="hello")]


def down(_: Sequence[ChatMessage]) -> str | None:
    raise ModelUnavailable("vendor down")


def router(*, failing: frozenset[str] = frozenset(), rules: list[RoutingRule] | None = None) -> ModelRouter:
    clients = {
        spec.model_id: OfflineModelClient(
            model=spec.model_id, overrides=down if spec.model_id in failing else None
        )
        for spec in (FAST, BALANCED, POWERFUL)
    }
    return ModelRouter([FAST, BALANCED, POWERFUL], clients, routing_rules=rules)


def test_the_first_rule_whose_substring_the_step_contains_wins() -> None:
    rules = [
        RoutingRule(contains="classify", tier=ModelTier.FAST),
        RoutingRule(contains="class", tier=ModelTier.POWERFUL),
    ]
    chosen = router(rules=rules)
    assert chosen.tier_for("agent.classify") is ModelTier.FAST
    assert chosen.tier_for("agent.subclass") is ModelTier.POWERFUL
    assert chosen.tier_for("agent.step") is ModelTier.BALANCED


async def test_a_step_goes_to_its_tier_s_model() -> None:
    routed = await router(rules=[RoutingRule(contains="route", tier=ModelTier.FAST)]).complete(
        "a.route", HELLO
    )
    assert routed.model == FAST and routed.attempts == 1


async def test_a_failed_call_goes_down_the_default_chain_balanced_fast_powerful() -> None:
    routed = await router(failing=frozenset({"medium"})).complete("a.step", HELLO)
    assert routed.model == FAST and routed.attempts == 2
    routed = await router(failing=frozenset({"medium", "small"})).complete("a.step", HELLO)
    assert routed.model == POWERFUL and routed.attempts == 3


async def test_when_every_model_fails_the_last_error_is_raised() -> None:
    with pytest.raises(ModelUnavailable):
        await router(failing=frozenset({"small", "medium", "large"})).complete("a.step", HELLO)


def test_a_model_without_a_client_is_refused() -> None:
    with pytest.raises(ValueError, match="no client for model"):
        ModelRouter([FAST], {})


def test_cost_is_priced_per_thousand_tokens() -> None:
    spec = ModelSpec(model_id="m", tier=ModelTier.FAST, input_usd_per_1k=2.0, output_usd_per_1k=4.0)
    assert spec.cost_usd(500, 250) == pytest.approx(2.0)


PRICED = ModelSpec(model_id="priced", tier=ModelTier.BALANCED, input_usd_per_1k=3.0, output_usd_per_1k=15.0)
CHEAP = ModelSpec(model_id="cheap", tier=ModelTier.FAST, input_usd_per_1k=0.25, output_usd_per_1k=1.25)


def chat_spans(spans: InMemorySpanExporter) -> list[ReadableSpan]:
    return [
        s for s in spans.get_finished_spans() if (s.attributes or {}).get("gen_ai.operation.name") == "chat"
    ]


def cost_of(span: ReadableSpan) -> float:
    cost = (span.attributes or {})["agora.cost_usd"]
    assert isinstance(cost, float), f"{span.name}: agora.cost_usd is {cost!r}"
    return cost


async def test_a_routed_call_s_span_carries_the_genai_attributes_and_its_cost(
    spans: InMemorySpanExporter,
) -> None:
    chosen = ModelRouter([PRICED], {"priced": OfflineModelClient(model="priced")})
    routed = await chosen.complete("a.step", HELLO)

    [span] = chat_spans(spans)
    usage = routed.completion.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert span.name == "chat priced"
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == "priced"
    assert attributes["gen_ai.usage.input_tokens"] == usage.prompt_tokens
    assert attributes["gen_ai.usage.output_tokens"] == usage.completion_tokens
    assert attributes["agora.cost_usd"] == pytest.approx(
        (usage.prompt_tokens * 3.0 + usage.completion_tokens * 15.0) / 1000
    )
    assert attributes["agora.cost_usd"] == PRICED.cost_usd(usage.prompt_tokens, usage.completion_tokens)


async def test_each_attempt_down_the_chain_is_priced_at_its_own_model(spans: InMemorySpanExporter) -> None:
    clients = {
        "priced": OfflineModelClient(model="priced", overrides=down),
        "cheap": OfflineModelClient(model="cheap"),
    }
    routed = await ModelRouter([PRICED, CHEAP], clients).complete("a.step", HELLO)
    assert routed.model == CHEAP

    failed, answered = chat_spans(spans)
    assert failed.name == "chat priced" and failed.status.status_code is StatusCode.ERROR
    assert "agora.cost_usd" not in (failed.attributes or {}), "a failed call costs nothing"
    usage = routed.completion.usage
    assert (answered.attributes or {})["agora.cost_usd"] == CHEAP.cost_usd(
        usage.prompt_tokens, usage.completion_tokens
    )


async def test_a_call_outside_the_router_has_no_price(spans: InMemorySpanExporter) -> None:
    client = OfflineModelClient(model="priced")
    await ModelRouter([PRICED], {"priced": client}).complete("a.step", HELLO)
    await client.complete(HELLO)  # the router's price does not outlive its call

    routed, direct = chat_spans(spans)
    assert "agora.cost_usd" in (routed.attributes or {})
    assert "agora.cost_usd" not in (direct.attributes or {})
    assert (direct.attributes or {})["gen_ai.usage.input_tokens"] == (routed.attributes or {})[
        "gen_ai.usage.input_tokens"
    ]


async def test_a_run_s_model_spans_add_up_to_the_run_s_cost(spans: InMemorySpanExporter) -> None:
    steps: list[dict[str, Any]] = [
        {"thought": "think", "action": "tool", "tool": "missing", "arguments": {}},
        {"thought": "done", "action": "final", "answer": "42", "confidence": 0.9},
    ]
    turns = iter(steps)

    def next_turn(_: Sequence[ChatMessage]) -> str:
        return json.dumps(next(turns))

    chosen = ModelRouter([PRICED], {"priced": OfflineModelClient(model="priced", overrides=next_turn)})
    result = await AgentRunner(chosen, ToolExecutor([])).run(
        AgentDefinition(name="solver"), "answer", session_id="s-9"
    )

    calls = chat_spans(spans)
    [run] = [s for s in spans.get_finished_spans() if s.name == "invoke_agent solver"]
    assert len(calls) == 2
    assert all(call.parent is not None and call.parent.span_id == run.context.span_id for call in calls)
    costs = [cost_of(call) for call in calls]
    assert all(cost > 0 for cost in costs)
    assert sum(costs) == pytest.approx(result.cost.total_cost_usd)
    assert cost_of(run) == pytest.approx(sum(costs))
