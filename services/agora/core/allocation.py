"""The market allocation pipeline: capability filter → bid solicitation → scoring → award.

A pure async function over injected ports, so it runs the same against Dapr-backed services
and in-memory fakes. A bidder that times out, fails, or answers with a bid that is not its own
for this task still competes, with a `fallback_bid` derived from its capability profile: one
slow agent must not stall or sink the allocation, and its profile is a fair worst-case guess.

OpenTelemetry spans (tracer "agora.market" unless one is injected):
`market.allocate` (task_id, num_candidates, num_bids; status and reject reason at the end),
a child `market.bid_solicitation` per agent (agent_id, agora.bid.fallback[, reason]) and
`market.award` (winner_agent_id, final_score, calibrated_success_prob) when a bid wins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from opentelemetry import trace

from agora.core.limits import MAX_ITEMS
from agora.core.market import AllocationResult, AllocationStatus, Bid, BidScore, TaskSpec
from agora.core.models import CapabilityProfile
from agora.core.scoring import BidScorer, over_budget

TRACER_NAME = "agora.market"

FALLBACK_SUCCESS_PROB = 0.5
"""Self-reported success of a fallback bid: no claim either way (the same neutral prior a new
agent's reputation gets). Calibration still applies, so at the default threshold 0.5 a fallback
competes only for an agent whose record says it under-reports rather than over-reports."""


class AllocationPorts(Protocol):
    """What the pipeline needs from the outside world."""

    async def capable_agents(self, spec: TaskSpec) -> tuple[list[CapabilityProfile], list[str]]:
        """Profiles that may bid (capability-first filter) and the ids filtered out."""
        ...

    async def solicit_bid(self, profile: CapabilityProfile, spec: TaskSpec) -> Bid:
        """Ask one agent for a bid; may raise or never return."""
        ...


@runtime_checkable
class BidLedger(Protocol):
    """Where bids are remembered so outcomes can calibrate the bidders (`ReputationTracker`)."""

    def record_bid(self, bid: Bid) -> None: ...

    def forget_bids(self, task_id: str, agent_ids: Sequence[str]) -> None: ...


def fallback_bid(profile: CapabilityProfile, spec: TaskSpec, reason: str) -> Bid:
    """A bid built from the agent's capability profile: its full step allowance at its step price."""
    return Bid(
        task_id=spec.task_id,
        agent_id=profile.agent_id,
        self_reported_success_prob=FALLBACK_SUCCESS_PROB,
        estimated_cost_usd=profile.cost_per_step_usd * profile.max_steps,
        estimated_steps=profile.max_steps,
        rationale="fallback bid derived from the capability profile",
        fallback=True,
        fallback_reason=reason,
    )


def _checked(answer: object, profile: CapabilityProfile, spec: TaskSpec) -> Bid | str:
    """The answer when it is this agent's bid for this task, else why it is not."""
    if not isinstance(answer, Bid):
        return f"invalid bid: expected a Bid, got {type(answer).__name__}"
    if answer.task_id != spec.task_id:
        return f"invalid bid: task_id {answer.task_id!r} is not {spec.task_id!r}"
    if answer.agent_id != profile.agent_id:
        return f"invalid bid: agent_id {answer.agent_id!r} is not {profile.agent_id!r}"
    return answer


async def _solicit(
    ports: AllocationPorts, profile: CapabilityProfile, spec: TaskSpec, timeout_s: float, tracer: trace.Tracer
) -> Bid:
    with tracer.start_as_current_span("market.bid_solicitation") as span:
        span.set_attribute("agent_id", profile.agent_id)
        answer: Bid | str
        try:
            async with asyncio.timeout(timeout_s):
                offered = await ports.solicit_bid(profile, spec)
            answer = _checked(offered, profile, spec)
        except TimeoutError:
            answer = f"no bid within {timeout_s:g}s"
        except Exception as error:  # any failure of one bidder is that bidder's, not the market's
            answer = f"bid solicitation failed: {type(error).__name__}: {error}"
        if isinstance(answer, Bid):
            span.set_attribute("agora.bid.fallback", answer.fallback)
            return answer
        span.set_attribute("agora.bid.fallback", True)
        span.set_attribute("agora.bid.fallback_reason", answer)
        return fallback_bid(profile, spec, answer)


def _unique(profiles: Sequence[CapabilityProfile]) -> list[CapabilityProfile]:
    seen: set[str] = set()
    unique = []
    for profile in profiles:
        if profile.agent_id not in seen:
            seen.add(profile.agent_id)
            unique.append(profile)
    return unique


def _reject_reason(spec: TaskSpec, bids: Sequence[Bid], scores: Sequence[BidScore]) -> str:
    """Explain why no bid was eligible: which rule excluded how many, with the nearest miss."""
    costly = [bid for bid in bids if over_budget(bid, spec)]
    low = [s for s in scores if s.calibrated_success_prob < spec.min_success_threshold]
    parts: list[tuple[int, str]] = []
    if low:
        best = max(low, key=lambda s: (s.calibrated_success_prob, s.agent_id))
        parts.append(
            (
                len(low),
                f"below min_success_threshold {spec.min_success_threshold:g} "
                f"(best calibrated {best.calibrated_success_prob:.2f} from {best.agent_id})",
            )
        )
    if costly:
        cheapest = min(costly, key=lambda b: (b.estimated_cost_usd, b.agent_id))
        parts.append(
            (
                len(costly),
                f"over budget ${spec.budget_usd:g} "
                f"(cheapest ${cheapest.estimated_cost_usd:g} from {cheapest.agent_id})",
            )
        )
    if not parts:  # only reachable with a ReputationSource that yields negative scores
        return f"no eligible bid among {len(scores)}: every final score is negative"
    if len(parts) == 1 and parts[0][0] == len(scores):
        return f"all {len(scores)} bids {parts[0][1]}"
    return f"no eligible bid among {len(scores)}: " + ", ".join(f"{count} {text}" for count, text in parts)


async def allocate(
    spec: TaskSpec,
    ports: AllocationPorts,
    scorer: BidScorer,
    *,
    bid_timeout_s: float = 10.0,
    tracer: trace.Tracer | None = None,
    ledger: BidLedger | None = None,
) -> AllocationResult:
    """Run one allocation and return its result (ALLOCATED with a winner, or REJECTED with why).

    Every bid is recorded in `ledger` (default: the scorer's reputation tracker when it is one)
    so the winner's outcome can calibrate it; losing bids are forgotten again once the winner is
    known, since no outcome will ever arrive for them.
    """
    if bid_timeout_s <= 0:
        raise ValueError("bid_timeout_s must be positive")
    tracer = tracer or trace.get_tracer(TRACER_NAME)
    if ledger is None and isinstance(scorer.reputation_tracker, BidLedger):
        ledger = scorer.reputation_tracker
    with tracer.start_as_current_span("market.allocate") as span:
        span.set_attribute("task_id", spec.task_id)
        capable, filtered_out = await ports.capable_agents(spec)
        candidates = _unique(capable)
        span.set_attribute("num_candidates", len(candidates))
        if not candidates:
            span.set_attribute("num_bids", 0)
            reason = f"no capable agent for required skills [{', '.join(spec.required_skills)}]"
            if filtered_out:
                reason += f" ({len(filtered_out)} registered agents filtered out)"
            return _rejected(span, spec, reason, filtered_out=filtered_out)

        bids = list(
            await asyncio.gather(*(_solicit(ports, p, spec, bid_timeout_s, tracer) for p in candidates))
        )
        span.set_attribute("num_bids", len(bids))
        span.set_attribute("agora.num_fallback_bids", sum(bid.fallback for bid in bids))
        if ledger is not None:
            for bid in bids:
                ledger.record_bid(bid)
        scores = await scorer.score_all(bids, spec)
        winner = next((s for s in scores if s.final_score >= 0.0), None)
        if ledger is not None:
            losers = [b.agent_id for b in bids if winner is None or b.agent_id != winner.agent_id]
            ledger.forget_bids(spec.task_id, losers)
        if winner is None:
            return _rejected(
                span,
                spec,
                _reject_reason(spec, bids, scores),
                filtered_out=filtered_out,
                bids=bids,
                scores=scores,
            )

        winning_bid = next(b for b in bids if b.agent_id == winner.agent_id)  # one bid per agent
        with tracer.start_as_current_span("market.award") as award:
            award.set_attribute("winner_agent_id", winner.agent_id)
            award.set_attribute("final_score", winner.final_score)
            award.set_attribute("calibrated_success_prob", winner.calibrated_success_prob)
        span.set_attribute("agora.allocation.status", AllocationStatus.ALLOCATED.value)
        return AllocationResult(
            task_id=spec.task_id,
            status=AllocationStatus.ALLOCATED,
            winning_agent_id=winner.agent_id,
            winning_bid=winning_bid,
            winning_score=winner,
            all_scores=scores,
            all_bids=bids,
            capability_filtered_out=list(filtered_out)[:MAX_ITEMS],
        )


def _rejected(
    span: trace.Span,
    spec: TaskSpec,
    reason: str,
    *,
    filtered_out: Sequence[str],
    bids: Sequence[Bid] = (),
    scores: Sequence[BidScore] = (),
) -> AllocationResult:
    span.set_attribute("agora.allocation.status", AllocationStatus.REJECTED.value)
    span.set_attribute("agora.allocation.reject_reason", reason)
    return AllocationResult(
        task_id=spec.task_id,
        status=AllocationStatus.REJECTED,
        all_scores=list(scores),
        all_bids=list(bids),
        capability_filtered_out=list(filtered_out)[:MAX_ITEMS],
        reject_reason=reason,
    )
