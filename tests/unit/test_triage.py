"""Triage: the failure taxonomy, the classifier's rules, default recovery, strategies, escalation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from agora.core.triage.actions import RecoveryAction, RecoveryKind
from agora.core.triage.context import FailureContext, Step, error_text
from agora.core.triage.decision import (
    DEFAULT_REPEAT_LIMIT,
    DecisionSource,
    TriageContext,
    TriageDecision,
    triage,
)
from agora.core.triage.diagnosis import build_failure_context, classify, diagnose
from agora.core.triage.failures import FailureType
from agora.core.triage.recovery import BACKOFF_MAX_S, DEFAULT_RECOVERY, default_recovery
from agora.core.triage.words import content_tokens

F = FailureType
K = RecoveryKind


def step(index: int, action: str = "think", **fields: Any) -> Step:
    return Step(index=index, action=action, timestamp=1_700_000_000.0 + index, **fields)


def steps(*specs: dict[str, Any]) -> list[Step]:
    return [step(i, **spec) for i, spec in enumerate(specs)]


def search(query: str, **fields: Any) -> dict[str, Any]:
    return {"action": "search the web", "tool_called": "search", "tool_input": {"query": query}, **fields}


# --- taxonomy --------------------------------------------------------------------------------

SEED_VALUES = {
    "WRONG_TOOL_CALLED": "wrong_tool_called",
    "CONSTRAINT_IGNORED": "constraint_ignored",
    "LOOP_DETECTED": "loop_detected",
    "HALLUCINATED_STATE": "hallucinated_state",
    "PLAN_INCOMPLETE": "plan_incomplete",
    "SCHEMA_MISMATCH": "schema_mismatch",
    "CONTEXT_OVERFLOW": "context_overflow",
    "GOAL_DRIFT": "goal_drift",
    "EXTERNAL_FAULT": "external_fault",
    "UNKNOWN": "unknown",
}


def test_failure_type_has_exactly_the_ten_seed_members_and_values() -> None:
    assert {member.name: member.value for member in FailureType} == SEED_VALUES
    assert [member.name for member in FailureType] == list(SEED_VALUES)


@pytest.mark.parametrize(("name", "value"), SEED_VALUES.items())
def test_failure_type_round_trips_through_its_string_value(name: str, value: str) -> None:
    assert FailureType(value) is FailureType[name]
    assert str(FailureType[name]) == value


SEED_RECOVERY = {
    F.WRONG_TOOL_CALLED: (K.RETRY, "Retry with correct manifest"),
    F.CONSTRAINT_IGNORED: (K.REPLAN, "Replan with constraint reminder"),
    F.LOOP_DETECTED: (K.REPLAN, "Replan or rollback"),
    F.HALLUCINATED_STATE: (K.ROLLBACK, "Rollback to checkpoint"),
    F.PLAN_INCOMPLETE: (K.RESUME, "Resume from subgoal"),
    F.SCHEMA_MISMATCH: (K.RETRY, "Retry with schema hint"),
    F.CONTEXT_OVERFLOW: (K.REPLAN, "Replan with compressed context"),
    F.GOAL_DRIFT: (K.REPLAN, "Replan with goal restatement"),
    F.EXTERNAL_FAULT: (K.RETRY, "Backoff and retry"),
    F.UNKNOWN: (K.ESCALATE, "Escalate"),
}


def test_default_recovery_covers_every_type_as_in_the_seed_table() -> None:
    assert set(DEFAULT_RECOVERY) == set(FailureType)
    assert {t: (a.kind, a.description) for t, a in DEFAULT_RECOVERY.items()} == SEED_RECOVERY
    assert DEFAULT_RECOVERY[F.CONTEXT_OVERFLOW].compress_context
    assert DEFAULT_RECOVERY[F.EXTERNAL_FAULT].backoff_s > 0


def test_recovery_action_factories_include_the_seed_spelling() -> None:
    assert RecoveryAction.ESCALATE("Too many retries.") == RecoveryAction.escalate("Too many retries.")
    assert RecoveryAction.ESCALATE("x").kind is K.ESCALATE
    assert RecoveryAction.RETRY("h", backoff_s=2).backoff_s == 2
    assert RecoveryAction.REPLAN(compress_context=True).compress_context
    assert RecoveryAction.ROLLBACK("cp-1").checkpoint_id == "cp-1"
    assert RecoveryAction.RESUME("write tests").subgoal == "write tests"
    with pytest.raises(ValidationError):
        RecoveryAction.retry(backoff_s=-1)


# --- steps and contexts ----------------------------------------------------------------------


def test_step_sets_its_timestamp_and_forbids_unknown_fields() -> None:
    recorded = Step(index=0, action="called search tool", tool_called="search", tool_input={"q": "ai"})
    assert recorded.timestamp > 0
    assert recorded.metadata == {}
    with pytest.raises(ValidationError):
        Step.model_validate({"index": 0, "action": "x", "unknown": 1})
    with pytest.raises(ValidationError):
        Step(index=-1, action="x")


def test_failed_step_and_steps_after_failure() -> None:
    trajectory = steps({}, {"error": "boom"}, {}, {})
    context = FailureContext(trajectory=trajectory, critical_step_index=1)
    assert context.failed_step == trajectory[1]
    assert context.steps_after_failure == trajectory[2:]
    last = FailureContext(trajectory=trajectory, critical_step_index=3)
    assert last.steps_after_failure == []
    empty = FailureContext()
    assert empty.failed_step is None
    assert empty.steps_after_failure == []


def test_attempt_number_comes_from_metadata_else_the_history() -> None:
    history = [(F.EXTERNAL_FAULT, "retry"), (F.EXTERNAL_FAULT, "retry")]
    assert FailureContext(attempt_history=history).attempt_number == 2
    assert FailureContext(attempt_history=history, metadata={"attempt_number": 5}).attempt_number == 5


def test_build_failure_context_packages_the_diagnosis() -> None:
    trajectory = steps(search("a"), search("a"), search("a"))
    context = build_failure_context(
        trajectory,
        original_task="find a",
        raw_error=None,
        last_checkpoint_id="cp-7",
        attempt_history=[(F.SCHEMA_MISMATCH, "retry")],
        metadata={"run": "r1"},
        available_tools={"search", "fetch"},
        constraints=["be brief"],
    )
    assert context.failure_type is F.LOOP_DETECTED
    assert context.loop_steps == [0, 1, 2]
    assert context.critical_step_index == 2
    assert context.failed_step == trajectory[2]
    assert context.metadata == {"attempt_number": 1, "run": "r1"}
    assert context.available_tools == ["fetch", "search"]
    assert context.last_checkpoint_id == "cp-7"


def test_error_text_keeps_the_exception_type() -> None:
    assert error_text(TimeoutError("read timed out")) == "TimeoutError: read timed out"
    assert error_text(KeyError()) == "KeyError"
    assert error_text("plain") == "plain"
    assert error_text(None) is None


# --- classification, one type at a time -----------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        "HTTP 503 Service Unavailable",
        "status code: 502",
        "503: upstream unavailable",
        "ConnectionRefusedError: [Errno 111] Connection refused",
        "httpx.ConnectError: all connection attempts failed",
        "Request timed out after 30s",
        "ReadTimeout",
        "429 Too Many Requests",
        "rate limit exceeded, retry later",
        "getaddrinfo ENOTFOUND api.example.com",
        "Internal Server Error",
    ],
)
def test_external_faults(error: str) -> None:
    assert classify(steps({"action": "fetch", "error": error})) is F.EXTERNAL_FAULT


def test_external_fault_from_a_raw_exception_without_a_failing_step() -> None:
    assert classify(steps({}), raw_error=TimeoutError("deadline")) is F.EXTERNAL_FAULT
    assert classify([], raw_error=ConnectionResetError("peer")) is F.EXTERNAL_FAULT


def test_a_number_that_is_not_a_status_is_not_an_external_fault() -> None:
    assert classify(steps({"error": "500 rows processed, then gave up"})) is F.UNKNOWN


@pytest.mark.parametrize(
    "error",
    [
        "This model's maximum context length is 8192 tokens",
        "context_length_exceeded",
        "Prompt is too long: 210000 tokens > 200000",
        "input exceeds the context window",
    ],
)
def test_context_overflow(error: str) -> None:
    assert classify(steps({"error": error})) is F.CONTEXT_OVERFLOW


def test_wrong_tool_from_the_manifest() -> None:
    trajectory = steps(search("x"), {"action": "delete", "tool_called": "rm_rf", "tool_input": {}})
    diagnosis = diagnose(trajectory, available_tools=["search"])
    assert diagnosis.failure_type is F.WRONG_TOOL_CALLED
    assert diagnosis.critical_step_index == 1


def test_a_tool_in_the_manifest_is_not_wrong() -> None:
    assert classify(steps(search("x")), available_tools=["search"]) is F.PLAN_INCOMPLETE


@pytest.mark.parametrize("error", ["Unknown tool: web_browse", "Tool 'calc' not found", "no such tool"])
def test_wrong_tool_from_the_error(error: str) -> None:
    assert classify(steps({"tool_called": "calc", "error": error})) is F.WRONG_TOOL_CALLED


@pytest.mark.parametrize(
    "error",
    [
        "1 validation error for Report\nsummary\n  Field required",
        "JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
        "TypeError: search() got an unexpected keyword argument 'q'",
        "output does not match schema",
        "'price' is not of type 'number'",
    ],
)
def test_schema_mismatch_from_the_error(error: str) -> None:
    assert classify(steps({"error": error})) is F.SCHEMA_MISMATCH


SCHEMA = {"type": "object", "required": ["title", "summary"]}


@pytest.mark.parametrize(
    "fields",
    [
        {"tool_output": {"title": "x"}},
        {"tool_output": ["title", "summary"]},
        {"llm_output": "Here is the summary you asked for"},
        {"llm_output": '{"summary": "s"}'},
    ],
)
def test_schema_mismatch_from_the_expected_schema(fields: dict[str, Any]) -> None:
    assert classify(steps({}, fields), expected_schema=SCHEMA) is F.SCHEMA_MISMATCH


def test_output_that_fits_the_schema_is_not_a_mismatch() -> None:
    fine = steps({"llm_output": '{"title": "t", "summary": "s"}'})
    assert classify(fine, expected_schema=SCHEMA) is F.PLAN_INCOMPLETE


@pytest.mark.parametrize(
    "error", ["Action violates constraint: read-only", "writing to /etc is not allowed", "403 Forbidden"]
)
def test_constraint_ignored_from_the_error(error: str) -> None:
    assert classify(steps({"error": error})) is F.CONSTRAINT_IGNORED


def test_constraint_ignored_names_the_only_constraint() -> None:
    diagnosis = diagnose(steps({"error": "constraint violated"}), constraints=["stay read-only"])
    assert diagnosis.violated_constraint == "stay read-only"


def test_constraint_ignored_from_a_prohibited_step() -> None:
    trajectory = steps(
        search("logs"),
        {"action": "clean up", "tool_called": "delete_file", "tool_input": {"path": "a.txt"}},
        {"action": "report"},
    )
    constraints = ["Be concise.", "Never call the delete_file tool"]
    diagnosis = diagnose(trajectory, constraints=constraints)
    assert diagnosis.failure_type is F.CONSTRAINT_IGNORED
    assert diagnosis.critical_step_index == 1
    assert diagnosis.violated_constraint == "Never call the delete_file tool"


def test_a_respected_constraint_is_not_ignored() -> None:
    trajectory = steps(search("logs"), {"action": "report"})
    assert classify(trajectory, constraints=["Do not delete files"]) is F.PLAN_INCOMPLETE


def test_loop_at_three_identical_steps() -> None:
    diagnosis = diagnose(steps(search("a"), search("a"), search("a")))
    assert diagnosis.failure_type is F.LOOP_DETECTED
    assert diagnosis.loop_steps == [0, 1, 2]
    assert diagnosis.critical_step_index == 2


def test_two_identical_steps_are_not_a_loop() -> None:
    assert classify(steps(search("a"), search("a"))) is F.PLAN_INCOMPLETE


def test_same_tool_with_different_inputs_is_not_a_loop() -> None:
    assert classify(steps(search("a"), search("b"), search("c"))) is F.PLAN_INCOMPLETE


def test_loop_counts_repeats_that_are_not_consecutive() -> None:
    trajectory = steps(search("a"), {"action": "think"}, search("a"), {"action": "plan"}, search("a"))
    assert diagnose(trajectory).loop_steps == [0, 2, 4]


def test_loop_by_state_hash_whatever_the_actions() -> None:
    trajectory = steps(
        {"action": "open page", "state_hash": "s1"},
        {"action": "click next", "state_hash": "s1"},
        {"action": "go back", "state_hash": "s1"},
    )
    assert classify(trajectory) is F.LOOP_DETECTED


def test_loop_of_identical_llm_outputs_without_tools() -> None:
    trajectory = steps(*[{"action": "Reflect", "llm_output": "I should check again."}] * 3)
    assert classify(trajectory) is F.LOOP_DETECTED


@pytest.mark.parametrize(
    "error",
    [
        "FileNotFoundError: [Errno 2] No such file or directory: 'report.md'",
        "KeyError: 'user_42'",
        "record 42 does not exist",
        "HTTP 404",
    ],
)
def test_hallucinated_state(error: str) -> None:
    assert classify(steps({"action": "read", "error": error})) is F.HALLUCINATED_STATE


TASK = "Summarise the quarterly sales report"


def test_goal_drift_after_three_unrelated_steps() -> None:
    trajectory = steps(
        {"action": "open the quarterly sales report"},
        {"action": "check tomorrow's weather"},
        {"action": "look up football scores"},
        {"action": "write a poem about autumn"},
    )
    diagnosis = diagnose(trajectory, original_task=TASK)
    assert diagnosis.failure_type is F.GOAL_DRIFT
    assert diagnosis.critical_step_index == 1


def test_two_unrelated_steps_are_not_yet_drift() -> None:
    trajectory = steps(
        {"action": "open the quarterly sales report"},
        {"action": "check tomorrow's weather"},
        {"action": "look up football scores"},
    )
    assert classify(trajectory, original_task=TASK) is F.PLAN_INCOMPLETE


def test_no_drift_when_nothing_was_ever_related() -> None:
    trajectory = steps(*[{"action": f"unrelated thing {i}"} for i in range(5)])
    assert classify(trajectory, original_task=TASK) is F.PLAN_INCOMPLETE


def test_goal_drift_from_the_error() -> None:
    assert classify(steps({"error": "agent went off-topic"})) is F.GOAL_DRIFT


def test_plan_incomplete_without_an_error() -> None:
    diagnosis = diagnose(steps({"action": "outline"}, {"action": "draft intro"}))
    assert diagnosis.failure_type is F.PLAN_INCOMPLETE
    assert diagnosis.critical_step_index == 1


@pytest.mark.parametrize(
    "error", ["Reached max_steps=20", "ran out of steps", "2 subgoals remaining subgoals"]
)
def test_plan_incomplete_from_the_error(error: str) -> None:
    assert classify(steps({"error": error})) is F.PLAN_INCOMPLETE


def test_unknown_for_an_unrecognised_error_or_nothing_at_all() -> None:
    assert classify(steps({"error": "the flux capacitor hiccuped"})) is F.UNKNOWN
    assert classify([]) is F.UNKNOWN
    assert classify([], raw_error="weird") is F.UNKNOWN


# --- precedence ------------------------------------------------------------------------------


def test_external_fault_beats_loop() -> None:
    trajectory = steps(*[search("a", error="Read timed out")] * 3)
    assert classify(trajectory) is F.EXTERNAL_FAULT


def test_schema_error_beats_loop() -> None:
    trajectory = steps(*[search("a", error="1 validation error for Query")] * 3)
    assert classify(trajectory) is F.SCHEMA_MISMATCH


def test_the_last_error_decides() -> None:
    trajectory = steps({"error": "Connection refused"}, {"action": "parse", "error": "JSONDecodeError"})
    diagnosis = diagnose(trajectory)
    assert diagnosis.failure_type is F.SCHEMA_MISMATCH
    assert diagnosis.critical_step_index == 1


def test_wrong_tool_not_found_is_not_hallucinated_state() -> None:
    assert classify(steps({"error": "Tool 'x' not found"})) is F.WRONG_TOOL_CALLED


def test_classify_a_context_uses_its_own_fields() -> None:
    context = FailureContext(
        trajectory=steps({"tool_called": "rm", "action": "remove"}), available_tools=["search"]
    )
    assert classify(context, available_tools=["rm"]) is F.WRONG_TOOL_CALLED


def test_content_tokens_normalise_case_punctuation_and_stopwords() -> None:
    assert content_tokens("The File, the FILE!  is  missing") == {"file", "missing"}


# --- default recovery ------------------------------------------------------------------------


def context_of(failure_type: FailureType, **fields: Any) -> FailureContext:
    defaults: dict[str, Any] = {
        "failure_type": failure_type,
        "trajectory": steps({"action": "work", "tool_called": "calc", "error": "it broke"}),
        "original_task": TASK,
    }
    return FailureContext(**(defaults | fields))


@pytest.mark.parametrize("failure_type", list(FailureType))
def test_triage_uses_the_default_recovery_of_each_type(failure_type: FailureType) -> None:
    decision = triage(context_of(failure_type))
    kind, description = SEED_RECOVERY[failure_type]
    assert decision.action.kind is kind
    assert decision.action.description == description
    assert decision.source is DecisionSource.DEFAULT
    assert decision.failure_type is failure_type


def test_default_recovery_fills_in_the_context() -> None:
    wrong = default_recovery(context_of(F.WRONG_TOOL_CALLED, available_tools=["search", "fetch"]))
    assert wrong.hint == "The tool 'calc' is not available. Call only tools from the manifest: search, fetch."

    constraint = default_recovery(context_of(F.CONSTRAINT_IGNORED, violated_constraint="stay read-only"))
    assert constraint.hint is not None and "stay read-only" in constraint.hint

    schema = default_recovery(context_of(F.SCHEMA_MISMATCH, expected_schema=SCHEMA))
    assert (
        schema.hint
        == 'The output must match this JSON schema: {"required":["title","summary"],"type":"object"}'
    )

    without_schema = default_recovery(context_of(F.SCHEMA_MISMATCH))
    assert without_schema.hint is not None and "it broke" in without_schema.hint

    hallucinated = default_recovery(context_of(F.HALLUCINATED_STATE, last_checkpoint_id="cp-3"))
    assert hallucinated.checkpoint_id == "cp-3"

    assert default_recovery(context_of(F.GOAL_DRIFT)).hint == f"Stay on the original task: {TASK}"
    assert default_recovery(context_of(F.CONTEXT_OVERFLOW)).compress_context

    resume = default_recovery(context_of(F.PLAN_INCOMPLETE, metadata={"subgoal": "write the conclusion"}))
    assert resume.subgoal == "write the conclusion"
    assert default_recovery(context_of(F.PLAN_INCOMPLETE)).subgoal == TASK

    unknown = default_recovery(context_of(F.UNKNOWN, raw_error="RuntimeError: odd"))
    assert unknown.reason == "The failure could not be classified: RuntimeError: odd"


def test_external_fault_backs_off_exponentially_up_to_the_cap() -> None:
    def backoff(prior: int) -> float:
        history = [(F.EXTERNAL_FAULT, "retry")] * prior
        return triage(
            context_of(F.EXTERNAL_FAULT, attempt_history=history), repeat_limit=None
        ).action.backoff_s

    assert [backoff(n) for n in range(4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff(10) == BACKOFF_MAX_S


def test_loop_replans_first_then_rolls_back_when_a_checkpoint_exists() -> None:
    first = triage(context_of(F.LOOP_DETECTED, last_checkpoint_id="cp-1", loop_steps=[0, 1, 2]))
    assert first.action.kind is K.REPLAN
    assert first.action.hint is not None and "[0, 1, 2]" in first.action.hint
    history = [(F.LOOP_DETECTED, "replan")]
    second = triage(context_of(F.LOOP_DETECTED, last_checkpoint_id="cp-1", attempt_history=history))
    assert (second.action.kind, second.action.checkpoint_id) == (K.ROLLBACK, "cp-1")
    no_checkpoint = triage(context_of(F.LOOP_DETECTED, attempt_history=history))
    assert no_checkpoint.action.kind is K.REPLAN


# --- strategies ------------------------------------------------------------------------------


def test_a_strategy_overrides_the_default() -> None:
    seen: list[FailureContext] = []

    def strategy(context: FailureContext) -> RecoveryAction:
        seen.append(context)
        return RecoveryAction.rollback("cp-9", hint="start over")

    context = context_of(F.SCHEMA_MISMATCH)
    decision = triage(context, strategy)
    assert decision.source is DecisionSource.STRATEGY
    assert decision.action == RecoveryAction.rollback("cp-9", hint="start over")
    assert decision.triage_context.hint == "start over"
    assert seen == [context]


def test_a_strategy_returning_none_falls_back_to_the_default() -> None:
    decision = triage(context_of(F.GOAL_DRIFT), lambda context: None)
    assert decision.source is DecisionSource.DEFAULT
    assert decision.action.kind is K.REPLAN


def test_a_mapping_of_strategies_applies_per_type() -> None:
    strategies = {F.EXTERNAL_FAULT: lambda context: RecoveryAction.retry(backoff_s=30.0)}
    assert triage(context_of(F.EXTERNAL_FAULT), strategies).action.backoff_s == 30.0
    assert triage(context_of(F.GOAL_DRIFT), strategies).source is DecisionSource.DEFAULT


def test_the_seed_example_strategy_escalates_after_two_retries() -> None:
    def strategy(ctx: FailureContext) -> RecoveryAction | None:
        prior_retries = sum(1 for _, kind in ctx.attempt_history if kind == "retry")
        if prior_retries >= 2:
            return RecoveryAction.ESCALATE("Too many retries.")
        return None

    history = [(F.SCHEMA_MISMATCH, "retry"), (F.WRONG_TOOL_CALLED, "retry")]
    decision = triage(context_of(F.SCHEMA_MISMATCH, attempt_history=history), strategy)
    assert decision.escalated
    assert decision.action.reason == "Too many retries."


# --- repeated failures escalate --------------------------------------------------------------


def test_repeat_limit_default_is_three() -> None:
    assert DEFAULT_REPEAT_LIMIT == 3


def test_below_the_repeat_limit_the_default_applies() -> None:
    history = [(F.SCHEMA_MISMATCH, "retry")] * (DEFAULT_REPEAT_LIMIT - 1)
    decision = triage(context_of(F.SCHEMA_MISMATCH, attempt_history=history))
    assert decision.action.kind is K.RETRY
    assert decision.prior_attempts_same_type == DEFAULT_REPEAT_LIMIT - 1


def test_at_the_repeat_limit_the_failure_escalates_whatever_the_strategy() -> None:
    history = [(F.SCHEMA_MISMATCH, "retry")] * DEFAULT_REPEAT_LIMIT
    decision = triage(
        context_of(F.SCHEMA_MISMATCH, attempt_history=history), lambda c: RecoveryAction.retry()
    )
    assert decision.escalated
    assert decision.source is DecisionSource.REPEAT_LIMIT
    assert decision.action.reason is not None and "schema_mismatch" in decision.action.reason


def test_only_attempts_for_the_same_type_count() -> None:
    history = [(F.EXTERNAL_FAULT, "retry")] * 5
    decision = triage(context_of(F.SCHEMA_MISMATCH, attempt_history=history))
    assert not decision.escalated
    assert decision.attempt_number == 5


def test_repeat_limit_none_leaves_escalation_to_the_strategy_and_zero_escalates_at_once() -> None:
    history = [(F.SCHEMA_MISMATCH, "retry")] * 10
    assert not triage(context_of(F.SCHEMA_MISMATCH, attempt_history=history), repeat_limit=None).escalated
    assert triage(context_of(F.SCHEMA_MISMATCH), repeat_limit=0).escalated
    with pytest.raises(ValueError, match="repeat_limit"):
        triage(context_of(F.SCHEMA_MISMATCH), repeat_limit=-1)


def test_a_run_of_recoveries_ends_in_escalation() -> None:
    """Feeding each decision back into the history, the fourth schema failure escalates."""
    history: list[tuple[FailureType, str]] = []
    kinds = []
    for _ in range(DEFAULT_REPEAT_LIMIT + 1):
        decision = triage(context_of(F.SCHEMA_MISMATCH, attempt_history=history))
        kinds.append(decision.action.kind)
        history.append(decision.history_entry)
    assert kinds == [K.RETRY, K.RETRY, K.RETRY, K.ESCALATE]
    assert history[0] == (F.SCHEMA_MISMATCH, "retry")


# --- triage context and serialisation --------------------------------------------------------


def test_triage_context_mirrors_the_decision() -> None:
    history = [(F.PLAN_INCOMPLETE, "resume")]
    decision = triage(
        context_of(F.PLAN_INCOMPLETE, attempt_history=history, metadata={"subgoal": "conclude"})
    )
    tc = decision.triage_context
    assert (tc.failure_type, tc.attempt_number, tc.subgoal, tc.state) == (
        F.PLAN_INCOMPLETE,
        1,
        "conclude",
        {},
    )
    assert tc.hint == decision.action.hint


def test_json_round_trips() -> None:
    trajectory = steps(
        search("a", tool_output=["r1", {"k": 1}], metadata={"tokens": 12}),
        {"action": "parse", "llm_output": "{}", "error": "JSONDecodeError", "state_hash": "h"},
    )
    context = build_failure_context(
        trajectory,
        original_task=TASK,
        raw_error=ValueError("bad"),
        expected_schema=SCHEMA,
        attempt_history=[(F.SCHEMA_MISMATCH, "retry")],
    )
    assert FailureContext.model_validate_json(context.model_dump_json()) == context
    restored = json.loads(context.model_dump_json())
    assert restored["failure_type"] == "schema_mismatch"
    assert restored["attempt_history"] == [["schema_mismatch", "retry"]]

    decision = triage(context)
    assert TriageDecision.model_validate_json(decision.model_dump_json()) == decision
    tc = TriageContext(failure_type=F.EXTERNAL_FAULT, attempt_number=0, state={"data": [1, 2]})
    assert TriageContext.model_validate_json(tc.model_dump_json()) == tc
    for action in DEFAULT_RECOVERY.values():
        assert RecoveryAction.model_validate_json(action.model_dump_json()) == action
