"""Outcome learning: records, pattern detection, similarity, prompt patterns, effectiveness,
historical suggestions, the in-memory store and the learner."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from agora.core.checks import ValidationResult
from agora.core.escalation.decisions import EscalationAction
from agora.core.escalation.suggestions import HistoricalSuggestion
from agora.core.outcomes.derived import normalise_phrase, summarise_validation, with_derived_fields
from agora.core.outcomes.effectiveness import (
    PatternEffectiveness,
    effectiveness_of,
    pattern_effectiveness,
    stable_pattern_text,
)
from agora.core.outcomes.learner import OutcomeLearner
from agora.core.outcomes.patterns import (
    MIN_OUTCOMES_FOR_PATTERNS,
    DetectedPattern,
    PatternType,
    detect_patterns,
)
from agora.core.outcomes.prompts import format_patterns_for_prompt, get_relevant_patterns
from agora.core.outcomes.record import OutcomeStatus, StepOutcome
from agora.core.outcomes.similar import OutcomeQuery, query_similar, rank_similar, similarity
from agora.core.outcomes.store import InMemoryOutcomeStore, OutcomeStore
from agora.core.outcomes.suggestions import historical_suggestions
from agora.core.similarity import jaccard
from agora.core.triage.failures import FailureType

T0 = datetime(2026, 1, 1, tzinfo=UTC)
_counter = iter(range(1_000_000))


def outcome(**fields: Any) -> StepOutcome:
    n = next(_counter)
    defaults: dict[str, Any] = {
        "outcome_id": f"o-{n:04d}",
        "step_id": "step-1",
        "job_id": "job-a",
        "execution_duration": 1.5,
        "retry_count": 0,
        "completion_mode_used": False,
        "final_status": OutcomeStatus.COMPLETED,
        "validation_pass_rate": 1.0,
        "success_without_retry": True,
        "timestamp": T0 + timedelta(minutes=n),
    }
    return StepOutcome(**(defaults | fields))


def failed(**fields: Any) -> StepOutcome:
    defaults: dict[str, Any] = {
        "final_status": OutcomeStatus.FAILED,
        "validation_pass_rate": 0.5,
        "success_without_retry": False,
        "retry_count": 1,
    }
    return outcome(**(defaults | fields))


def not_created(name: str, fix: str = "Ensure file is created in workspace/") -> ValidationResult:
    return ValidationResult(
        kind="file_exists",
        passed=False,
        failure_category="missing",
        failure_reason=f"File '{name}' was not created",
        suggested_fix=fix,
    )


PASSED = ValidationResult(kind="content_contains", passed=True)


# --- the record ------------------------------------------------------------------------------


def test_step_outcome_defaults_follow_the_seed() -> None:
    o = StepOutcome(
        step_id="s",
        job_id="j",
        validation_results=[],
        execution_duration=0.0,
        retry_count=0,
        completion_mode_used=False,
        final_status=OutcomeStatus.COMPLETED,
        validation_pass_rate=1.0,
        success_without_retry=True,
    )
    assert o.patterns_detected == o.semantic_patterns == o.fix_suggestions == o.patterns_applied == []
    assert o.failure_category_counts == {}
    assert (o.stdout_tail, o.stderr_tail, o.error_history) == ("", "", [])
    assert (o.grounding_passed, o.grounding_confidence, o.grounding_guidance) == (None, None, None)
    assert o.timestamp.tzinfo is not None
    assert o.outcome_id


@pytest.mark.parametrize(
    ("field", "value"),
    [("validation_pass_rate", 1.5), ("retry_count", -1), ("grounding_confidence", 2.0), ("step_id", "")],
)
def test_step_outcome_rejects_out_of_range_fields(field: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        outcome(**{field: value})


def test_step_outcome_json_round_trip() -> None:
    o = failed(
        validation_results=[not_created("a.md"), PASSED],
        error_history=[{"error_code": "E009", "category": "transient", "message": "Rate limited"}],
        failure_type=FailureType.EXTERNAL_FAULT,
        escalation_action="retry",
        escalation_guidance="wait a minute",
        escalation_confidence=0.4,
        grounding_passed=False,
        grounding_confidence=0.3,
        stderr_tail="Traceback ...",
        patterns_applied=["⚠️ Common issue: file_exists validation tends to fail (seen 3x)"],
    )
    assert StepOutcome.model_validate_json(o.model_dump_json()) == o


def test_normalise_phrase_drops_names_paths_and_numbers() -> None:
    assert normalise_phrase("File 'out.md' was not created") == "file was not created"
    assert normalise_phrase('file "b.txt" was NOT created!') == "file was not created"
    assert (
        normalise_phrase("Pattern not found in /tmp/w/report.md after 3 tries")
        == "pattern not found in after tries"
    )


def test_summarise_validation_reads_the_failed_results() -> None:
    summary = summarise_validation(
        [
            not_created("a.md"),
            not_created("b.md", "Add missing import"),
            PASSED,
            ValidationResult(passed=False),
        ]
    )
    assert summary.failure_category_counts == {"missing": 2}
    assert summary.semantic_patterns == ["file was not created"]
    assert summary.fix_suggestions == ["Ensure file is created in workspace/", "Add missing import"]


def test_derived_fields_fill_only_what_is_empty() -> None:
    derived = with_derived_fields(failed(validation_results=[not_created("a.md")]))
    assert derived.failure_category_counts == {"missing": 1}
    assert derived.semantic_patterns == ["file was not created"]
    kept = with_derived_fields(failed(validation_results=[not_created("a.md")], semantic_patterns=["mine"]))
    assert kept.semantic_patterns == ["mine"]
    plain = outcome()
    assert with_derived_fields(plain) is plain


# --- pattern detection -----------------------------------------------------------------------


def history_with_missing_files(n: int) -> list[StepOutcome]:
    return [failed(validation_results=[not_created(f"f{i}.md")]) for i in range(n)]


def test_no_patterns_below_five_outcomes() -> None:
    assert MIN_OUTCOMES_FOR_PATTERNS == 5
    assert detect_patterns(history_with_missing_files(4)) == []


def test_patterns_at_five_outcomes() -> None:
    patterns = detect_patterns(history_with_missing_files(5))
    assert {(p.pattern_type, p.key) for p in patterns} == {
        (PatternType.VALIDATION_FAILURE, "file_exists"),
        (PatternType.FAILURE_CATEGORY, "missing"),
        (PatternType.SEMANTIC_FAILURE, "file was not created"),
    }
    assert all(p.frequency == 5 and p.total_outcomes == 5 and p.confidence == 1.0 for p in patterns)


def test_min_outcomes_and_frequency_are_parameters() -> None:
    assert detect_patterns(history_with_missing_files(2), min_outcomes=2)
    assert detect_patterns(history_with_missing_files(5), min_frequency=6) == []
    with pytest.raises(ValueError):
        detect_patterns([], min_outcomes=0)


def test_validation_failure_text_follows_the_seed_example() -> None:
    history = history_with_missing_files(3) + [outcome() for _ in range(3)]
    [pattern] = [p for p in detect_patterns(history) if p.pattern_type is PatternType.VALIDATION_FAILURE]
    assert pattern.description == (
        "⚠️ Common issue: file_exists validation tends to fail (seen 3x). "
        "Suggested fix: Ensure file is created in workspace/"
    )
    assert pattern.pattern_id == "validation_failure:file_exists"


def test_failure_category_counts() -> None:
    history = [
        failed(failure_category_counts={"missing": 2, "stale": 1, "malformed": 0}),
        failed(failure_category_counts={"missing": 1, "malformed": 0}),
        failed(failure_category_counts={"stale": 1}),
        outcome(),
        outcome(),
        outcome(),
    ]
    by_key = {p.key: p for p in detect_patterns(history) if p.pattern_type is PatternType.FAILURE_CATEGORY}
    assert set(by_key) == {"missing", "stale"}  # malformed is always 0
    assert (by_key["missing"].frequency, by_key["missing"].occurrences) == (2, 3)
    assert by_key["missing"].confidence == pytest.approx(2 / 6)
    assert by_key["missing"].success_rate == 0.0
    assert by_key["missing"].description == "⚠️ Common issue: 'missing' validation failures recur (seen 2x)"


def test_a_category_in_a_single_outcome_is_not_a_pattern() -> None:
    history = [failed(failure_category_counts={"stale": 4})] + [outcome() for _ in range(5)]
    assert detect_patterns(history) == []


def test_error_code_recurrences() -> None:
    rate_limited = {"error_code": "E009", "category": "transient", "message": "Rate limited"}
    history = [
        failed(error_history=[rate_limited, rate_limited]),
        failed(error_history=[{**rate_limited, "error_code": " e009 "}]),
        outcome(error_history=[rate_limited]),
        failed(error_history=[{"error_code": "E001", "message": "Disk full"}]),
        outcome(),
    ]
    codes = [p for p in detect_patterns(history) if p.pattern_type is PatternType.ERROR_CODE]
    assert [p.key for p in codes] == ["E009"]
    [e009] = codes
    assert (e009.frequency, e009.occurrences) == (3, 4)
    assert e009.success_rate == pytest.approx(1 / 3)
    assert e009.description == "⚠️ Recurring error E009 (transient: Rate limited) (seen 3x)"


def test_semantic_patterns_aggregate_normalised_phrases() -> None:
    history = [
        failed(semantic_patterns=["File 'a.md' not created"]),
        failed(semantic_patterns=["file 'b.md' not created", "content empty"]),
        failed(semantic_patterns=["content empty"]),
        failed(semantic_patterns=["pattern not found"]),
        outcome(),
    ]
    semantic = [p for p in detect_patterns(history) if p.pattern_type is PatternType.SEMANTIC_FAILURE]
    assert {p.key: p.frequency for p in semantic} == {"file not created": 2, "content empty": 2}
    assert '⚠️ Recurring failure: "content empty" (seen 2x)' in {p.description for p in semantic}


def test_patterns_are_sorted_by_confidence_then_frequency() -> None:
    history = [
        failed(error_history=[{"error_code": "E1"}], semantic_patterns=["x broke"]),
        failed(error_history=[{"error_code": "E1"}], semantic_patterns=["x broke"]),
        failed(error_history=[{"error_code": "E1"}]),
        outcome(),
        outcome(),
    ]
    assert [p.key for p in detect_patterns(history)] == ["E1", "x broke"]
    assert detect_patterns(history)[0].last_seen == history[2].timestamp


def test_detected_pattern_json_round_trip() -> None:
    for pattern in detect_patterns(history_with_missing_files(5)):
        assert DetectedPattern.model_validate_json(pattern.model_dump_json()) == pattern


# --- similarity ------------------------------------------------------------------------------


def test_similarity_is_the_weighted_mean_of_the_components_given() -> None:
    o = failed(
        error_history=[{"error_code": "E1"}, {"error_code": "E2"}], failure_type=FailureType.LOOP_DETECTED
    )
    assert similarity(o, {"error_codes": ["e1", "E2"]}) == 1.0
    assert similarity(o, {"error_codes": ["E1"]}) == pytest.approx(0.5)
    # error codes weigh 0.20 and the failure type 0.10: (0.2 * 0.5 + 0.1 * 1) / 0.3
    both = {"error_codes": ["E1"], "failure_type": "loop_detected"}
    assert similarity(o, both) == pytest.approx((0.2 * 0.5 + 0.1) / 0.3)
    assert similarity(o, {}) == 0.0
    assert similarity(o, {"job_id": "job-a"}) == 1.0
    assert similarity(o, {"job_id": "job-b"}) == 0.0


def test_text_similarity_uses_normalised_words() -> None:
    o = failed(validation_results=[not_created("a.md")])
    assert similarity(o, {"text": "FILE WAS NOT CREATED!"}) == pytest.approx(
        jaccard({"file", "created"}, {"file", "created"})
    )
    assert similarity(o, {"text": "the output file"}) == pytest.approx(
        jaccard({"output", "file"}, {"file", "created"})
    )


def test_query_similar_ranks_by_score_then_recency() -> None:
    exact = failed(semantic_patterns=["database connection refused"], error_history=[{"error_code": "DB1"}])
    close = failed(semantic_patterns=["database connection slow"], error_history=[{"error_code": "DB1"}])
    old_same = failed(semantic_patterns=["database connection slow"], error_history=[{"error_code": "DB1"}])
    unrelated = failed(semantic_patterns=["file not created"])
    close_recent = close.model_copy(update={"timestamp": T0 + timedelta(days=30)})
    history = [unrelated, old_same, exact, close_recent]
    query = {"text": "database connection refused", "error_codes": ["DB1"]}
    assert query_similar(history, query) == [exact, close_recent, old_same]
    assert query_similar(history, query, limit=1) == [exact]
    assert query_similar(history, query, limit=0) == []
    scores = [s.score for s in rank_similar(history, query)]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] == 1.0


def test_query_similar_with_an_empty_query_returns_the_most_recent() -> None:
    history = [outcome(), outcome(), outcome()]
    assert query_similar(history, OutcomeQuery(), limit=2) == [history[2], history[1]]


def test_query_rejects_unknown_keys_and_negative_limits() -> None:
    with pytest.raises(ValidationError):
        query_similar([], {"sheet_num": 3})
    with pytest.raises(ValueError):
        query_similar([], {}, limit=-1)


# --- prompt patterns -------------------------------------------------------------------------


def prompt_history() -> list[StepOutcome]:
    rate_limited = {"error_code": "E009", "category": "transient", "message": "Rate limited"}
    return [
        failed(validation_results=[not_created("a.md")], error_history=[rate_limited]),
        failed(validation_results=[not_created("b.md")]),
        failed(validation_results=[not_created("c.md")]),
        failed(error_history=[rate_limited]),
        outcome(),
        outcome(),
    ]


def test_get_relevant_patterns_puts_matching_patterns_first() -> None:
    lines = get_relevant_patterns(prompt_history(), {"error_codes": ["E009"]}, limit=2)
    assert lines[0] == "⚠️ Recurring error E009 (transient: Rate limited) (seen 2x)"
    assert lines[1].startswith("⚠️ Common issue: 'missing'")  # then the rest, by confidence
    by_type = get_relevant_patterns(prompt_history(), {"validation_types": ["file_exists"]}, limit=1)
    assert by_type == [
        "⚠️ Common issue: file_exists validation tends to fail (seen 3x). "
        "Suggested fix: Ensure file is created in workspace/"
    ]
    by_text = get_relevant_patterns(prompt_history(), {"text": "the report was not created"}, limit=1)
    assert by_text[0].startswith('⚠️ Recurring failure: "file was not created"')


def test_get_relevant_patterns_needs_five_outcomes() -> None:
    assert get_relevant_patterns(prompt_history()[:4], {"error_codes": ["E009"]}) == []


def test_format_patterns_for_prompt() -> None:
    assert format_patterns_for_prompt([]) == ""
    assert format_patterns_for_prompt(["a", "b"], heading="Learned:") == "Learned:\n- a\n- b"


# --- effectiveness ---------------------------------------------------------------------------

HINT = "⚠️ Common issue: file_exists validation tends to fail (seen 3x)"


def test_effectiveness_compares_applied_with_not_applied() -> None:
    later_hint = HINT.replace("3x", "7x")  # the same pattern, injected when the count had grown
    history = [
        outcome(patterns_applied=[HINT]),
        outcome(patterns_applied=[later_hint]),
        outcome(patterns_applied=[HINT, "other"]),
        failed(patterns_applied=[HINT]),
        outcome(),
        failed(),
        failed(),
        failed(),
    ]
    result = effectiveness_of(history, HINT)
    assert result.pattern == "⚠️ Common issue: file_exists validation tends to fail"
    assert (result.applied_count, result.applied_successes, result.applied_success_rate) == (4, 3, 0.75)
    assert (result.baseline_count, result.baseline_successes, result.baseline_success_rate) == (4, 1, 0.25)
    assert result.lift == pytest.approx(0.5)
    assert PatternEffectiveness.model_validate_json(result.model_dump_json()) == result


def test_effectiveness_success_means_success_without_retry() -> None:
    retried = outcome(patterns_applied=[HINT], success_without_retry=False, retry_count=2)
    result = effectiveness_of([retried, outcome()], HINT)
    assert (result.applied_success_rate, result.baseline_success_rate, result.lift) == (0.0, 1.0, -1.0)


def test_effectiveness_without_a_baseline_has_no_lift() -> None:
    result = effectiveness_of([outcome(patterns_applied=[HINT])], HINT)
    assert (result.applied_success_rate, result.baseline_success_rate, result.lift) == (1.0, None, None)
    never = effectiveness_of([outcome()], HINT)
    assert (never.applied_count, never.applied_success_rate, never.lift) == (0, None, None)


def test_pattern_effectiveness_lists_every_applied_pattern_best_first() -> None:
    history = [
        outcome(patterns_applied=["helps"]),
        failed(patterns_applied=["hurts"]),
        outcome(),
        failed(),
    ]
    assert [r.pattern for r in pattern_effectiveness(history)] == ["helps", "hurts"]
    assert [r.lift for r in pattern_effectiveness(history)] == [pytest.approx(2 / 3), pytest.approx(-2 / 3)]
    assert stable_pattern_text("x (seen 12x). Suggested fix: y") == "x. Suggested fix: y"


# --- historical suggestions ------------------------------------------------------------------


def test_historical_suggestions_put_successful_outcomes_first() -> None:
    text = ["database connection refused"]
    escalated: dict[str, Any] = {"escalation_confidence": 0.3}
    failed_close = failed(
        semantic_patterns=text, escalation_action="retry", escalation_id="esc-1", **escalated
    )
    worked_far = outcome(
        semantic_patterns=["database slow"],
        escalation_action="modify_prompt",
        escalation_guidance="use the replica",
        **escalated,
    )
    worked_close = outcome(semantic_patterns=text, escalation_action="skip", **escalated)
    not_escalated = outcome(semantic_patterns=text)
    unrelated = outcome(semantic_patterns=["file not created"], escalation_action="abort", **escalated)
    history = [failed_close, worked_far, worked_close, not_escalated, unrelated]

    suggestions = historical_suggestions(history, {"text": "database connection refused"})
    assert [s.action for s in suggestions] == [EscalationAction.SKIP, "modify_prompt", "retry"]
    assert [s.outcome_succeeded for s in suggestions] == [True, True, False]
    assert suggestions[1].guidance == "use the replica"
    assert (suggestions[2].confidence, suggestions[2].escalation_id) == (0.3, "esc-1")
    assert suggestions[0].similarity == 1.0
    assert 0.0 < suggestions[1].similarity < 1.0
    assert (
        historical_suggestions(history, {"text": "database connection refused"}, limit=1)[0].action == "skip"
    )
    for suggestion in suggestions:
        assert HistoricalSuggestion.model_validate_json(suggestion.model_dump_json()) == suggestion


def test_an_escalated_outcome_gives_its_confidence() -> None:
    with pytest.raises(ValidationError, match="escalation_confidence"):
        outcome(escalation_action="retry")
    with pytest.raises(ValidationError):
        outcome(escalation_action="shrug", escalation_confidence=0.5)


# --- store and learner -----------------------------------------------------------------------


async def test_in_memory_store_keeps_order_and_replaces_by_id() -> None:
    store: OutcomeStore = InMemoryOutcomeStore()
    a, b, c = outcome(), outcome(), outcome()
    for o in (a, b, c):
        await store.add(o)
    updated_a = a.model_copy(update={"retry_count": 3})
    await store.add(updated_a)
    assert await store.all() == [updated_a, b, c]
    assert await store.recent(2) == [b, c]
    assert await store.recent(0) == []
    assert await store.recent(10) == [updated_a, b, c]
    with pytest.raises(ValueError):
        await store.recent(-1)


async def test_learner_detects_patterns_once_five_outcomes_exist() -> None:
    learner = OutcomeLearner(InMemoryOutcomeStore())
    recorded = [await learner.record(failed(validation_results=[not_created(f"{i}.md")])) for i in range(5)]
    assert [bool(o.patterns_detected) for o in recorded] == [False, False, False, False, True]
    assert (
        "⚠️ Common issue: file_exists validation tends to fail (seen 5x). "
        "Suggested fix: Ensure file is created in workspace/"
    ) in recorded[4].patterns_detected
    assert recorded[0].failure_category_counts == {"missing": 1}  # derived on record
    stored = await learner.store.all()
    assert stored == recorded
    assert await learner.detect_patterns() == detect_patterns(stored)


async def test_learner_answers_over_the_stored_history() -> None:
    escalated: dict[str, Any] = {"escalation_confidence": 0.4}
    history = [
        *prompt_history(),
        failed(job_id="job-b", semantic_patterns=["quota exhausted"], escalation_action="abort", **escalated),
        outcome(
            job_id="job-b", semantic_patterns=["quota exhausted"], escalation_action="retry", **escalated
        ),
    ]
    learner = OutcomeLearner(InMemoryOutcomeStore(history))
    assert await learner.get_relevant_patterns({"error_codes": ["E009"]}, limit=1) == [
        "⚠️ Recurring error E009 (transient: Rate limited) (seen 2x)"
    ]
    assert await learner.query_similar({"text": "quota exhausted"}) == [
        history[-1],
        history[-2],
    ]  # same score: newest first
    assert [s.action for s in historical_suggestions(history, {"text": "quota exhausted"})] == [
        "retry",
        "abort",
    ]
    assert await learner.pattern_effectiveness() == []


async def test_learner_history_limit_uses_only_recent_outcomes() -> None:
    history = history_with_missing_files(5) + [outcome() for _ in range(5)]
    limited = OutcomeLearner(InMemoryOutcomeStore(history), history_limit=5)
    assert await limited.detect_patterns() == []
    assert await OutcomeLearner(InMemoryOutcomeStore(history)).detect_patterns()
    with pytest.raises(ValueError):
        OutcomeLearner(InMemoryOutcomeStore(), history_limit=0)
