"""Historical suggestions: past escalation decisions in situations like the present one, and
how they turned out, ranked for a decision-maker (what worked first)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from agora.core.escalation.decisions import EscalationAction
from agora.core.limits import IdRef, Note

__all__ = ["HistoricalSuggestion", "rank_suggestions"]


class HistoricalSuggestion(BaseModel):
    """A past escalation decision similar to the current one, and how it turned out.

    Its fields are what a decision-maker needs: what was decided, in what situation, and whether
    it worked.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: EscalationAction = Field(description="What was decided then.")
    confidence: float = Field(ge=0.0, le=1.0, description="Confidence that triggered that escalation.")
    outcome_succeeded: bool | None = Field(
        default=None, description="Whether the step succeeded after the decision (None = unknown)."
    )
    guidance: Note | None = Field(default=None, description="Guidance given with that decision.")
    similarity: float = Field(
        default=1.0, ge=0.0, le=1.0, description="How close that situation was to this one."
    )
    escalation_id: IdRef | None = Field(default=None, description="The past escalation, when known.")


def rank_suggestions(suggestions: Sequence[HistoricalSuggestion]) -> list[HistoricalSuggestion]:
    """Order by relevance: successful outcomes first, then unknown, then
    failed; within each group most similar first; ties keep their given order (stable sort)."""
    outcome_rank = {True: 0, None: 1, False: 2}
    return sorted(suggestions, key=lambda s: (outcome_rank[s.outcome_succeeded], -s.similarity))
