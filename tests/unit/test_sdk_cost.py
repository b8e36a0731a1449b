"""The cost tracker: every call's cost event goes out before the budget stops the run."""

from __future__ import annotations

from typing import Any

import pytest

from agora.core.messages import CostEvent
from agora.core.topics import Channel
from agora.llm import Usage
from agora.sdk import BudgetExceeded, ModelSpec, ModelTier
from agora.sdk.models import CostTracker

MODEL = ModelSpec(model_id="m", tier=ModelTier.BALANCED, input_usd_per_1k=1.0, output_usd_per_1k=2.0)


class Events:
    def __init__(self) -> None:
        self.sent: list[tuple[str, CostEvent, str | None]] = []

    async def publish(self, channel: Channel[Any], payload: Any, *, message_id: str | None = None) -> str:
        self.sent.append((channel.name, payload, message_id))
        return message_id or ""


async def test_the_call_that_passes_the_budget_is_announced_then_refused() -> None:
    events = Events()
    tracker = CostTracker("agent-1", "s-1", budget_usd=1.5, publisher=events)
    await tracker.record(Usage(prompt_tokens=1000, completion_tokens=0), step_name="a", model_spec=MODEL)
    with pytest.raises(BudgetExceeded) as refused:
        await tracker.record(
            Usage(prompt_tokens=1000, completion_tokens=500), step_name="b", model_spec=MODEL
        )
    assert refused.value.code == "BUDGET_EXCEEDED"
    assert [(topic, e.step_name, round(e.session_cost_usd, 9)) for topic, e, _ in events.sent] == [
        ("agora.cost.events", "a", 1.0),
        ("agora.cost.events", "b", 3.0),
    ]
    assert [message_id for *_, message_id in events.sent] == ["cost:agent-1:s-1:1", "cost:agent-1:s-1:2"]


async def test_the_summary_adds_up_by_model_and_step_and_says_what_is_left() -> None:
    tracker = CostTracker("agent-1", "s-1", budget_usd=1.0)
    await tracker.record(Usage(prompt_tokens=100, completion_tokens=50), step_name="a", model_spec=MODEL)
    summary = tracker.summary()
    assert summary.total_cost_usd == pytest.approx(0.2)
    assert summary.total_tokens == 150 and summary.by_model == {"m": pytest.approx(0.2)}
    assert [s.step_name for s in summary.by_step] == ["a"]
    assert summary.budget_remaining_usd == pytest.approx(0.8)


async def test_a_call_whose_estimate_would_pass_the_budget_is_refused_before_it_is_made() -> None:
    tracker = CostTracker("agent-1", "s-1", budget_usd=0.5)
    tracker.check_budget(0.5)
    with pytest.raises(BudgetExceeded, match="would pass the budget"):
        tracker.check_budget(0.6)
    CostTracker("agent-1", "s-1").check_budget(1e9)  # no budget: unlimited
