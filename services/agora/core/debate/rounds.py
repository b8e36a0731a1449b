"""A round of a debate: each debater's answer (`Position`), the answers grouped by meaning
(`cluster_positions`: Jaccard similarity of their word sets), how far the debaters agree (the
convergence score: the share in the largest cluster; `converged`), and the round as a peer or
the judge reads it (`transcript`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from agora.core.debate.config import MAX_DEBATERS, DebateConfig, DebaterId
from agora.core.limits import MAX_NOTE_CHARS, Text
from agora.core.planning import TokenUsage
from agora.core.similarity import greedy_clusters

__all__ = [
    "SIMILARITY_THRESHOLD",
    "DebateRound",
    "Position",
    "cluster_positions",
    "converged",
    "debate_round",
    "transcript",
    "words",
]

SIMILARITY_THRESHOLD = 0.5
"""Jaccard similarity of word sets at or above which two answers count as the same position."""


class Position(BaseModel):
    """One debater's answer in one round."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    debater_id: DebaterId
    answer: Text
    reasoning: Text = ""
    confidence: float = Field(ge=0.0, le=1.0)
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float = Field(default=0.0, ge=0.0)


class DebateRound(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    round_number: int = Field(ge=1)
    positions: list[Position] = Field(max_length=MAX_DEBATERS)
    clusters: list[Annotated[list[DebaterId], Field(max_length=MAX_DEBATERS)]] = Field(
        max_length=MAX_DEBATERS, description="The debaters whose answers agree, largest first."
    )
    convergence_score: float = Field(ge=0.0, le=1.0)


_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def cluster_positions(
    positions: Sequence[Position], threshold: float = SIMILARITY_THRESHOLD
) -> list[list[int]]:
    """Indices of `positions` grouped by answer (`greedy_clusters` over their `words`): each
    joins the first cluster whose first answer is at least `threshold` similar to it, else
    starts one. Largest first (stable)."""
    clusters = greedy_clusters([words(p.answer) for p in positions], threshold)
    return sorted(clusters, key=len, reverse=True)


def debate_round(round_number: int, positions: list[Position]) -> DebateRound:
    clusters = cluster_positions(positions)
    share = len(clusters[0]) / len(positions) if positions else 0.0
    return DebateRound(
        round_number=round_number,
        positions=positions,
        clusters=[[positions[i].debater_id for i in cluster] for cluster in clusters],
        convergence_score=share,
    )


def converged(debate: DebateRound, config: DebateConfig) -> bool:
    return debate.convergence_score >= config.convergence_threshold


def transcript(debate: DebateRound) -> str:
    """The round's positions as a peer (or the judge) reads them."""
    return "\n".join(
        f"- {p.debater_id} (confidence {p.confidence:.2f}): {p.answer}"
        + (f" Because: {p.reasoning[:MAX_NOTE_CHARS]}" if p.reasoning else "")
        for p in debate.positions
    )
