"""Propagation through a session's earlier steps (SAUP-style): a step's confidence is blended
with the session's cumulative confidence before it, weighted by the step's type, because a
decision cascades further than a memory read::

    cumulative(0) = 1.0                       (no evidence of doubt before the first step)
    propagated(t) = w(type) * fused(t) + (1 - w(type)) * cumulative(t - 1)
    cumulative(t) = propagated(t)
    w: decision 0.70, llm_call 0.55, tool_call 0.45, memory_read 0.35

Unrolled, a step's confidence is a weighted average of every earlier step's fused confidence
with geometrically decaying weights, so one unsure step is not erased by the next confident
one. Because of the prior, a single first step cannot fall below ``1 - w`` (0.45 for an
`llm_call`: HIGH, a pause), so an ABORT needs doubt sustained over steps (or a `decision`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agora.core.uncertainty.confidence import check_unit, unit

__all__ = ["DEFAULT_STEP_WEIGHTS", "StepType", "UncertaintyPropagator"]

StepType = Literal["llm_call", "tool_call", "memory_read", "decision"]

DEFAULT_STEP_WEIGHTS: dict[StepType, float] = {
    "decision": 0.70,
    "llm_call": 0.55,
    "tool_call": 0.45,
    "memory_read": 0.35,
}
"""SAUP weight of a step's own (fused) confidence, by step type; the rest goes to the prior."""


class UncertaintyPropagator(BaseModel):
    """SAUP-style propagation: `propagated = w * fused + (1 - w) * cumulative`, `w` by step type."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step_weights: dict[StepType, float] = Field(
        default_factory=lambda: dict(DEFAULT_STEP_WEIGHTS),
        description="Weight of a step's own confidence by step type; types left out keep their default",
    )

    @field_validator("step_weights")
    @classmethod
    def _weights_complete(cls, weights: dict[StepType, float]) -> dict[StepType, float]:
        for step_type, weight in weights.items():
            check_unit(f"step weight for {step_type!r}", weight)
        return {**DEFAULT_STEP_WEIGHTS, **weights}

    def weight(self, step_type: StepType) -> float:
        if step_type not in self.step_weights:
            raise ValueError(f"unknown step type {step_type!r}; expected one of {sorted(self.step_weights)}")
        return self.step_weights[step_type]

    def propagate(self, fused_confidence: float, step_type: StepType, cumulative_confidence: float) -> float:
        """Confidence of this step given the session's confidence before it."""
        w = self.weight(step_type)
        return unit(w * fused_confidence + (1.0 - w) * cumulative_confidence)
