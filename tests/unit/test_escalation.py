"""Escalation core: checkpoint triggers, when to escalate, the ladder, and the record lifecycle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agora.core.errors import AgoraError, IllegalTransition, InvalidArgument, NotFound
from agora.core.escalation.checkpoints import (
    CheckpointContext,
    CheckpointGate,
    CheckpointTrigger,
    evaluate_checkpoint,
    should_checkpoint,
    trigger_matches,
)
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import (
    CheckpointAction,
    CheckpointResponse,
    EscalationAction,
    EscalationResponse,
    resume_message,
)
from agora.core.escalation.ladder import (
    DEFAULT_ESCALATION_CONFIG,
    EscalationConfig,
    EscalationLevel,
    escalation_level,
    next_level,
    should_escalate,
    within_retry_limit,
)
from agora.core.escalation.record import (
    AbortSummary,
    AgentNotWaiting,
    ConflictingEscalation,
    EscalationRecord,
    EscalationStatus,
    InvalidDecision,
    ParkRequest,
    PartialProgress,
    WaitingParty,
    WaitingPartyKind,
    complete_cleanup,
    expire,
    is_overdue,
    park,
    require_record,
    resolve,
)
from agora.core.escalation.suggestions import HistoricalSuggestion, rank_suggestions

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PARTY = WaitingParty(kind=WaitingPartyKind.PLAN_STEP, id="plan-1/step-3")


def ctx(step: int = 3, prompt: str = "Summarise the report", retry_count: int = 0) -> CheckpointContext:
    return CheckpointContext(job_id="job-1", step=step, prompt=prompt, retry_count=retry_count)


def esc_context(**overrides: Any) -> EscalationContext:
    data: dict[str, Any] = {
        "job_id": "job-1",
        "step": 3,
        "validation_results": [{"kind": "file_exists", "passed": False}],
        "confidence": 0.4,
        "retry_count": 2,
        "error_history": ["timeout", "missing output file"],
        "prompt_used": "Write report.md",
        "output_summary": "partial draft",
    }
    data.update(overrides)
    return EscalationContext.model_validate(data)


def parked(**kwargs: Any) -> EscalationRecord:
    return park("esc-1", PARTY, kwargs.pop("context", esc_context()), now=T0, why="low confidence", **kwargs)


# ------------------------------------------------------------------------------ checkpoints


def test_trigger_defaults_match_the_reference() -> None:
    trigger = CheckpointTrigger(name="all")
    assert trigger.steps is None
    assert trigger.prompt_contains is None
    assert trigger.min_retry_count is None
    assert trigger.requires_confirmation is True
    assert trigger.message == ""
    assert trigger_matches(trigger, ctx())  # no condition set: every step


@pytest.mark.parametrize(("step", "expected"), [(2, True), (3, False), (5, True), (0, False), (6, False)])
def test_step_numbers_match_exactly(step: int, expected: bool) -> None:
    assert trigger_matches(CheckpointTrigger(name="s", steps=[2, 5]), ctx(step=step)) is expected


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("please DELETE the old rows", True),
        ("Deploy to production", True),
        ("rm -RF /tmp/x", True),
        ("summarise the report", False),
        ("", False),
    ],
)
def test_keywords_are_case_insensitive_and_any_one_suffices(prompt: str, expected: bool) -> None:
    trigger = CheckpointTrigger(name="k", prompt_contains=["delete", "PRODUCTION", "rm -rf"])
    assert trigger_matches(trigger, ctx(prompt=prompt)) is expected


@pytest.mark.parametrize(("retries", "expected"), [(0, False), (1, False), (2, True), (3, True)])
def test_min_retry_count_is_inclusive(retries: int, expected: bool) -> None:
    assert (
        trigger_matches(CheckpointTrigger(name="r", min_retry_count=2), ctx(retry_count=retries)) is expected
    )


def test_conditions_combine_with_and() -> None:
    trigger = CheckpointTrigger(name="all3", steps=[3], prompt_contains=["deploy"], min_retry_count=1)
    assert trigger_matches(trigger, ctx(step=3, prompt="Deploy now", retry_count=1))
    assert not trigger_matches(trigger, ctx(step=4, prompt="Deploy now", retry_count=1))
    assert not trigger_matches(trigger, ctx(step=3, prompt="Build now", retry_count=1))
    assert not trigger_matches(trigger, ctx(step=3, prompt="Deploy now", retry_count=0))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("steps", []),
        ("steps", [-1]),
        ("prompt_contains", []),
        ("prompt_contains", [" "]),
        ("name", ""),
    ],
)
def test_trigger_rejects_conditions_that_cannot_mean_anything(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as info:
        CheckpointTrigger.model_validate({"name": "x", field: value})
    assert info.value.errors()[0]["loc"][0] == field


def test_should_checkpoint_returns_the_first_match_or_none() -> None:
    warn = CheckpointTrigger(name="warn", prompt_contains=["deploy"], requires_confirmation=False)
    confirm = CheckpointTrigger(name="confirm", steps=[3])
    assert should_checkpoint([warn, confirm], ctx(prompt="deploy it")) == warn
    assert should_checkpoint([warn, confirm], ctx(prompt="build it")) == confirm
    assert should_checkpoint([warn, confirm], ctx(step=9)) is None
    assert should_checkpoint(confirm, ctx()) == confirm  # a single trigger is accepted too
    assert should_checkpoint([], ctx()) is None


def test_warn_only_versus_requires_confirmation() -> None:
    warn = CheckpointTrigger(
        name="warn", prompt_contains=["deploy"], requires_confirmation=False, message="careful"
    )
    confirm = CheckpointTrigger(name="confirm", steps=[3])

    verdict = evaluate_checkpoint([warn], ctx(prompt="deploy"))
    assert (verdict.gate, verdict.trigger, verdict.message) == (CheckpointGate.WARN, warn, "careful")

    verdict = evaluate_checkpoint([warn, confirm], ctx(prompt="deploy"))  # the stricter one wins
    assert (verdict.gate, verdict.trigger) == (CheckpointGate.CONFIRM, confirm)
    assert "confirm" in verdict.message and "step 3" in verdict.message  # default message

    assert evaluate_checkpoint([warn, confirm], ctx(step=1)).gate is CheckpointGate.NONE


@pytest.mark.parametrize("model", [CheckpointResponse, EscalationResponse])
@pytest.mark.parametrize("prompt", [None, "", "   "])
def test_modify_prompt_without_a_prompt_is_invalid(model: type[Any], prompt: str | None) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate({"action": "modify_prompt", "modified_prompt": prompt})
    errors = info.value.errors()
    assert [e["loc"] for e in errors] == [("modified_prompt",)]
    assert "modified_prompt is required" in errors[0]["msg"]


def test_modified_prompt_only_with_actions_that_use_it() -> None:
    assert EscalationResponse(action="modify_prompt", modified_prompt="new").modified_prompt == "new"
    assert EscalationResponse(action="retry", modified_prompt="new").modified_prompt == "new"
    assert EscalationResponse(action="skip", modified_prompt="  ").modified_prompt is None  # blank = none
    assert CheckpointResponse(action="modify_prompt", modified_prompt="new").modified_prompt == "new"
    misuses: list[tuple[type[BaseModel], str]] = [
        (EscalationResponse, "skip"),
        (EscalationResponse, "abort"),
        (CheckpointResponse, "proceed"),
    ]
    for model, action in misuses:
        with pytest.raises(ValidationError) as info:
            model.model_validate({"action": action, "modified_prompt": "new"})
        assert info.value.errors()[0]["loc"] == ("modified_prompt",)


def test_a_bidder_to_hand_the_task_to_goes_only_with_reassign() -> None:
    assert EscalationResponse(action="reassign", reassign_to="b2").reassign_to == "b2"
    assert EscalationResponse(action="reassign").reassign_to is None  # the next-best bid
    with pytest.raises(ValidationError, match="reassign_to is only used with action reassign, not retry"):
        EscalationResponse.model_validate({"action": "retry", "reassign_to": "b2"})


def test_an_invalid_action_is_reported_as_such() -> None:
    with pytest.raises(ValidationError) as info:
        CheckpointResponse.model_validate({"action": "retry"})  # not a checkpoint action
    assert [e["loc"] for e in info.value.errors()] == [("action",)]


def test_response_defaults() -> None:
    response = EscalationResponse(action=EscalationAction.RETRY)
    assert (response.modified_prompt, response.guidance, response.confidence_boost) == (None, None, 0.0)
    assert CheckpointResponse(action=CheckpointAction.PROCEED).guidance is None
    with pytest.raises(ValidationError):
        EscalationResponse(action="retry", confidence_boost=1.5)


# ------------------------------------------------------------------------- should_escalate


def test_config_defaults_match_the_references() -> None:
    config = EscalationConfig()
    assert config.confidence_threshold == 0.6
    assert config.auto_retry_on_first_failure is True
    assert config.retry_limit == 3


@pytest.mark.parametrize(
    ("confidence", "expected"), [(0.59, True), (0.5999999, True), (0.6, False), (0.61, False)]
)
def test_should_escalate_below_threshold_only(confidence: float, expected: bool) -> None:
    assert should_escalate(confidence, attempt=2) is expected


def test_first_attempt_is_auto_retried_unless_disabled() -> None:
    assert should_escalate(0.1, attempt=1) is False
    no_auto = EscalationConfig(auto_retry_on_first_failure=False)
    assert should_escalate(0.1, attempt=1, config=no_auto) is True
    assert should_escalate(0.6, attempt=1, config=no_auto) is False
    assert should_escalate(0.1, attempt=2, config=no_auto) is True


def test_confidence_boost_counts_towards_the_threshold() -> None:
    assert should_escalate(0.5, attempt=2) is True
    assert should_escalate(0.5, attempt=2, confidence_boost=0.1) is False
    assert should_escalate(0.5, attempt=2, confidence_boost=0.05) is True
    assert should_escalate(0.9, attempt=2, confidence_boost=0.5) is False  # capped at 1.0, still fine


@pytest.mark.parametrize(
    "kwargs",
    [
        {"confidence": 0.5, "attempt": 0},
        {"confidence": 1.1, "attempt": 1},
        {"confidence": -0.1, "attempt": 2},
    ],
)
def test_should_escalate_refuses_nonsense_inputs(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        should_escalate(kwargs["confidence"], attempt=kwargs["attempt"])


# ---------------------------------------------------------------------- retry limit, ladder


@pytest.mark.parametrize(("attempt", "expected"), [(1, True), (2, True), (3, False), (4, False)])
def test_retry_limit_is_three_attempts(attempt: int, expected: bool) -> None:
    assert within_retry_limit(attempt) is expected


@pytest.mark.parametrize(
    ("attempt", "level"),
    [
        (1, EscalationLevel.AUTO_RETRY),
        (2, EscalationLevel.AUTO_RETRY),
        (3, EscalationLevel.AGENT_ANALYSIS),
        (4, EscalationLevel.NOTIFY),
        (5, EscalationLevel.REQUIRE_DECISION),
        (9, EscalationLevel.REQUIRE_DECISION),
        (10, EscalationLevel.ABORT),
        (11, EscalationLevel.ABORT),
    ],
)
def test_every_default_ladder_step(attempt: int, level: EscalationLevel) -> None:
    assert escalation_level(attempt) is level
    assert escalation_level(attempt, DEFAULT_ESCALATION_CONFIG) is level


def test_ladder_levels_are_ordered_and_only_decision_waits() -> None:
    assert [level.rank for level in EscalationLevel] == [0, 1, 2, 3, 4]
    assert [level for level in EscalationLevel if level.waits_for_human] == [EscalationLevel.REQUIRE_DECISION]


def test_ladder_is_monotonic_over_attempts() -> None:
    ranks = [escalation_level(attempt).rank for attempt in range(1, 20)]
    assert ranks == sorted(ranks)


def test_ladder_configuration() -> None:
    simple = EscalationConfig(agent_analysis_attempts=0, notify_attempts=0, max_attempts=None)
    assert [escalation_level(n, simple) for n in (1, 2, 3, 100)] == [
        EscalationLevel.AUTO_RETRY,
        EscalationLevel.AUTO_RETRY,
        EscalationLevel.REQUIRE_DECISION,
        EscalationLevel.REQUIRE_DECISION,
    ]
    wide = EscalationConfig(retry_limit=2, agent_analysis_attempts=2, notify_attempts=2, max_attempts=8)
    assert [escalation_level(n, wide).value for n in range(1, 9)] == [
        "auto_retry",
        "agent_analysis",
        "agent_analysis",
        "notify",
        "notify",
        "require_decision",
        "require_decision",
        "abort",
    ]
    hard_cap = EscalationConfig(retry_limit=3, max_attempts=3)  # the cap wins over every other rung
    assert [escalation_level(n, hard_cap) for n in (2, 3)] == [
        EscalationLevel.AUTO_RETRY,
        EscalationLevel.ABORT,
    ]
    with pytest.raises(ValueError):
        escalation_level(0)


def test_low_confidence_jumps_to_a_decision_but_never_lowers_abort() -> None:
    assert next_level(2) is EscalationLevel.AUTO_RETRY
    assert next_level(2, confidence=0.9) is EscalationLevel.AUTO_RETRY
    assert next_level(2, confidence=0.3) is EscalationLevel.REQUIRE_DECISION
    assert next_level(1, confidence=0.3) is EscalationLevel.AUTO_RETRY  # first attempt auto-retries
    assert next_level(3, confidence=0.3, confidence_boost=0.3) is EscalationLevel.AGENT_ANALYSIS
    assert next_level(10, confidence=0.3) is EscalationLevel.ABORT


# -------------------------------------------------------------------------- record lifecycle


def test_park_creates_a_waiting_record_with_an_audit_entry() -> None:
    record = parked()
    assert record.status is EscalationStatus.WAITING_FOR_HUMAN and record.waiting
    assert record.decision is None and record.abort_summary is None
    assert [(e.who, e.when, e.what, e.why) for e in record.audit] == [
        ("system", T0, "parked", "low confidence")
    ]


def test_park_is_idempotent_and_refuses_a_different_spec() -> None:
    record = parked()
    assert park("esc-1", PARTY, esc_context(), now=T0 + timedelta(seconds=5), existing=record) is record
    resolved = resolve(record, EscalationResponse(action="skip"), "alice", "", T0)
    assert park("esc-1", PARTY, esc_context(), now=T0, existing=resolved) is resolved  # not reopened
    with pytest.raises(ConflictingEscalation) as info:
        park("esc-1", PARTY, esc_context(confidence=0.2), now=T0, existing=record)
    assert info.value.code == "CONFLICTING_ESCALATION"


def test_a_park_request_whose_default_answers_another_kind_of_context_is_invalid() -> None:
    checkpoint_default = CheckpointResponse(action=CheckpointAction.PROCEED)
    with pytest.raises(ValidationError, match="default_decision is a checkpoint answer"):
        ParkRequest(waiting_party=PARTY, context=esc_context(), default_decision=checkpoint_default)


def test_resolve_applies_a_decision_exactly_once() -> None:
    record = parked()
    decision = EscalationResponse(action="retry", guidance="the file path was wrong", confidence_boost=0.1)
    done = resolve(record, decision, "alice", "checked the logs", T0 + timedelta(minutes=3))
    assert done.status is EscalationStatus.RESOLVED and not done.waiting
    assert (done.decision, done.decided_by, done.decided_at) == (decision, "alice", T0 + timedelta(minutes=3))
    assert done.audit[-1].model_dump() == {
        "who": "alice",
        "when": T0 + timedelta(minutes=3),
        "what": "resolved: retry",
        "why": "checked the logs",
    }
    assert record.waiting  # the input record is untouched

    for again in (decision, EscalationResponse(action="abort")):
        with pytest.raises(AgentNotWaiting) as info:
            resolve(done, again, "bob", "", T0 + timedelta(minutes=4))
        assert info.value.code == "AGENT_NOT_WAITING"
        assert isinstance(info.value, AgoraError)


def test_unknown_escalation_is_no_state_found() -> None:
    with pytest.raises(NotFound) as info:
        require_record(None, "esc-404")
    assert info.value.code == "NOT_FOUND"
    record = parked()
    assert require_record(record, "esc-1") is record


def test_checkpoint_and_escalation_answers_do_not_mix() -> None:
    with pytest.raises(InvalidDecision) as info:
        resolve(parked(), CheckpointResponse(action="proceed"), "alice", "", T0)
    assert info.value.code == "INVALID_DECISION"

    confirm = CheckpointTrigger(name="deploys", prompt_contains=["deploy"])
    context = ctx(prompt="deploy to prod").model_copy(update={"trigger": confirm})
    record = park("cp-1", WaitingParty(kind="task", id="t-9"), context, now=T0)
    done = resolve(
        record, CheckpointResponse(action="modify_prompt", modified_prompt="deploy to staging"), "bob", "", T0
    )
    assert done.decision is not None and done.decision.action == "modify_prompt"
    with pytest.raises(InvalidDecision):
        resolve(record, EscalationResponse(action="retry"), "bob", "", T0)


def test_deadline_and_default_decision_go_together() -> None:
    """Refused as invalid arguments (422 at the service), with why."""
    with pytest.raises(InvalidArgument, match="deadline and default_decision"):
        parked(deadline=T0 + timedelta(hours=1))
    with pytest.raises(InvalidArgument, match="deadline and default_decision"):
        parked(default_decision=EscalationResponse(action="skip"))
    with pytest.raises(InvalidArgument, match="later than created_at"):
        parked(deadline=T0, default_decision=EscalationResponse(action="skip"))
    with pytest.raises(InvalidArgument, match="checkpoint answer"):
        parked(deadline=T0 + timedelta(hours=1), default_decision=CheckpointResponse(action="skip"))


def test_expire_before_at_and_after_the_deadline() -> None:
    deadline = T0 + timedelta(hours=1)
    record = parked(deadline=deadline, default_decision=EscalationResponse(action="skip"))

    early = deadline - timedelta(microseconds=1)
    assert not is_overdue(record, early)
    assert expire(record, early) is record  # no-op before the deadline

    for now in (deadline, deadline + timedelta(days=1)):
        expired = expire(record, now)
        assert expired.status is EscalationStatus.EXPIRED
        assert expired.decision == EscalationResponse(action="skip")
        assert (expired.decided_by, expired.decided_at) == ("system", now)
        assert expired.audit[-1].what == "expired: default skip applied"
        assert deadline.isoformat() in expired.audit[-1].why
        assert expire(expired, now + timedelta(hours=1)) is expired  # applied once
        with pytest.raises(AgentNotWaiting):
            resolve(expired, EscalationResponse(action="retry"), "alice", "", now)


def test_expire_without_deadline_or_after_resolution_is_a_no_op() -> None:
    record = parked()
    assert expire(record, T0 + timedelta(days=365)) is record
    with_deadline = parked(
        deadline=T0 + timedelta(hours=1), default_decision=EscalationResponse(action="abort")
    )
    late_answer = resolve(
        with_deadline, EscalationResponse(action="retry"), "alice", "", T0 + timedelta(hours=2)
    )
    assert late_answer.status is EscalationStatus.RESOLVED  # a person's answer wins until the default applied
    assert expire(late_answer, T0 + timedelta(hours=3)) is late_answer


def test_naive_times_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="timezone"):
        park("esc-1", PARTY, esc_context(), now=datetime(2026, 1, 1))
    record = parked(deadline=T0 + timedelta(hours=1), default_decision=EscalationResponse(action="skip"))
    with pytest.raises(ValueError, match="timezone-aware"):
        expire(record, datetime(2026, 1, 2))


# ------------------------------------------------------------------------------ graceful abort


def test_abort_produces_a_summary_of_partial_progress() -> None:
    progress = PartialProgress(completed=["step-1", "step-2"], pending=["step-4"], saved={"draft": "v1"})
    done = resolve(
        parked(), EscalationResponse(action="abort"), "alice", "wrong approach", T0, progress=progress
    )
    summary = done.abort_summary
    assert isinstance(summary, AbortSummary)
    assert (summary.escalation_id, summary.waiting_party, summary.aborted_by) == ("esc-1", PARTY, "alice")
    assert (summary.aborted_at, summary.reason, summary.stopped_at_step) == (T0, "wrong approach", 3)
    assert summary.last_error == "missing output file"
    assert summary.progress == progress
    assert summary.progress_summary == (
        "completed: step-1, step-2; not run: step-4; stopped at step 3; reason: wrong approach"
    )
    assert summary.cleanup_completed is False


def test_abort_reason_falls_back_to_guidance_then_who() -> None:
    with_guidance = resolve(
        parked(), EscalationResponse(action="abort", guidance="too risky"), "bob", " ", T0
    )
    assert with_guidance.abort_summary is not None
    assert with_guidance.abort_summary.reason == "too risky"
    assert (
        with_guidance.abort_summary.progress_summary
        == "completed: nothing; stopped at step 3; reason: too risky"
    )
    bare = resolve(parked(), EscalationResponse(action="abort"), "bob", "", T0)
    assert bare.abort_summary is not None and bare.abort_summary.reason == "aborted by bob"


def test_non_abort_decisions_have_no_summary() -> None:
    for action in ("retry", "skip"):
        assert resolve(parked(), EscalationResponse(action=action), "a", "", T0).abort_summary is None


def test_expiring_into_a_default_abort_also_summarises() -> None:
    record = parked(deadline=T0 + timedelta(hours=1), default_decision=EscalationResponse(action="abort"))
    expired = expire(record, T0 + timedelta(hours=1), progress=PartialProgress(completed=["step-1"]))
    assert expired.abort_summary is not None
    assert expired.abort_summary.aborted_by == "system"
    assert expired.abort_summary.reason.startswith("deadline 2026-01-01T13:00:00+00:00 passed")


def test_complete_cleanup() -> None:
    aborted = resolve(parked(), EscalationResponse(action="abort"), "alice", "stop", T0)
    later = T0 + timedelta(minutes=1)
    cleaned = complete_cleanup(
        aborted, who="plan-1", now=later, progress=PartialProgress(completed=["step-1"])
    )
    assert cleaned.abort_summary is not None and cleaned.abort_summary.cleanup_completed
    assert cleaned.abort_summary.progress_summary == "completed: step-1; stopped at step 3; reason: stop"
    assert (cleaned.audit[-1].who, cleaned.audit[-1].what) == ("plan-1", "cleanup completed")
    custom = complete_cleanup(cleaned, who="plan-1", now=later, progress_summary="saved draft to notes.md")
    assert custom.abort_summary is not None
    assert custom.abort_summary.progress_summary == "saved draft to notes.md"
    with pytest.raises(IllegalTransition):
        complete_cleanup(
            resolve(parked(), EscalationResponse(action="skip"), "a", "", T0), who="x", now=later
        )


def test_a_repeated_cleanup_keeps_one_entry_in_the_audit_trail() -> None:
    record = resolve(parked(), EscalationResponse(action="abort"), "alice", "stop", T0)
    for minutes in range(1, 5):
        record = complete_cleanup(record, who="plan-1", now=T0 + timedelta(minutes=minutes))
    assert [e.what for e in record.audit] == ["parked", "resolved: abort", "cleanup completed"]
    assert record.audit[-1].when == T0 + timedelta(minutes=4)


# ---------------------------------------------------------------------- audit, JSON, helpers


def test_audit_trail_accumulates_in_order() -> None:
    record = resolve(parked(), EscalationResponse(action="abort"), "alice", "no", T0 + timedelta(minutes=1))
    record = complete_cleanup(record, who="plan-1", now=T0 + timedelta(minutes=2))
    assert [(e.who, e.what) for e in record.audit] == [
        ("system", "parked"),
        ("alice", "resolved: abort"),
        ("plan-1", "cleanup completed"),
    ]
    assert [e.when for e in record.audit] == sorted(e.when for e in record.audit)


@pytest.mark.parametrize(
    "record",
    [
        parked(
            context=esc_context(historical_suggestions=[HistoricalSuggestion(action="retry", confidence=0.5)])
        ),
        parked(deadline=T0 + timedelta(hours=1), default_decision=EscalationResponse(action="skip")),
        resolve(
            parked(),
            EscalationResponse(action="abort"),
            "alice",
            "stop",
            T0,
            progress=PartialProgress(completed=["a"], saved={"n": 1, "xs": [1.5, None, "s"]}),
        ),
        expire(
            parked(deadline=T0 + timedelta(hours=1), default_decision=EscalationResponse(action="skip")),
            T0 + timedelta(hours=2),
        ),
        resolve(
            park(
                "cp-1",
                WaitingParty(kind="session", id="s-1"),
                ctx().model_copy(update={"trigger": CheckpointTrigger(name="t", steps=[3])}),
                now=T0,
                deadline=T0 + timedelta(minutes=5),
                default_decision=CheckpointResponse(action="abort"),
            ),
            CheckpointResponse(action="skip", guidance="not today"),
            "bob",
            "",
            T0,
        ),
    ],
)
def test_record_json_round_trip(record: EscalationRecord) -> None:
    restored = EscalationRecord.model_validate_json(record.model_dump_json())
    assert restored == record
    assert type(restored.context) is type(record.context)
    assert type(restored.decision) is type(record.decision)


def test_record_invariants_hold_on_deserialisation() -> None:
    data = parked().model_dump(mode="json")
    with pytest.raises(ValidationError, match="decision and decided_at"):
        EscalationRecord.model_validate({**data, "status": "RESOLVED"})
    with pytest.raises(ValidationError):
        EscalationRecord.model_validate({**data, "surprise": 1})


def test_historical_suggestions_rank_successes_first() -> None:
    failed = HistoricalSuggestion(action="retry", confidence=0.4, outcome_succeeded=False, similarity=0.99)
    unknown = HistoricalSuggestion(action="skip", confidence=0.4, similarity=0.9)
    good_far = HistoricalSuggestion(
        action="modify_prompt", confidence=0.3, outcome_succeeded=True, similarity=0.5
    )
    good_near = HistoricalSuggestion(action="retry", confidence=0.3, outcome_succeeded=True, similarity=0.8)
    assert rank_suggestions([failed, unknown, good_far, good_near]) == [good_near, good_far, unknown, failed]
    assert esc_context().historical_suggestions == []


def test_resume_message() -> None:
    assert resume_message(EscalationResponse(action="skip")) == "Decision: skip."
    text = resume_message(
        EscalationResponse(action="modify_prompt", modified_prompt="Use v2", guidance="v1 is gone")
    )
    assert text == "Decision: modify_prompt.\nUse this prompt instead:\nUse v2\nGuidance: v1 is gone"


def test_the_wire_keeps_the_reference_s_field_names_for_a_step() -> None:
    """Code says `step`; JSON says `sheet_num`/`sheet_nums`, which apps of earlier versions expect
    (every contract refuses unknown fields)."""
    context = esc_context(step=4)
    wire = context.model_dump(mode="json")
    assert wire["sheet_num"] == 4 and "step" not in wire
    assert EscalationContext.model_validate(wire) == context
    trigger = CheckpointTrigger(name="t", steps=[1, 2])
    assert trigger.model_dump(mode="json")["sheet_nums"] == [1, 2]
    assert CheckpointTrigger.model_validate_json('{"name": "t", "sheet_nums": [1, 2]}') == trigger
