"""Aggregation of a debate's final round into one answer (`aggregate`): MAJORITY_VOTE takes the
largest cluster and its most confident member, WEIGHTED_VOTE scores each cluster by the sum of
weight * confidence of its members (JUDGE is a model call the caller makes)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agora.core.debate.config import AggregationStrategy, DebateConfig
from agora.core.debate.rounds import DebateRound, cluster_positions
from agora.core.limits import Text

__all__ = ["Aggregate", "aggregate"]


class Aggregate(BaseModel):
    answer: Text
    reasoning: Text
    confidence: float = Field(ge=0.0, le=1.0)
    debater_id: str | None = Field(default=None, description="Whose position won (None: the judge's own).")


TIE_DIGITS = 9
"""Sums compared to this many decimals: sums equal but for the order their terms were added in
(0.01 + 0.02 is not 0.03 in floating point) are ties, so scaling every weight alike never
changes a vote."""


def _tied(total: float) -> float:
    return round(total, TIE_DIGITS)


def aggregate(debate: DebateRound, config: DebateConfig) -> Aggregate:
    """MAJORITY_VOTE or WEIGHTED_VOTE over the round's positions (JUDGE is a model call: see
    `judge_prompt`)."""
    if config.aggregation is AggregationStrategy.JUDGE:
        raise ValueError("JUDGE aggregation asks the judge model; use judge_prompt and the judge's answer")
    positions = debate.positions
    if not positions:
        raise ValueError("nothing to aggregate: the round has no positions")
    weights = {d.debater_id: d.weight for d in config.debaters}
    clusters = cluster_positions(positions)
    order = {id(c): n for n, c in enumerate(sorted(clusters, key=lambda c: c[0]))}

    def summed_confidence(cluster: list[int]) -> float:
        return sum(positions[i].confidence for i in cluster)

    def score(cluster: list[int]) -> float:
        return sum(weights.get(positions[i].debater_id, 1.0) * positions[i].confidence for i in cluster)

    if config.aggregation is AggregationStrategy.MAJORITY_VOTE:
        winner = min(clusters, key=lambda c: (-len(c), -_tied(summed_confidence(c)), order[id(c)]))
        confidence = summed_confidence(winner) / len(positions)  # mean confidence * share
    else:
        winner = min(clusters, key=lambda c: (-_tied(score(c)), -len(c), order[id(c)]))
        total_weight = sum(weights.get(p.debater_id, 1.0) for p in positions)
        confidence = score(winner) / total_weight if total_weight else 0.0
    best = min(winner, key=lambda i: (-positions[i].confidence, i))
    chosen = positions[best]
    return Aggregate(
        answer=chosen.answer,
        reasoning=chosen.reasoning,
        confidence=min(1.0, max(0.0, confidence)),
        debater_id=chosen.debater_id,
    )
