"""Outcome learning: remember how past sheet executions went and feed what recurs back into prompts.

A run that failed because a file was not created will likely fail the same way next time unless
the prompt says so. This module keeps one `SheetOutcome` per execution (outcomes-learning) and
derives from the history:

* patterns (`detect_patterns`), once at least `MIN_OUTCOMES_FOR_PATTERNS` (5) outcomes exist —
  fewer is anecdote, not a pattern: failure categories, semantic failure phrases, error codes and
  validation types that recur in at least `MIN_PATTERN_FREQUENCY` (2) outcomes;
* `query_similar`: past outcomes ranked by a documented similarity (`similarity`);
* `get_relevant_patterns`: pattern texts ready to inject into the next prompt; the caller stores
  the injected texts in `patterns_applied`, which is what makes effectiveness measurable;
* `pattern_effectiveness`: success rate (`success_without_retry`) with a pattern applied vs without;
* `historical_suggestions`: similar past escalations, successful outcomes first
  (escalation-protocol, `EscalationContext.historical_suggestions`).

All of that is pure functions over a list of outcomes. Storage is the `OutcomeStore` protocol
(the seed's JSON file becomes a Dapr state store in a service; `InMemoryOutcomeStore` serves
tests), and `OutcomeLearner` composes the two under the seed's method names.

Choices where the seed is vague:

* `validation_pass_rate` is a fraction in [0, 1], like every other rate in Agora.
* `execution_duration`, `completion_mode_used` and `validation_pass_rate` may be None: an
  outcome records what was measured, and an escalation's record or an agent's task run has no
  timing, completion mode or validations to report, rather than made-up values.
* `final_status` is an `OutcomeStatus`; an outcome *succeeded* when it is COMPLETED.
* Additions, marked in the field descriptions: `outcome_id` (stable store key, makes re-recording
  idempotent), `failure_type` (the triage classification), and `escalation_action`,
  `escalation_guidance`, `escalation_confidence`, `escalation_id` (the escalation decision taken
  for this sheet, if any), which `historical_suggestions` turns into the escalation module's
  `HistoricalSuggestion`.
* No caching of detected patterns: the store may be shared by several replicas, so a cache here
  could not tell when another replica recorded an outcome.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agora.core.checks import RecordedError, ValidationResult
from agora.core.escalation.decisions import EscalationAction
from agora.core.escalation.suggestions import HistoricalSuggestion, rank_suggestions
from agora.core.limits import MAX_ITEMS
from agora.core.similarity import jaccard
from agora.core.triage import FailureType, content_tokens

MIN_OUTCOMES_FOR_PATTERNS = 5
"""Pattern detection runs only over at least this many outcomes (outcomes-learning: ">= 5")."""

MIN_PATTERN_FREQUENCY = 2
"""A pattern must show in at least this many distinct outcomes: once is an event, twice recurs."""

DEFAULT_SIMILAR_LIMIT = 10
DEFAULT_PATTERN_LIMIT = 5
DEFAULT_SUGGESTION_LIMIT = 5

SIMILARITY_WEIGHTS: dict[str, float] = {
    "text": 0.35,
    "error_codes": 0.20,
    "failure_categories": 0.15,
    "validation_types": 0.10,
    "failure_type": 0.10,
    "job_id": 0.05,
    "sheet_id": 0.05,
}
"""Weight of each similarity component (see `similarity`). Free text weighs most because it carries
the most information; error codes next because they are precise; identity of job and sheet least,
because the same job failing for a different reason is not a similar situation."""


class OutcomeStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ABORTED = "aborted"


class SheetOutcome(BaseModel):
    """Structured outcome of one sheet execution, kept for learning and pattern detection:
    its checks (`validation_results`) and errors (`error_history`) among the rest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sheet_id: str = Field(min_length=1)
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
        description="Addition: stable key in the store; recording the same id again replaces it.",
    )
    failure_type: FailureType | None = Field(
        default=None, description="Addition: the triage classification of the failure, if any."
    )
    escalation_action: EscalationAction | None = Field(
        default=None, description="Addition: the escalation decision taken for this sheet, if any."
    )
    escalation_guidance: str | None = Field(default=None, description="Addition: guidance given with it.")
    escalation_confidence: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Addition: the confidence that triggered the escalation (required with the action).",
    )
    escalation_id: str | None = Field(default=None, description="Addition: that escalation's id, when known.")

    @model_validator(mode="after")
    def _escalation_is_complete(self) -> SheetOutcome:
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
            {kind for result in _failed(self.validation_results) if (kind := _validation_type(result))}
        )


FAILURE_CATEGORIES = ("missing", "malformed", "incomplete", "stale", "error")
"""The seed's failure categories. Others are accepted and counted as given."""


# --- deriving an outcome's fields from its validation results --------------------------------


def _failed(results: Iterable[ValidationResult]) -> list[ValidationResult]:
    return [result for result in results if result.passed is False]


def _validation_type(result: ValidationResult) -> str:
    return result.kind.strip()


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
    for result in _failed(validation_results):
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


def with_derived_fields(outcome: SheetOutcome) -> SheetOutcome:
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


# --- pattern detection ----------------------------------------------------------------------


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
        self.outcomes: dict[str, SheetOutcome] = {}
        self.occurrences = 0
        self.fixes: Counter[str] = Counter()
        self.details: Counter[str] = Counter()

    def add(self, outcome: SheetOutcome, times: int = 1) -> None:
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
    outcomes: Sequence[SheetOutcome],
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
        for result in _failed(outcome.validation_results):
            fix = result.suggested_fix.strip()
            keys = [
                (PatternType.VALIDATION_FAILURE, _validation_type(result)),
                (PatternType.FAILURE_CATEGORY, result.failure_category.strip().lower()),
                (PatternType.SEMANTIC_FAILURE, normalise_phrase(result.failure_reason)),
            ]
            for kind, key in keys:
                if key and fix:
                    tallies[(kind, key)].fixes[fix] += 1
            if kind_key := _validation_type(result):
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


# --- similarity ------------------------------------------------------------------------------


class OutcomeQuery(BaseModel):
    """What the caller knows about the current situation; every field is optional, and only the
    fields given take part in similarity."""

    model_config = ConfigDict(extra="forbid")

    job_id: str | None = None
    sheet_id: str | None = None
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


def outcome_text(outcome: SheetOutcome) -> str:
    """What the free-text part of similarity compares with: the semantic phrases, the failure
    reasons of failed validations (normalised like the phrases, so one file name does not make
    two outcomes look different), the error messages and the grounding guidance. (Not the
    stdout/stderr tails: long logs would swamp the Jaccard ratio with unrelated words.)"""
    parts = [*outcome.semantic_patterns]
    parts += [normalise_phrase(r.failure_reason) for r in _failed(outcome.validation_results)]
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
        "sheet_id": query.sheet_id is not None,
    }
    return [name for name, present in given.items() if present]


def similarity(outcome: SheetOutcome, context: QueryLike) -> float:
    """How similar a past outcome is to the query, in [0, 1].

    Components, each in [0, 1]:

    * text: Jaccard of the `content_tokens` (normalised words without stopwords) of `query.text`
      and of `outcome_text(outcome)`;
    * error_codes: Jaccard of the (upper-cased) error code sets;
    * failure_categories: Jaccard of the query's categories and the outcome's categories with a
      count > 0;
    * validation_types: Jaccard of the query's types and the outcome's failed validation types;
    * failure_type, job_id, sheet_id: 1 when equal, else 0.

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
        "sheet_id": float(query.sheet_id == outcome.sheet_id),
    }
    names = _components(query)
    weight = sum(SIMILARITY_WEIGHTS[name] for name in names)
    if not weight:
        return 0.0
    return sum(SIMILARITY_WEIGHTS[name] * scores[name] for name in names) / weight


class ScoredOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: SheetOutcome
    score: float = Field(ge=0.0, le=1.0)


def rank_similar(outcomes: Iterable[SheetOutcome], context: QueryLike) -> list[ScoredOutcome]:
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
    outcomes: Iterable[SheetOutcome], context: QueryLike, limit: int = DEFAULT_SIMILAR_LIMIT
) -> list[SheetOutcome]:
    """The `limit` outcomes most similar to `context` (see `similarity`, `rank_similar`)."""
    _check_limit(limit)
    return [s.outcome for s in rank_similar(outcomes, context)[:limit]]


def _check_limit(limit: int) -> None:
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit!r}")


# --- prompt injection -----------------------------------------------------------------------


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
    _check_limit(limit)
    query = as_query(context)
    matched = [p for p in patterns if _relevant(p, query)]
    others = [p for p in patterns if not _relevant(p, query)]
    return (matched + others)[:limit]


def get_relevant_patterns(
    outcomes: Sequence[SheetOutcome],
    context: QueryLike,
    limit: int = DEFAULT_PATTERN_LIMIT,
    *,
    min_outcomes: int = MIN_OUTCOMES_FOR_PATTERNS,
) -> list[str]:
    """Pattern descriptions for prompt injection, e.g.
    "⚠️ Common issue: file_exists validation tends to fail (seen 3x). Suggested fix: ...".
    Store the texts actually injected in `SheetOutcome.patterns_applied`."""
    patterns = detect_patterns(outcomes, min_outcomes=min_outcomes)
    return [p.description for p in select_relevant_patterns(patterns, context, limit)]


PROMPT_HEADING = "Lessons from earlier runs of similar work:"


def format_patterns_for_prompt(patterns: Sequence[str], heading: str = PROMPT_HEADING) -> str:
    """One block to append to a prompt: the heading and one bullet per pattern ("" if none)."""
    if not patterns:
        return ""
    return "\n".join([heading, *(f"- {p}" for p in patterns)])


# --- effectiveness --------------------------------------------------------------------------

_SEEN = re.compile(r"\s*\(seen \d+x\)")


def stable_pattern_text(text: str) -> str:
    """A pattern text without its "(seen Nx)" count, which grows as history does: the same
    pattern injected at different times counts as one for effectiveness."""
    return _SEEN.sub("", text).strip()


class PatternEffectiveness(BaseModel):
    """How outcomes fared with a pattern in their prompt vs without (success = success_without_retry)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str
    applied_count: int = Field(ge=0)
    applied_successes: int = Field(ge=0)
    applied_success_rate: float | None = Field(ge=0.0, le=1.0, description="None when never applied.")
    baseline_count: int = Field(ge=0, description="Outcomes whose prompt did not have the pattern.")
    baseline_successes: int = Field(ge=0)
    baseline_success_rate: float | None = Field(ge=0.0, le=1.0, description="None without a baseline.")
    lift: float | None = Field(description="applied - baseline success rate; None if either is unknown.")


def effectiveness_of(outcomes: Sequence[SheetOutcome], pattern: str) -> PatternEffectiveness:
    """Success rate of outcomes where `pattern` was applied vs the outcomes where it was not.
    Patterns are compared by `stable_pattern_text`."""
    wanted = stable_pattern_text(pattern)
    applied = [o for o in outcomes if wanted in {stable_pattern_text(p) for p in o.patterns_applied}]
    applied_ids = {o.outcome_id for o in applied}
    baseline = [o for o in outcomes if o.outcome_id not in applied_ids]
    applied_ok = sum(o.success_without_retry for o in applied)
    baseline_ok = sum(o.success_without_retry for o in baseline)
    applied_rate = applied_ok / len(applied) if applied else None
    baseline_rate = baseline_ok / len(baseline) if baseline else None
    return PatternEffectiveness(
        pattern=wanted,
        applied_count=len(applied),
        applied_successes=applied_ok,
        applied_success_rate=applied_rate,
        baseline_count=len(baseline),
        baseline_successes=baseline_ok,
        baseline_success_rate=baseline_rate,
        lift=applied_rate - baseline_rate if applied_rate is not None and baseline_rate is not None else None,
    )


def pattern_effectiveness(outcomes: Sequence[SheetOutcome]) -> list[PatternEffectiveness]:
    """`effectiveness_of` every pattern applied at least once; highest lift first (unknown lift
    last), then most applied, then by text."""
    patterns = sorted({stable_pattern_text(p) for o in outcomes for p in o.patterns_applied})
    results = [effectiveness_of(outcomes, p) for p in patterns]
    results.sort(key=lambda r: (r.lift is None, -(r.lift or 0.0), -r.applied_count, r.pattern))
    return results


# --- historical suggestions -----------------------------------------------------------------


def historical_suggestions(
    outcomes: Iterable[SheetOutcome], context: QueryLike, limit: int = DEFAULT_SUGGESTION_LIMIT
) -> list[HistoricalSuggestion]:
    """Past escalations similar to `context`, as `EscalationContext.historical_suggestions`:
    outcomes with an `escalation_action` and a similarity > 0 (any, for an empty query), ordered
    by `rank_suggestions` (successful outcomes first: what worked is the useful suggestion;
    then by similarity; equal ones most recent first). At most `limit`."""
    _check_limit(limit)
    suggestions: list[HistoricalSuggestion] = []
    for scored in rank_similar((o for o in outcomes if o.escalation_action is not None), context):
        past = scored.outcome
        action, confidence = past.escalation_action, past.escalation_confidence
        if action is None or confidence is None:  # excluded above / by validation; narrows the types
            continue
        suggestions.append(
            HistoricalSuggestion(
                action=action,
                confidence=confidence,
                outcome_succeeded=past.succeeded,
                guidance=past.escalation_guidance,
                similarity=scored.score,
                escalation_id=past.escalation_id,
            )
        )
    return rank_suggestions(suggestions)[:limit]


# --- storage and the learner ----------------------------------------------------------------


class OutcomeStore(Protocol):
    """Where outcomes live. A service implements it over a Dapr state store; this module only
    needs these three operations."""

    async def add(self, outcome: SheetOutcome) -> None:
        """Store the outcome; an outcome with the same `outcome_id` is replaced."""
        ...

    async def all(self) -> list[SheetOutcome]:
        """Every outcome, in the order they were first recorded."""
        ...

    async def recent(self, n: int) -> list[SheetOutcome]:
        """The last `n` recorded outcomes, oldest first."""
        ...


class InMemoryOutcomeStore:
    """`OutcomeStore` in a dict, for tests and embedded use."""

    def __init__(self, outcomes: Iterable[SheetOutcome] = ()) -> None:
        self._outcomes: dict[str, SheetOutcome] = {}
        for outcome in outcomes:
            self._outcomes[outcome.outcome_id] = outcome

    async def add(self, outcome: SheetOutcome) -> None:
        self._outcomes[outcome.outcome_id] = outcome

    async def all(self) -> list[SheetOutcome]:
        return list(self._outcomes.values())

    async def recent(self, n: int) -> list[SheetOutcome]:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n!r}")
        return list(self._outcomes.values())[-n:] if n else []


class OutcomeLearner:
    """Records outcomes and answers the learning questions over the stored history.

    `history_limit` bounds the work per question: when set, only the last `history_limit`
    outcomes are analysed (`store.recent`), else all of them.
    """

    def __init__(
        self,
        store: OutcomeStore,
        *,
        min_outcomes: int = MIN_OUTCOMES_FOR_PATTERNS,
        history_limit: int | None = None,
    ) -> None:
        if min_outcomes < 1:
            raise ValueError(f"min_outcomes must be >= 1, got {min_outcomes!r}")
        if history_limit is not None and history_limit < 1:
            raise ValueError(f"history_limit must be >= 1 or None, got {history_limit!r}")
        self.store = store
        self.min_outcomes = min_outcomes
        self.history_limit = history_limit

    async def _history(self) -> list[SheetOutcome]:
        if self.history_limit is None:
            return await self.store.all()
        return await self.store.recent(self.history_limit)

    async def record(self, outcome: SheetOutcome) -> SheetOutcome:
        """Store the outcome (with fields derived from its validation results, see
        `with_derived_fields`). When the history including it has at least `min_outcomes`
        outcomes, pattern detection runs and `patterns_detected` is set on it. Returns what
        was stored."""
        outcome = with_derived_fields(outcome)
        history = [o for o in await self._history() if o.outcome_id != outcome.outcome_id]
        patterns = detect_patterns([*history, outcome], min_outcomes=self.min_outcomes)
        if patterns:
            outcome = outcome.model_copy(update={"patterns_detected": [p.description for p in patterns]})
        await self.store.add(outcome)
        return outcome

    async def detect_patterns(self) -> list[DetectedPattern]:
        return detect_patterns(await self._history(), min_outcomes=self.min_outcomes)

    async def get_patterns(self, job_name: str) -> list[str]:
        """Descriptions of the patterns detected across the outcomes of job `job_name`."""
        job_outcomes = [o for o in await self._history() if o.job_id == job_name]
        return [p.description for p in detect_patterns(job_outcomes, min_outcomes=self.min_outcomes)]

    async def query_similar(
        self, context: QueryLike, limit: int = DEFAULT_SIMILAR_LIMIT
    ) -> list[SheetOutcome]:
        return query_similar(await self._history(), context, limit)

    async def get_relevant_patterns(
        self, context: QueryLike, limit: int = DEFAULT_PATTERN_LIMIT
    ) -> list[str]:
        return get_relevant_patterns(await self._history(), context, limit, min_outcomes=self.min_outcomes)

    async def pattern_effectiveness(self) -> list[PatternEffectiveness]:
        return pattern_effectiveness(await self._history())

    async def get_similar_escalation(
        self, context: QueryLike, limit: int = DEFAULT_SUGGESTION_LIMIT
    ) -> list[HistoricalSuggestion]:
        """Similar past escalations for `EscalationContext.historical_suggestions`."""
        return historical_suggestions(await self._history(), context, limit)
