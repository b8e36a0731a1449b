"""What the estimator records: one step's measures (`StepUncertainty`: its signals, fused and
propagated confidence, level and action) and a session's belief state across its steps
(`SessionBelief`: the newest steps, the cumulative confidence, the counters), which a service
persists and an estimator resumes from."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agora.core.limits import MAX_ID_CHARS, MAX_ITEMS, IdRef, NameRef, Note
from agora.core.uncertainty.policy import UncertaintyAction, UncertaintyLevel
from agora.core.uncertainty.propagation import StepType

__all__ = ["MAX_KEPT_STEPS", "NOT_RUN", "SessionBelief", "StepUncertainty"]

NOT_RUN = -1.0
"""Value of `p_true_confidence` (and `verbalized_confidence` on steps without a model response)
when that signal was not measured."""

MAX_KEPT_STEPS = 100
"""Steps a session's belief state keeps, the newest (its counters and cumulative confidence still
cover every step): a session may report steps for as long as it lives."""


class StepUncertainty(BaseModel):
    """The record of one observed step, as returned by the `observe_*` methods."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step_id: str = Field(min_length=1, max_length=MAX_ID_CHARS, description="Unique step identifier")
    step_type: StepType = Field(description='"llm_call", "tool_call", "memory_read" or "decision"')
    verbalized_confidence: float = Field(
        ge=-1.0,
        le=1.0,
        description="Raw extracted confidence (before calibration); -1.0 on steps without a response",
    )
    p_true_confidence: float = Field(ge=-1.0, le=1.0, description="P(True) result; -1.0 when not run")
    fused_confidence: float = Field(
        ge=0.0, le=1.0, description="Calibrated weighted fusion (lowered by the semantic slow path if it ran)"
    )
    propagated_confidence: float = Field(ge=0.0, le=1.0, description="After SAUP propagation")
    level: UncertaintyLevel = Field(description="Classified tier")
    action: UncertaintyAction = Field(description="Control action to take")
    samples_used: int = Field(default=0, ge=0, description="Semantic entropy samples drawn (0 = not run)")
    reflection_injected: bool = Field(default=False, description="Whether System-2 reflection applies")
    verbalized_found: bool = Field(
        default=False,
        description="The response stated a confidence (False: default used, or no response).",
    )
    semantic_confidence: float | None = Field(
        default=None, ge=0.0, le=1.0, description="1 - normalised semantic entropy, when sampled."
    )
    tool_name: NameRef | None = Field(default=None, description="The tool checked (tool checks only).")
    irreversible: bool = Field(default=False, description="The tool matched an irreversible name.")
    signal_errors: list[Note] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Model calls that failed or did not parse and were left out of the estimate.",
    )

    @field_validator("verbalized_confidence", "p_true_confidence")
    @classmethod
    def _probability_or_not_run(cls, value: float) -> float:
        if value < 0.0 and value != NOT_RUN:
            raise ValueError("must be in [0, 1], or -1.0 when not measured")
        return value


class SessionBelief(BaseModel):
    """Everything the estimator knows about a session; persist it with `model_dump(mode="json")`
    and rebuild the estimator with `UncertaintyEstimator.from_belief`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: IdRef = ""
    agent_id: IdRef = ""
    step_uncertainties: tuple[StepUncertainty, ...] = Field(
        default=(),
        max_length=MAX_KEPT_STEPS,
        description="Observed steps, oldest first (the newest `history_limit`, at most 100)",
    )
    cumulative_confidence: float = Field(
        default=1.0, ge=0.0, le=1.0, description="Propagated confidence after the last step; 1.0 before any"
    )
    total_steps: int = Field(
        default=0, ge=0, description="Steps observed, including any dropped from history"
    )
    high_uncertainty_steps: int = Field(default=0, ge=0, description="Steps classified HIGH or CRITICAL")

    @field_validator("step_uncertainties", mode="before")
    @classmethod
    def _newest_kept(cls, steps: Any) -> Any:
        """A belief saved before steps were capped loads with its newest `MAX_KEPT_STEPS`."""
        if isinstance(steps, list | tuple) and len(steps) > MAX_KEPT_STEPS:
            return steps[-MAX_KEPT_STEPS:]
        return steps

    @model_validator(mode="after")
    def _counts_agree(self) -> SessionBelief:
        if self.total_steps < len(self.step_uncertainties):
            raise ValueError("total_steps cannot be less than the number of recorded steps")
        if self.high_uncertainty_steps > self.total_steps:
            raise ValueError("high_uncertainty_steps cannot exceed total_steps")
        return self

    @property
    def last_step(self) -> StepUncertainty | None:
        return self.step_uncertainties[-1] if self.step_uncertainties else None
