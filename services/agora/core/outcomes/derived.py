"""The fields an outcome derives from its validation results: failure-category counts,
normalised failure phrases (`normalise_phrase`) and suggested fixes."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict

from agora.core.checks import ValidationResult
from agora.core.outcomes.record import StepOutcome, failed_results

__all__ = ["ValidationSummary", "normalise_phrase", "summarise_validation", "with_derived_fields"]


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")
_PATHLIKE = re.compile(r"\S*[/\\]\S*|\S+\.[a-z0-9]{1,5}\b")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")


def normalise_phrase(text: str) -> str:
    """A failure reason as a phrase that aggregates across outcomes: lower case, without quoted
    names, paths, file names and numbers, punctuation dropped. "File 'out.md' was not created
    in /tmp/x" and "file 'a.txt' was not created" both become "file was not created in"."""
    lowered = text.lower()
    for pattern in (_QUOTED, _PATHLIKE, _NUMBER):
        lowered = pattern.sub(" ", lowered)
    return " ".join(re.findall(r"[a-z0-9_]+", lowered))


class ValidationSummary(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    failure_category_counts: dict[str, int]
    semantic_patterns: list[str]
    fix_suggestions: list[str]


def summarise_validation(validation_results: Iterable[ValidationResult]) -> ValidationSummary:
    """Failure-category counts, normalised semantic phrases (first-seen order, no repeats) and
    suggested fixes (same) of the failed validations."""
    counts: Counter[str] = Counter()
    phrases: dict[str, None] = {}
    fixes: dict[str, None] = {}
    for result in failed_results(validation_results):
        category = result.failure_category.strip().lower()
        if category:
            counts[category] += 1
        if reason := normalise_phrase(result.failure_reason):
            phrases.setdefault(reason)
        if fix := result.suggested_fix.strip():
            fixes.setdefault(fix)
    return ValidationSummary(
        failure_category_counts=dict(counts), semantic_patterns=list(phrases), fix_suggestions=list(fixes)
    )


def with_derived_fields(outcome: StepOutcome) -> StepOutcome:
    """The outcome with `failure_category_counts`, `semantic_patterns` and `fix_suggestions`
    derived from `validation_results` where the caller left them empty."""
    summary = summarise_validation(outcome.validation_results)
    update: dict[str, Any] = {}
    if not outcome.failure_category_counts and summary.failure_category_counts:
        update["failure_category_counts"] = summary.failure_category_counts
    if not outcome.semantic_patterns and summary.semantic_patterns:
        update["semantic_patterns"] = summary.semantic_patterns
    if not outcome.fix_suggestions and summary.fix_suggestions:
        update["fix_suggestions"] = summary.fix_suggestions
    return outcome.model_copy(update=update) if update else outcome
