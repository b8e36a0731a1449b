"""What a debate is asked with: the submission (`PUT /v1/debates/{id}`: the question and the
config) and the request that carries it with its debate id (topic `agora.debates`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agora.core.debate.config import DebateConfig
from agora.core.limits import ID_PATTERN, Text

__all__ = [
    "MAX_DEBATE_ID_CHARS",
    "MAX_DEBATE_OPTIONS",
    "DebateId",
    "DebateOption",
    "DebateRequest",
    "DebateSubmission",
    "submission_of",
]

MAX_DEBATE_ID_CHARS = 200

DebateId = Annotated[str, Field(min_length=1, max_length=MAX_DEBATE_ID_CHARS, pattern=ID_PATTERN)]


MAX_DEBATE_OPTIONS = 10
MAX_OPTION_CHARS = 200

DebateOption = Annotated[str, Field(min_length=1, max_length=MAX_OPTION_CHARS, pattern=r"^[^|\n]+$")]
"""One answer a debate may give: a line without `|` (how the prompt lists them)."""


class DebateSubmission(BaseModel):
    """`PUT /v1/debates/{id}`: the question, the answers it may have, and how to debate it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: Text = Field(min_length=1)
    config: DebateConfig
    options: list[DebateOption] = Field(
        default_factory=list,
        max_length=MAX_DEBATE_OPTIONS,
        description="The answers the debate may give, at least two when given: every debater's, "
        "the router's and the judge's answer must be one of them (an answer that is not is "
        "asked for again, then counts as an abstention with its reason). Empty: any answer.",
        # Left out when empty: a debate without them reads as it did to apps of an earlier
        # version (which refuse fields they do not know) while a release rolls.
        exclude_if=lambda options: not options,
    )

    @field_validator("options")
    @classmethod
    def _distinct_choices(cls, options: list[str]) -> list[str]:
        cleaned = [option.strip() for option in options]
        if any(not option for option in cleaned):
            raise ValueError("an option is blank")
        if len({option.casefold() for option in cleaned}) != len(cleaned):
            raise ValueError("options must differ (compared without regard to case)")
        if len(cleaned) == 1:
            raise ValueError("one option is no choice: give at least two, or none")
        return cleaned

    @property
    def question_as_asked(self) -> str:
        """The question with its options on a line of their own, as every prompt shows it."""
        if not self.options:
            return self.question
        return f"{self.question}\nOptions: {' | '.join(self.options)}"


class DebateRequest(DebateSubmission):
    """Topic `agora.debates`: a submission with its debate id (the workflow instance id)."""

    debate_id: DebateId


def submission_of(request: DebateRequest) -> DebateSubmission:
    """The request without its id: what a debate record keeps, and what a repeat must match."""
    return DebateSubmission(question=request.question, config=request.config, options=request.options)
