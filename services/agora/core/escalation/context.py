"""What a decision-maker is shown: the state of the step that led to a reactive escalation
(`EscalationContext`), and either kind of context a record holds (`AnyContext`: an escalation's
or a checkpoint's)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from agora.core.checks import ValidationResult
from agora.core.escalation.checkpoints import CheckpointContext
from agora.core.escalation.suggestions import HistoricalSuggestion
from agora.core.limits import MAX_ID_CHARS, MAX_ITEMS, Note, Text

__all__ = ["AnyContext", "EscalationContext"]


class EscalationContext(BaseModel):
    """Everything about the step's state that led to escalation."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, serialize_by_alias=True)

    job_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    step: int = Field(ge=0, alias="sheet_num")
    validation_results: list[ValidationResult] = Field(
        max_length=MAX_ITEMS,
        description="The checks of the work so far (a plan's subgoals, a debate's rounds).",
    )
    confidence: float = Field(
        ge=0.0, le=1.0, description="Aggregate confidence score that triggered escalation (0.0-1.0)."
    )
    retry_count: int = Field(ge=0, description="Retries already made (attempt number - 1).")
    error_history: list[Note] = Field(
        max_length=MAX_ITEMS, description="Errors of the attempts so far, oldest first."
    )
    prompt_used: Text
    output_summary: Text
    historical_suggestions: list[HistoricalSuggestion] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Similar past escalation decisions that may inform this decision, ordered by "
        "relevance (successful outcomes first; see rank_suggestions).",
    )
    kind: Literal["escalation"] = Field(
        default="escalation", description="Tells an escalation from a checkpoint in a record."
    )


AnyContext = Annotated[EscalationContext | CheckpointContext, Field(discriminator="kind")]
"""Either kind of context, told apart by `kind`."""
