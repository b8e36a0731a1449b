"""What a run checked and what went wrong, as escalations show it to a person and learning
records keep it: one `ValidationResult` per check, one `RecordedError` per error."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from agora.core.limits import MAX_NOTE_CHARS, Note

__all__ = ["MAX_FIGURES", "RecordedError", "ValidationResult"]

MAX_FIGURES = 16
"""Numbers one check reports (attempts, convergence...)."""

Label = Annotated[str, Field(max_length=200)]


class ValidationResult(BaseModel):
    """One check of the work: its kind (a validation type such as `file_exists`, or `subgoal`,
    `round`), what it checked, whether it passed (None: not decided yet), and, when it failed,
    the category, reason and suggested fix."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Label = ""
    subject: Label = Field(default="", description="What was checked (a file, a subgoal id, a round).")
    passed: bool | None = None
    detail: Label = Field(default="", description="Its state in a word or two (e.g. a subgoal's status).")
    failure_category: Label = Field(
        default="", description="missing, malformed, incomplete, stale, error, or another category."
    )
    failure_reason: Note = ""
    suggested_fix: Note = ""
    figures: dict[Label, float] = Field(
        default_factory=dict, max_length=MAX_FIGURES, description="Numbers the check reports, by name."
    )


class RecordedError(BaseModel):
    """One error of the attempts so far: its code (e.g. a failure type), category and message."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    error_code: Label = ""
    category: Label = ""
    message: str = Field(default="", max_length=MAX_NOTE_CHARS)
