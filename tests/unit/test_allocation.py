"""The allocation pipeline over in-memory ports: award, rejection, fallback bids, spans."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

from agora.core.allocation import FALLBACK_SUCCESS_PROB, allocate, fallback_bid
from agora.core.limits import MAX_ITEMS, MAX_SKILL_TAG_CHARS, MAX_TASK_SKILLS
from agora.core.market import AllocationStatus, Bid, TaskSpec
from agora.core.messages import TaskRejected
from agora.core.models import CapabilityProfile
from agora.core.reputation import ReputationTracker
from agora.core.scoring import DISQUALIFIED, BidScorer

Behaviour = Callable[[CapabilityProfile, TaskSpec], Awaitable[Any]]


def profile(agent_id: str, cost_per_step: float = 0.001, max_steps: int = 10) -> CapabilityProfile:
    return CapabilityProfile(
        agent_id=agent_id,
        agent_name=agent_id.title(),
        skill_tags=["web_search"],
        cost_per_step_usd=cost_per_step,
        max_steps=max_steps,
    )


def spec(task_id: str = "t-1", **overrides: object) -> TaskSpec:
    return TaskSpec.model_validate(
        {"task_id": task_id, "description": "d", "required_skills": ["web_search"], **overrides}
    )


def answers(prob: float, cost: float = 0.005, **overrides: object) -> Behaviour:
    async def behave(p: CapabilityProfile, s: TaskSpec) -> Bid:
        data = {
            "task_id": s.task_id,
            "agent_id": p.agent_id,
            "self_reported_success_prob": prob,
            "estimated_cost_usd": cost,
            "estimated_steps": 3,
            **overrides,
        }
        return Bid.model_validate(data)

    return behave


async def hangs(p: CapabilityProfile, s: TaskSpec) -> Bid:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def raises(p: CapabilityProfile, s: TaskSpec) -> Bid:
    raise ConnectionError("sidecar unavailable")


async def unparseable(p: CapabilityProfile, s: TaskSpec) -> Bid:
    return Bid.model_validate_json('{"self_reported_success_prob": "very likely"}')


async def not_a_bid(p: CapabilityProfile, s: TaskSpec) -> Any:
    return {"self_reported_success_prob": 0.9}


class FakePorts:
    def __init__(self, behaviours: dict[str, Behaviour], filtered_out: list[str] | None = None) -> None:
        self.behaviours = behaviours
        self.filtered_out = filtered_out or []
        self.solicited: list[str] = []

    async def capable_agents(self, spec: TaskSpec) -> tuple[list[CapabilityProfile], list[str]]:
        return [profile(agent_id) for agent_id in self.behaviours], list(self.filtered_out)

    async def solicit_bid(self, profile: CapabilityProfile, spec: TaskSpec) -> Bid:
        self.solicited.append(profile.agent_id)
        result: Bid = await self.behaviours[profile.agent_id](profile, spec)
        return result


def new_scorer() -> tuple[BidScorer, ReputationTracker]:
    tracker = ReputationTracker()
    return BidScorer(tracker), tracker


async def test_the_best_bid_wins() -> None:
    scorer, _ = new_scorer()
    ports = FakePorts({"weak": answers(0.6), "strong": answers(0.9), "gated": answers(0.3)}, ["offline"])
    result = await allocate(spec(), ports, scorer)
    assert result.status is AllocationStatus.ALLOCATED
    assert result.winning_agent_id == "strong"
    assert result.winning_bid is not None
    assert result.winning_bid.agent_id == "strong"
    assert result.winning_score is not None
    assert result.winning_score == result.all_scores[0]
    assert [s.agent_id for s in result.all_scores] == ["strong", "weak", "gated"]
    assert result.all_scores[-1].final_score == DISQUALIFIED
    assert sorted(b.agent_id for b in result.all_bids) == ["gated", "strong", "weak"]
    assert result.capability_filtered_out == ["offline"]
    assert result.reject_reason is None


async def test_no_capable_agent_is_rejected_without_soliciting() -> None:
    scorer, _ = new_scorer()
    ports = FakePorts({}, ["a", "b"])
    result = await allocate(spec(required_skills=["web_search", "summarize"]), ports, scorer)
    assert result.status is AllocationStatus.REJECTED
    assert result.reject_reason is not None
    assert result.reject_reason.startswith("no capable agent for required skills [web_search, summarize]")
    assert result.capability_filtered_out == ["a", "b"]
    assert result.all_bids == []
    assert ports.solicited == []


async def test_the_largest_rejection_fits_its_announcement() -> None:
    """Every required skill at its longest, and more agents filtered out than a result names."""
    scorer, _ = new_scorer()
    skills = [f"{n:02d}" + "s" * (MAX_SKILL_TAG_CHARS - 2) for n in range(MAX_TASK_SKILLS)]
    ports = FakePorts({}, [f"agent-{n}" for n in range(MAX_ITEMS + 50)])
    result = await allocate(spec(required_skills=skills), ports, scorer)
    assert len(result.capability_filtered_out) == MAX_ITEMS
    assert result.reject_reason is not None
    rejected = TaskRejected(task_id=result.task_id, reason=result.reject_reason, result=result)
    TaskRejected.model_validate(rejected.model_dump(mode="json"))


async def test_all_bids_below_the_threshold_are_rejected_with_the_nearest_miss() -> None:
    scorer, _ = new_scorer()
    result = await allocate(spec(), FakePorts({"agent-x": answers(0.42), "agent-y": answers(0.3)}), scorer)
    assert result.status is AllocationStatus.REJECTED
    assert (
        result.reject_reason
        == "all 2 bids below min_success_threshold 0.5 (best calibrated 0.45 from agent-x)"
    )
    assert len(result.all_scores) == 2
    assert result.winning_agent_id is None


async def test_all_bids_over_budget_are_rejected_with_the_cheapest() -> None:
    scorer, _ = new_scorer()
    ports = FakePorts({"dear": answers(0.9, cost=0.5), "cheaper": answers(0.9, cost=0.2)})
    result = await allocate(spec(budget_usd=0.1), ports, scorer)
    assert result.status is AllocationStatus.REJECTED
    assert result.reject_reason == "all 2 bids over budget $0.1 (cheapest $0.2 from cheaper)"


async def test_mixed_disqualifications_are_both_named() -> None:
    scorer, _ = new_scorer()
    ports = FakePorts({"dear": answers(0.9, cost=0.5), "unsure": answers(0.2, cost=0.01)})
    result = await allocate(spec(budget_usd=0.1), ports, scorer)
    assert result.reject_reason == (
        "no eligible bid among 2: 1 below min_success_threshold 0.5 (best calibrated 0.30 from unsure), "
        "1 over budget $0.1 (cheapest $0.5 from dear)"
    )


async def test_the_budget_is_a_hard_cap_even_for_the_strongest_bid() -> None:
    scorer, _ = new_scorer()
    ports = FakePorts({"dear": answers(0.99, cost=0.5), "cheap": answers(0.6, cost=0.05)})
    result = await allocate(spec(budget_usd=0.1), ports, scorer)
    assert result.winning_agent_id == "cheap"


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        (hangs, "no bid within 0.05s"),
        (raises, "bid solicitation failed: ConnectionError: sidecar unavailable"),
        (unparseable, "bid solicitation failed: ValidationError"),
        (answers(0.9, task_id="t-other"), "invalid bid: task_id 't-other' is not 't-1'"),
        (answers(0.9, agent_id="impostor"), "invalid bid: agent_id 'impostor' is not 'flaky'"),
        (not_a_bid, "invalid bid: expected a Bid, got dict"),
    ],
)
async def test_a_failed_bidder_competes_with_a_fallback_bid(behaviour: Behaviour, reason: str) -> None:
    scorer, _ = new_scorer()
    ports = FakePorts({"flaky": behaviour, "steady": answers(0.8)})
    result = await allocate(spec(), ports, scorer, bid_timeout_s=0.05)
    assert result.winning_agent_id == "steady"
    [fallback] = [b for b in result.all_bids if b.agent_id == "flaky"]
    assert fallback.fallback is True
    assert fallback.fallback_reason is not None
    assert fallback.fallback_reason.startswith(reason)
    assert fallback.self_reported_success_prob == FALLBACK_SUCCESS_PROB
    assert fallback.estimated_steps == 10
    assert fallback.estimated_cost_usd == pytest.approx(0.001 * 10)


async def test_a_fallback_bid_can_win_when_it_is_the_only_bid() -> None:
    scorer, _ = new_scorer()
    result = await allocate(spec(), FakePorts({"slow": hangs}), scorer, bid_timeout_s=0.01)
    assert result.status is AllocationStatus.ALLOCATED
    assert result.winning_bid is not None
    assert result.winning_bid.fallback is True


def test_fallback_bid_is_derived_from_the_profile() -> None:
    bid = fallback_bid(profile("a", cost_per_step=0.002, max_steps=7), spec(), "timeout")
    assert (bid.task_id, bid.agent_id, bid.estimated_steps) == ("t-1", "a", 7)
    assert bid.estimated_cost_usd == pytest.approx(0.014)
    assert (bid.fallback, bid.fallback_reason) == (True, "timeout")


async def test_bids_are_solicited_concurrently() -> None:
    barrier = asyncio.Barrier(3)

    async def waits_for_the_others(p: CapabilityProfile, s: TaskSpec) -> Bid:
        await barrier.wait()  # only passes when all three are being solicited at once
        bid: Bid = await answers(0.8)(p, s)
        return bid

    scorer, _ = new_scorer()
    ports = FakePorts(dict.fromkeys(("a", "b", "c"), waits_for_the_others))
    result = await allocate(spec(), ports, scorer, bid_timeout_s=1.0)
    assert not any(b.fallback for b in result.all_bids)


async def test_the_winning_bid_is_remembered_and_losing_bids_are_not() -> None:
    scorer, tracker = new_scorer()
    ports = FakePorts({"strong": answers(0.9), "weak": answers(0.6)})
    await allocate(spec(), ports, scorer)
    assert (await tracker.get("strong")).pending_self_reports == {"t-1": 0.9}
    assert (await tracker.get("weak")).pending_self_reports == {}


async def test_a_rejected_task_leaves_nothing_remembered() -> None:
    scorer, tracker = new_scorer()
    await allocate(spec(), FakePorts({"unsure": answers(0.2)}), scorer)
    assert (await tracker.get("unsure")).pending_self_reports == {}


async def test_duplicate_profiles_are_solicited_once() -> None:
    class Twice(FakePorts):
        async def capable_agents(self, spec: TaskSpec) -> tuple[list[CapabilityProfile], list[str]]:
            return [profile("a"), profile("a")], []

    scorer, _ = new_scorer()
    ports = Twice({"a": answers(0.8)})
    result = await allocate(spec(), ports, scorer)
    assert ports.solicited == ["a"]
    assert len(result.all_bids) == 1


async def test_a_non_positive_timeout_is_refused() -> None:
    scorer, _ = new_scorer()
    with pytest.raises(ValueError, match="bid_timeout_s"):
        await allocate(spec(), FakePorts({}), scorer, bid_timeout_s=0)


def spans_for(spans: InMemorySpanExporter, task_id: str) -> dict[str, list[ReadableSpan]]:
    finished = list(spans.get_finished_spans())
    [root] = [
        s for s in finished if s.name == "market.allocate" and (s.attributes or {}).get("task_id") == task_id
    ]
    assert root.context is not None
    trace_id = root.context.trace_id
    grouped: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        if span.context is not None and span.context.trace_id == trace_id:
            grouped.setdefault(span.name, []).append(span)
    return grouped


async def test_an_award_emits_the_reference_spans(spans: InMemorySpanExporter) -> None:
    scorer, _ = new_scorer()
    ports = FakePorts({"strong": answers(0.9), "flaky": raises})
    result = await allocate(spec("t-spans"), ports, scorer)
    grouped = spans_for(spans, "t-spans")

    [root] = grouped["market.allocate"]
    assert root.attributes is not None
    assert root.attributes["num_candidates"] == 2
    assert root.attributes["num_bids"] == 2
    assert root.attributes["agora.allocation.status"] == "ALLOCATED"

    solicitations = {s.attributes["agent_id"]: s for s in grouped["market.bid_solicitation"] if s.attributes}
    assert set(solicitations) == {"strong", "flaky"}
    assert solicitations["strong"].attributes == {"agent_id": "strong", "agora.bid.fallback": False}
    assert solicitations["flaky"].attributes is not None
    assert solicitations["flaky"].attributes["agora.bid.fallback"] is True
    assert root.context is not None
    for child in solicitations.values():
        assert child.parent is not None
        assert child.parent.span_id == root.context.span_id

    [award] = grouped["market.award"]
    assert award.parent is not None
    assert award.parent.span_id == root.context.span_id
    assert result.winning_score is not None
    assert award.attributes == {
        "winner_agent_id": "strong",
        "final_score": result.winning_score.final_score,
        "calibrated_success_prob": pytest.approx((4 * 0.9 + 1) / 6),
    }


async def test_a_rejection_emits_no_award_span(spans: InMemorySpanExporter) -> None:
    scorer, _ = new_scorer()
    result = await allocate(spec("t-rejected"), FakePorts({"unsure": answers(0.1)}), scorer)
    grouped = spans_for(spans, "t-rejected")
    assert "market.award" not in grouped
    [root] = grouped["market.allocate"]
    assert root.attributes is not None
    assert root.attributes["agora.allocation.status"] == "REJECTED"
    assert root.attributes["agora.allocation.reject_reason"] == result.reject_reason


async def test_an_injected_tracer_is_used(spans: InMemorySpanExporter) -> None:
    from opentelemetry import trace

    scorer, _ = new_scorer()
    tracer = trace.get_tracer("custom")
    await allocate(spec("t-custom"), FakePorts({"a": answers(0.9)}), scorer, tracer=tracer)
    [root] = spans_for(spans, "t-custom")["market.allocate"]
    assert root.instrumentation_scope is not None
    assert root.instrumentation_scope.name == "custom"


def test_unparseable_fixture_really_fails_to_parse() -> None:
    with pytest.raises(ValidationError):
        asyncio.run(unparseable(profile("a"), spec()))
