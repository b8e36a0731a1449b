"""The record of one step's execution (`StepOutcome`): what it checked, what went wrong, how
it ended, what was injected into its prompt and what was decided if it escalated."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agora.core.checks import RecordedError, ValidationResult
from agora.core.escalation.decisions import EscalationAction
from agora.core.limits import MAX_ITEMS
from agora.core.triage.failures import FailureType

__all__ = [
    "FAILURE_CATEGORIES",
    "OutcomeStatus",
    "StepOutcome",
    "failed_results",
    "validation_type",
]


class OutcomeStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ABORTED = "aborted"


class StepOutcome(BaseModel):
    """Structured outcome of one step's execution, kept for learning and pattern detection:
    its checks (`validation_results`) and errors (`error_history`) among the rest."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, serialize_by_alias=True)

    step_id: str = Field(min_length=1, alias="sheet_id")
    job_id: str = Field(min_length=1)
    validation_results: list[ValidationResult] = Field(default_factory=list, max_length=MAX_ITEMS)
    execution_duration: float | None = Field(
        default=None, ge=0.0, description="Seconds; None when nothing was timed (an escalation's record)."
    )
    retry_count: int = Field(ge=0)
    completion_mode_used: bool | None = Field(
        default=None, description="None when the run has no completion mode (an agent's task, an escalation)."
    )
    final_status: OutcomeStatus
    validation_pass_rate: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Fraction of validations passed; None when none ran."
    )
    success_without_retry: bool
    patterns_detected: list[str] = Field(default_factory=list)
    timestamp: datetime = Field(default_factory=lambda: datetime.now(UTC))
    failure_category_counts: dict[str, int] = Field(
        default_factory=dict, description="e.g. {'missing': 2, 'stale': 1}; see FAILURE_CATEGORIES."
    )
    semantic_patterns: list[str] = Field(
        default_factory=list, description="Normalised phrases from failure_reason, e.g. 'file not created'."
    )
    fix_suggestions: list[str] = Field(
        default_factory=list, description="suggested_fix of failed validations."
    )
    patterns_applied: list[str] = Field(
        default_factory=list, description="Pattern texts injected into this execution's prompt."
    )
    stdout_tail: str = ""
    stderr_tail: str = ""
    error_history: list[RecordedError] = Field(default_factory=list, max_length=MAX_ITEMS)
    grounding_passed: bool | None = None
    grounding_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    grounding_guidance: str | None = None
    outcome_id: str = Field(
        default_factory=lambda: str(uuid.uuid4()),
        min_length=1,
        description="Stable key in the store; recording the same id again replaces it.",
    )
    failure_type: FailureType | None = Field(
        default=None, description="The triage classification of the failure, if any."
    )
    escalation_action: EscalationAction | None = Field(
        default=None, description="The escalation decision taken for this step, if any."
    )
    escalation_guidance: str | None = Field(default=None, description="Guidance given with that decision.")
    escalation_confidence: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="The confidence that triggered the escalation (required with the action).",
    )
    escalation_id: str | None = Field(default=None, description="That escalation's id, when known.")

    @model_validator(mode="after")
    def _escalation_is_complete(self) -> StepOutcome:
        if self.escalation_action is not None and self.escalation_confidence is None:
            raise ValueError("an outcome with an escalation_action also gives escalation_confidence")
        return self

    @property
    def succeeded(self) -> bool:
        return self.final_status is OutcomeStatus.COMPLETED

    @property
    def error_codes(self) -> list[str]:
        """Normalised (stripped, upper-case) error codes of `error_history`, in order, with repeats."""
        codes = (entry.error_code.strip().upper() for entry in self.error_history)
        return [code for code in codes if code]

    @property
    def failed_validation_types(self) -> list[str]:
        return sorted(
            {kind for result in failed_results(self.validation_results) if (kind := validation_type(result))}
        )


FAILURE_CATEGORIES = ("missing", "malformed", "incomplete", "stale", "error")
"""The usual `failure_category` values of a validation result. Others are accepted and counted as given."""


def failed_results(results: Iterable[ValidationResult]) -> list[ValidationResult]:
    """The validation results that failed (`passed` is False), in order."""
    return [result for result in results if result.passed is False]


def validation_type(result: ValidationResult) -> str:
    """The type of check a validation result is of (its `kind`, stripped)."""
    return result.kind.strip()
