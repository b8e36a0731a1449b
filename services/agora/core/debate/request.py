"""What a debate is asked with: the submission (`PUT /v1/debates/{id}`: the question and the
config) and the request that carries it with its debate id (topic `agora.debates`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from agora.core.debate.config import DebateConfig
from agora.core.limits import ID_PATTERN, Text

__all__ = ["MAX_DEBATE_ID_CHARS", "DebateId", "DebateRequest", "DebateSubmission", "submission_of"]

MAX_DEBATE_ID_CHARS = 200

DebateId = Annotated[str, Field(min_length=1, max_length=MAX_DEBATE_ID_CHARS, pattern=ID_PATTERN)]


class DebateSubmission(BaseModel):
    """`PUT /v1/debates/{id}`: the question and how to debate it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: Text = Field(min_length=1)
    config: DebateConfig


class DebateRequest(DebateSubmission):
    """Topic `agora.debates`: a submission with its debate id (the workflow instance id)."""

    debate_id: DebateId


def submission_of(request: DebateRequest) -> DebateSubmission:
    """The request without its id: what a debate record keeps, and what a repeat must match."""
    return DebateSubmission(question=request.question, config=request.config)
