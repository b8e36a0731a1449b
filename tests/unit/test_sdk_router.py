"""The model router: a step's tier from the first matching rule (BALANCED otherwise), and a
failed call goes down the fallback chain."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agora.llm import ChatMessage, ModelUnavailable, OfflineModelClient
from agora.sdk import ModelRouter, ModelSpec, ModelTier, RoutingRule

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
