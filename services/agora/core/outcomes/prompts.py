"""Prompt injection: the detected patterns relevant to the present situation, as text to add
to the next prompt."""

from __future__ import annotations

from collections.abc import Sequence

from agora.core.outcomes.patterns import (
    MIN_OUTCOMES_FOR_PATTERNS,
    DetectedPattern,
    PatternType,
    detect_patterns,
)
from agora.core.outcomes.record import StepOutcome
from agora.core.outcomes.similar import OutcomeQuery, QueryLike, as_query, check_limit
from agora.core.triage.words import content_tokens

__all__ = [
    "DEFAULT_PATTERN_LIMIT",
    "PROMPT_HEADING",
    "format_patterns_for_prompt",
    "get_relevant_patterns",
    "select_relevant_patterns",
]

DEFAULT_PATTERN_LIMIT = 5


def _relevant(pattern: DetectedPattern, query: OutcomeQuery) -> bool:
    key = pattern.key
    if pattern.pattern_type is PatternType.ERROR_CODE:
        return key in {c.strip().upper() for c in query.error_codes}
    if pattern.pattern_type is PatternType.FAILURE_CATEGORY:
        return key in {c.strip().lower() for c in query.failure_categories}
    if pattern.pattern_type is PatternType.VALIDATION_FAILURE:
        return key in {v.strip() for v in query.validation_types}
    return bool(content_tokens(key) & content_tokens(query.text))


def select_relevant_patterns(
    patterns: Sequence[DetectedPattern], context: QueryLike, limit: int = DEFAULT_PATTERN_LIMIT
) -> list[DetectedPattern]:
    """Patterns that match the context first (same error code, failure category or validation
    type as the query, or a semantic phrase sharing a word with the query text), then the rest;
    each group in the detection order (confidence first). At most `limit`."""
    check_limit(limit)
    query = as_query(context)
    matched = [p for p in patterns if _relevant(p, query)]
    others = [p for p in patterns if not _relevant(p, query)]
    return (matched + others)[:limit]


def get_relevant_patterns(
    outcomes: Sequence[StepOutcome],
    context: QueryLike,
    limit: int = DEFAULT_PATTERN_LIMIT,
    *,
    min_outcomes: int = MIN_OUTCOMES_FOR_PATTERNS,
) -> list[str]:
    """Pattern descriptions for prompt injection, e.g.
    "⚠️ Common issue: file_exists validation tends to fail (seen 3x). Suggested fix: ...".
    Store the texts actually injected in `StepOutcome.patterns_applied`."""
    patterns = detect_patterns(outcomes, min_outcomes=min_outcomes)
    return [p.description for p in select_relevant_patterns(patterns, context, limit)]


PROMPT_HEADING = "Lessons from earlier runs of similar work:"


def format_patterns_for_prompt(patterns: Sequence[str], heading: str = PROMPT_HEADING) -> str:
    """One block to append to a prompt: the heading and one bullet per pattern ("" if none)."""
    if not patterns:
        return ""
    return "\n".join([heading, *(f"- {p}" for p in patterns)])
