"""A debate's result: the answer and its confidence, whether a person is to decide, every round,
the route taken (a debate, or the routing model's confident single answer), convergence, tokens,
cost and time (`DebateResult`); built by `debate_result` or `single_agent_result`, and decided
by the conformal gate when the debate uses it (`gated`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agora.core.debate.aggregation import Aggregate
from agora.core.debate.config import MAX_ROUNDS, DebateConfig
from agora.core.debate.gate import ConformalDecision, escalate_to_human
from agora.core.debate.rounds import DebateRound, Position, converged
from agora.core.limits import Text
from agora.core.planning import TokenUsage
from agora.core.uncertainty.fusion import VERBALIZED_CALIBRATION_BIAS, calibrate

__all__ = ["DebateResult", "RoutingDecision", "debate_result", "gated", "single_agent_result"]

RoutingDecision = Literal["debate", "single_agent"]


class DebateResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    final_answer: Text = Field(description="Aggregated winning answer.")
    final_reasoning: Text = Field(description="Reasoning from the winning position.")
    confidence: float = Field(ge=0.0, le=1.0, description="Aggregated confidence (0-1).")
    escalate_to_human: bool = Field(description="True when final_convergence_score < escalate_threshold.")
    rounds: list[DebateRound] = Field(max_length=MAX_ROUNDS, description="Full per-round transcript.")
    routing_decision: RoutingDecision = Field(description='"debate" or "single_agent".')
    total_rounds_run: int = Field(ge=0, description="Rounds actually completed.")
    converged: bool = Field(description="Whether early stopping triggered.")
    final_convergence_score: float = Field(
        ge=0.0, le=1.0, description="Convergence score in the final round."
    )
    total_token_usage: TokenUsage = Field(description="Cumulative tokens across all rounds.")
    total_cost_usd: float = Field(ge=0.0, description="Total spend.")
    duration_seconds: float = Field(ge=0.0, description="Wall-clock time.")
    budget_exhausted: bool = Field(default=False, description="Rounds stopped because the budget was spent.")
    gate_decision: ConformalDecision | None = Field(
        default=None, description="The conformal gate's verdict, when the debate used it."
    )


def debate_result(
    rounds: list[DebateRound],
    chosen: Aggregate,
    config: DebateConfig,
    *,
    duration_seconds: float,
    budget_exhausted: bool = False,
    extra_usage: Sequence[TokenUsage] = (),
    extra_cost_usd: float = 0.0,
) -> DebateResult:
    """The result of a debate that ran `rounds` (routing and judge calls in `extra_*`)."""
    final = rounds[-1].convergence_score if rounds else 0.0
    usage = sum((p.token_usage for r in rounds for p in r.positions), TokenUsage())
    usage = sum(extra_usage, usage)
    cost = sum(p.cost_usd for r in rounds for p in r.positions) + extra_cost_usd
    return DebateResult(
        final_answer=chosen.answer,
        final_reasoning=chosen.reasoning,
        confidence=chosen.confidence,
        escalate_to_human=escalate_to_human(final, config),
        rounds=rounds,
        routing_decision="debate",
        total_rounds_run=len(rounds),
        converged=bool(rounds) and converged(rounds[-1], config),
        final_convergence_score=final,
        total_token_usage=usage,
        total_cost_usd=cost,
        duration_seconds=duration_seconds,
        budget_exhausted=budget_exhausted,
    )


def single_agent_result(
    routed: Position, *, duration_seconds: float, escalate_threshold: float | None = None
) -> DebateResult:
    """The result when adaptive routing skipped the debate: the routing model's confident answer.

    One voice is not agreement: with `escalate_threshold` (a run begun with the single agent
    gated), its confidence is the answer's calibrated confidence, as the uncertainty monitor
    calibrates a stated confidence (`fusion.calibrate`, over-confidence shrunk by
    `VERBALIZED_CALIBRATION_BIAS`), and it is for a person (`escalate_to_human`) below the
    threshold, as a split debate is; without, the router's own stated confidence, acted on."""
    confidence = routed.confidence
    escalate = False
    if escalate_threshold is not None:
        confidence = calibrate(routed.confidence, VERBALIZED_CALIBRATION_BIAS)
        escalate = confidence < escalate_threshold
    return DebateResult(
        final_answer=routed.answer,
        final_reasoning=routed.reasoning,
        confidence=confidence,
        escalate_to_human=escalate,
        rounds=[],
        routing_decision="single_agent",
        total_rounds_run=0,
        converged=False,
        final_convergence_score=1.0,
        total_token_usage=routed.token_usage,
        total_cost_usd=routed.cost_usd,
        duration_seconds=duration_seconds,
    )


def gated(result: DebateResult, decision: ConformalDecision) -> DebateResult:
    """The result as the conformal gate decides it: act on the one answer in the set, else
    escalate (the aggregated answer stays for the person to see)."""
    answer = decision.answer if decision.act and decision.answer is not None else result.final_answer
    return result.model_copy(
        update={"escalate_to_human": not decision.act, "gate_decision": decision, "final_answer": answer}
    )
