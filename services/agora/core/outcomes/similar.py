"""Finding similar past outcomes: what the caller knows of the present situation
(`OutcomeQuery`), how similar a past outcome is to it (`similarity`, a weighted mean of
Jaccard similarities), and the past outcomes ranked by it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agora.core.outcomes.derived import normalise_phrase
from agora.core.outcomes.record import StepOutcome, failed_results
from agora.core.similarity import jaccard
from agora.core.triage.failures import FailureType
from agora.core.triage.words import content_tokens

__all__ = [
    "DEFAULT_SIMILAR_LIMIT",
    "SIMILARITY_WEIGHTS",
    "OutcomeQuery",
    "QueryLike",
    "ScoredOutcome",
    "as_query",
    "check_limit",
    "outcome_text",
    "query_similar",
    "rank_similar",
    "similarity",
]

DEFAULT_SIMILAR_LIMIT = 10

SIMILARITY_WEIGHTS: dict[str, float] = {
    "text": 0.35,
    "error_codes": 0.20,
    "failure_categories": 0.15,
    "validation_types": 0.10,
    "failure_type": 0.10,
    "job_id": 0.05,
    "step_id": 0.05,
}
"""Weight of each similarity component (see `similarity`). Free text weighs most because it carries
the most information; error codes next because they are precise; identity of job and step least,
because the same job failing for a different reason is not a similar situation."""


class OutcomeQuery(BaseModel):
    """What the caller knows about the current situation; every field is optional, and only the
    fields given take part in similarity."""

    model_config = ConfigDict(extra="forbid")

    job_id: str | None = None
    step_id: str | None = None
    text: str = Field(default="", description="Free text: the error, the failure reasons, the task.")
    error_codes: list[str] = Field(default_factory=list)
    failure_categories: list[str] = Field(default_factory=list)
    validation_types: list[str] = Field(default_factory=list)
    failure_type: FailureType | None = None

    @property
    def is_empty(self) -> bool:
        return not _components(self)


QueryLike = OutcomeQuery | Mapping[str, Any]


def as_query(context: QueryLike) -> OutcomeQuery:
    return context if isinstance(context, OutcomeQuery) else OutcomeQuery.model_validate(dict(context))


def outcome_text(outcome: StepOutcome) -> str:
    """What the free-text part of similarity compares with: the semantic phrases, the failure
    reasons of failed validations (normalised like the phrases, so one file name does not make
    two outcomes look different), the error messages and the grounding guidance. (Not the
    stdout/stderr tails: long logs would swamp the Jaccard ratio with unrelated words.)"""
    parts = [*outcome.semantic_patterns]
    parts += [normalise_phrase(r.failure_reason) for r in failed_results(outcome.validation_results)]
    parts += [e.message for e in outcome.error_history]
    parts.append(outcome.grounding_guidance or "")
    return " ".join(parts)


def _components(query: OutcomeQuery) -> list[str]:
    given = {
        "text": bool(content_tokens(query.text)),
        "error_codes": bool(query.error_codes),
        "failure_categories": bool(query.failure_categories),
        "validation_types": bool(query.validation_types),
        "failure_type": query.failure_type is not None,
        "job_id": query.job_id is not None,
        "step_id": query.step_id is not None,
    }
    return [name for name, present in given.items() if present]


def similarity(outcome: StepOutcome, context: QueryLike) -> float:
    """How similar a past outcome is to the query, in [0, 1].

    Components, each in [0, 1]:

    * text: Jaccard of the `content_tokens` (normalised words without stopwords) of `query.text`
      and of `outcome_text(outcome)`;
    * error_codes: Jaccard of the (upper-cased) error code sets;
    * failure_categories: Jaccard of the query's categories and the outcome's categories with a
      count > 0;
    * validation_types: Jaccard of the query's types and the outcome's failed validation types;
    * failure_type, job_id, step_id: 1 when equal, else 0.

    The score is the `SIMILARITY_WEIGHTS`-weighted mean over the components the query gives, so
    a query naming only an error code scores 1.0 on an outcome with exactly that code. A query
    that gives nothing scores 0 everywhere.
    """
    query = as_query(context)
    scores: dict[str, float] = {
        "text": jaccard(content_tokens(query.text), content_tokens(outcome_text(outcome))),
        "error_codes": jaccard({c.strip().upper() for c in query.error_codes}, outcome.error_codes),
        "failure_categories": jaccard(
            {c.strip().lower() for c in query.failure_categories},
            {c.strip().lower() for c, n in outcome.failure_category_counts.items() if n > 0},
        ),
        "validation_types": jaccard(
            {v.strip() for v in query.validation_types}, outcome.failed_validation_types
        ),
        "failure_type": float(query.failure_type is not None and query.failure_type == outcome.failure_type),
        "job_id": float(query.job_id == outcome.job_id),
        "step_id": float(query.step_id == outcome.step_id),
    }
    names = _components(query)
    weight = sum(SIMILARITY_WEIGHTS[name] for name in names)
    if not weight:
        return 0.0
    return sum(SIMILARITY_WEIGHTS[name] * scores[name] for name in names) / weight


class ScoredOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: StepOutcome
    score: float = Field(ge=0.0, le=1.0)


def rank_similar(outcomes: Iterable[StepOutcome], context: QueryLike) -> list[ScoredOutcome]:
    """Every outcome with a score > 0, most similar first; ties go to the more recent, then by id.
    With an empty query, every outcome (score 0), most recent first."""
    query = as_query(context)
    scored = [ScoredOutcome(outcome=o, score=similarity(o, query)) for o in outcomes]
    if not query.is_empty:
        scored = [s for s in scored if s.score > 0.0]
    scored.sort(key=lambda s: s.outcome.outcome_id)
    scored.sort(key=lambda s: (s.score, s.outcome.timestamp), reverse=True)
    return scored


def query_similar(
    outcomes: Iterable[StepOutcome], context: QueryLike, limit: int = DEFAULT_SIMILAR_LIMIT
) -> list[StepOutcome]:
    """The `limit` outcomes most similar to `context` (see `similarity`, `rank_similar`)."""
    check_limit(limit)
    return [s.outcome for s in rank_similar(outcomes, context)[:limit]]


def check_limit(limit: int) -> None:
    """Refuse a negative `limit` (of outcomes, patterns or suggestions asked for)."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit!r}")
