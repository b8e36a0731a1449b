"""The act-vs-escalate rule: the threshold rule (`escalate_to_human`: act when the debaters
agree enough), the conformal gate's verdict (`ConformalDecision`, over `CandidateAnswer`s;
computed by `agora.core.conformal`), and what calibrates that gate: a debate's right answer once
known (`DebateOutcome`; `NotDecidable` before a final round) and the recorded scores
(`Calibration`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agora.core.debate.config import MAX_DEBATERS, DebateConfig
from agora.core.errors import AgoraError
from agora.core.limits import Note, Text

__all__ = [
    "MAX_CALIBRATION",
    "Calibration",
    "CandidateAnswer",
    "ConformalDecision",
    "DebateOutcome",
    "NotDecidable",
    "escalate_to_human",
]


def escalate_to_human(final_convergence_score: float, config: DebateConfig) -> bool:
    """Act when the debaters agree enough; otherwise a person decides."""
    return final_convergence_score < config.escalate_threshold


class CandidateAnswer(BaseModel):
    answer: str
    probability: float = Field(ge=0.0, le=1.0)


class ConformalDecision(BaseModel):
    """The conformal gate's verdict on a debate (`agora.core.conformal`)."""

    act: bool
    answer: Text | None = Field(default=None, description="The one answer in the set, when it acts.")
    prediction_set: list[Text] = Field(
        max_length=MAX_DEBATERS + 1,
        description="The candidate answers the gate could not rule out (at most one per group of agreeing "
        "debaters, and one for an answer no debater gave).",
    )
    quantile: float | None = Field(
        description="The calibrated score bound; None: unbounded (too few debates)."
    )
    calibration_size: int
    reason: Note


class NotDecidable(AgoraError):
    """A debate cannot be labelled with its right answer: it has not ended with a final round."""

    code = "NOT_DECIDABLE"
    http_status = 409


MAX_CALIBRATION = 1000
"""Recorded debate outcomes the conformal gate keeps (the newest)."""


class Calibration(BaseModel):
    """Nonconformity scores of debates whose right answer became known, by debate id
    (state `debate:calibration:scores`); a debate is counted once, its latest label wins."""

    scores: dict[str, float] = Field(default_factory=dict)

    def with_score(self, debate_id: str, score: float) -> Calibration:
        scores = {k: v for k, v in self.scores.items() if k != debate_id}
        scores[debate_id] = score
        return Calibration(scores=dict(list(scores.items())[-MAX_CALIBRATION:]))


class DebateOutcome(BaseModel):
    """`POST /v1/debates/{id}/outcome`: the right answer, once it is known (a verified result);
    it calibrates the conformal gate."""

    model_config = ConfigDict(extra="forbid")

    right_answer: Text = Field(min_length=1)
