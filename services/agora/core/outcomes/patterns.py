"""Pattern detection: what recurs across past outcomes (a validation type that keeps failing,
a failure category, a failure phrase, an error code), once there are enough outcomes to call it
a pattern."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from agora.core.outcomes.derived import normalise_phrase, with_derived_fields
from agora.core.outcomes.record import StepOutcome, failed_results, validation_type

__all__ = [
    "MIN_OUTCOMES_FOR_PATTERNS",
    "MIN_PATTERN_FREQUENCY",
    "DetectedPattern",
    "PatternType",
    "detect_patterns",
]

MIN_OUTCOMES_FOR_PATTERNS = 5
"""Pattern detection runs only over at least this many outcomes: fewer is anecdote."""

MIN_PATTERN_FREQUENCY = 2
"""A pattern must show in at least this many distinct outcomes: once is an event, twice recurs."""


class PatternType(StrEnum):
    VALIDATION_FAILURE = "validation_failure"
    """One validation type keeps failing."""
    FAILURE_CATEGORY = "failure_category"
    """One failure category (missing, malformed...) keeps showing up."""
    SEMANTIC_FAILURE = "semantic_failure"
    """One normalised failure reason keeps showing up."""
    ERROR_CODE = "error_code"
    """One error code keeps recurring."""


class DetectedPattern(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern_type: PatternType
    key: str = Field(description="The validation type, category, phrase or error code.")
    description: str = Field(description="Prompt-ready text; see get_relevant_patterns.")
    frequency: int = Field(ge=1, description="Outcomes showing the pattern.")
    occurrences: int = Field(ge=1, description="Total occurrences (an outcome may show it several times).")
    total_outcomes: int = Field(ge=1, description="Outcomes analysed.")
    success_rate: float = Field(ge=0.0, le=1.0, description="Share of the affected outcomes that succeeded.")
    confidence: float = Field(ge=0.0, le=1.0, description="frequency / total_outcomes.")
    suggested_fix: str | None = None
    last_seen: datetime
    job_ids: list[str] = Field(default_factory=list)

    @property
    def pattern_id(self) -> str:
        return f"{self.pattern_type.value}:{self.key}"


class _Tally:
    """Per-key evidence while scanning outcomes."""

    def __init__(self) -> None:
        self.outcomes: dict[str, StepOutcome] = {}
        self.occurrences = 0
        self.fixes: Counter[str] = Counter()
        self.details: Counter[str] = Counter()

    def add(self, outcome: StepOutcome, times: int = 1) -> None:
        self.outcomes[outcome.outcome_id] = outcome
        self.occurrences += times


def _most_common(counter: Counter[str]) -> str | None:
    """Most frequent entry, ties broken alphabetically (so the text is deterministic)."""
    if not counter:
        return None
    return min(counter.items(), key=lambda item: (-item[1], item[0]))[0]


def _describe(kind: PatternType, key: str, frequency: int, detail: str | None, fix: str | None) -> str:
    if kind is PatternType.VALIDATION_FAILURE:
        text = f"⚠️ Common issue: {key} validation tends to fail"
    elif kind is PatternType.FAILURE_CATEGORY:
        text = f"⚠️ Common issue: '{key}' validation failures recur"
    elif kind is PatternType.SEMANTIC_FAILURE:
        text = f'⚠️ Recurring failure: "{key}"'
    else:
        text = f"⚠️ Recurring error {key}" + (f" ({detail})" if detail else "")
    text += f" (seen {frequency}x)"
    return text + (f". Suggested fix: {fix}" if fix else "")


def detect_patterns(
    outcomes: Sequence[StepOutcome],
    *,
    min_outcomes: int = MIN_OUTCOMES_FOR_PATTERNS,
    min_frequency: int = MIN_PATTERN_FREQUENCY,
) -> list[DetectedPattern]:
    """Recurring patterns across `outcomes`; empty below `min_outcomes` outcomes.

    Four kinds, each counted per key over distinct outcomes (frequency) and in total
    (occurrences), and reported when frequency >= `min_frequency`:

    * validation failure: a `validation_type` with `passed: False`;
    * failure category: a key of `failure_category_counts` with a count > 0;
    * semantic failure: a phrase of `semantic_patterns` (normalised with `normalise_phrase`);
    * error code: an `error_code` of `error_history` (the most common category and message go
      into the text).

    Each pattern carries the most common `suggested_fix` among the matching failed validations,
    `success_rate` (share of affected outcomes that succeeded) and `confidence` = frequency /
    outcomes analysed. Sorted by confidence, then frequency (both descending), then type and key.
    """
    if min_outcomes < 1 or min_frequency < 1:
        raise ValueError("min_outcomes and min_frequency must be >= 1")
    if len(outcomes) < min_outcomes:
        return []
    outcomes = [with_derived_fields(o) for o in outcomes]
    tallies: dict[tuple[PatternType, str], _Tally] = defaultdict(_Tally)
    for outcome in outcomes:
        for result in failed_results(outcome.validation_results):
            fix = result.suggested_fix.strip()
            keys = [
                (PatternType.VALIDATION_FAILURE, validation_type(result)),
                (PatternType.FAILURE_CATEGORY, result.failure_category.strip().lower()),
                (PatternType.SEMANTIC_FAILURE, normalise_phrase(result.failure_reason)),
            ]
            for kind, key in keys:
                if key and fix:
                    tallies[(kind, key)].fixes[fix] += 1
            if kind_key := validation_type(result):
                tallies[(PatternType.VALIDATION_FAILURE, kind_key)].add(outcome)
        for category, count in outcome.failure_category_counts.items():
            if count > 0 and category.strip():
                tallies[(PatternType.FAILURE_CATEGORY, category.strip().lower())].add(outcome, count)
        for phrase in {normalise_phrase(p) for p in outcome.semantic_patterns} - {""}:
            tallies[(PatternType.SEMANTIC_FAILURE, phrase)].add(outcome)
        for entry in outcome.error_history:
            code = entry.error_code.strip().upper()
            if not code:
                continue
            tally = tallies[(PatternType.ERROR_CODE, code)]
            tally.add(outcome)
            category = entry.category.strip()
            message = entry.message.strip()
            if category or message:
                tally.details[": ".join(part for part in (category, message) if part)] += 1

    patterns: list[DetectedPattern] = []
    total = len(outcomes)
    for (kind, key), tally in tallies.items():
        frequency = len(tally.outcomes)
        if frequency < min_frequency:
            continue
        affected = list(tally.outcomes.values())
        common_fix = _most_common(tally.fixes)
        patterns.append(
            DetectedPattern(
                pattern_type=kind,
                key=key,
                description=_describe(kind, key, frequency, _most_common(tally.details), common_fix),
                frequency=frequency,
                occurrences=max(tally.occurrences, frequency),
                total_outcomes=total,
                success_rate=sum(o.succeeded for o in affected) / frequency,
                confidence=min(1.0, frequency / total),
                suggested_fix=common_fix,
                last_seen=max(o.timestamp for o in affected),
                job_ids=sorted({o.job_id for o in affected}),
            )
        )
    patterns.sort(key=lambda p: (-p.confidence, -p.frequency, p.pattern_type.value, p.key))
    return patterns
