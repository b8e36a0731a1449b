"""The planner's run, decided without Dapr: what comes next after each wave, replans, stops for
a person and their decisions, budgets, deadlines, and how a plan ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.planning import (
    InvalidPlan,
    Plan,
    PlanningConfig,
    SubGoal,
    SubGoalStatus,
    TokenUsage,
    VerificationResult,
)
from agora.core.plans.record import PlanRecord, PlanState, PlanStop, StopReason, SubGoalAttempt, new_record
from agora.core.plans.request import PlanRequest
from agora.core.plans.run import (
    DIRECT_SUBGOAL_ID,
    NextStep,
    after_attempt,
    apply_decision,
    begin_wave,
    direct_plan,
    end_wave,
    finish,
    given_plan,
    next_step,
    required_skills,
    stopped,
    with_plan,
    with_usage,
)
from agora.core.plans.workflow import PlanDecision, SubGoalReport

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
S = SubGoalStatus


def goal(subgoal_id: str, *dependencies: str, **fields: object) -> SubGoal:
    return SubGoal(
        id=subgoal_id,
        description=f"do {subgoal_id}",
        success_criterion=f"{subgoal_id} is done",
        dependencies=list(dependencies),
        **fields,  # type: ignore[arg-type]
    )


def diamond() -> Plan:
    return Plan(
        task="a task",
        subgoals=[goal("a"), goal("b"), goal("c", "a", "b"), goal("d", "c")],
        total_estimated_steps=8,
    )


def running(plan: Plan | None = None, **request: object) -> PlanRecord:
    fields: dict[str, object] = {"plan_id": "p1", "task": "a task", "skills": ["web_search"], **request}
    record = new_record(PlanRequest.model_validate(fields), NOW)
    return with_plan(record, plan or diamond(), NOW)


def report(subgoal: SubGoal, status: SubGoalStatus, cost: float = 0.0) -> SubGoalReport:
    attempt = SubGoalAttempt(
        subgoal_id=subgoal.id,
        attempt=1,
        task_id=f"p1.{subgoal.id}.1.1",
        description=subgoal.description,
        started_at=NOW,
        finished_at=NOW,
        cost_usd=cost,
    )
    ended = subgoal.model_copy(update={"status": status, "attempts": 1})
    return SubGoalReport(subgoal=ended, attempts=[attempt])


def run_wave(record: PlanRecord, outcomes: dict[str, SubGoalStatus], cost: float = 0.0) -> PlanRecord:
    step, wave = next_step(record, NOW)
    assert step is NextStep.RUN_WAVE
    record, jobs = begin_wave(record, wave, NOW)
    assert record.plan is not None
    assert all(record.plan.subgoal(j.subgoal.id).status is S.RUNNING for j in jobs)
    return end_wave(
        record, [report(j.subgoal, outcomes.get(j.subgoal.id, S.COMPLETED), cost) for j in jobs], NOW
    )


def statuses(record: PlanRecord) -> dict[str, SubGoalStatus]:
    assert record.plan is not None
    return {s.id: s.status for s in record.plan.subgoals}


def test_waves_run_in_order_and_a_plan_of_completed_subgoals_completes() -> None:
    record = running()
    assert next_step(record, NOW) == (NextStep.RUN_WAVE, ["a", "b"])
    record = run_wave(record, {})
    assert next_step(record, NOW) == (NextStep.RUN_WAVE, ["c"])
    record = run_wave(run_wave(record, {}), {})
    assert next_step(record, NOW) == (NextStep.FINISH, [])
    record = with_usage(record, TokenUsage(prompt_tokens=10, completion_tokens=5))
    ended = finish(record, "all done", NOW + timedelta(seconds=3))
    assert ended.state is PlanState.COMPLETED
    assert ended.result is not None and ended.result.success and ended.result.duration_seconds == 3
    assert ended.result.total_token_usage == TokenUsage(prompt_tokens=10, completion_tokens=5)


def test_each_job_is_a_fresh_round_with_its_skills_and_budget_share() -> None:
    record = running(config={"cost_budget_usd": 1.0})
    record, jobs = begin_wave(record, ["a", "b"], NOW)
    assert [j.round for j in jobs] == [1, 2] and record.rounds == 2
    assert all(j.budget_usd == 0.5 and j.required_skills == ["web_search"] for j in jobs)
    assert required_skills(goal("x", tool_hints=["sql", "sql"]), ["web_search"]) == ["sql"]
    assert required_skills(goal("x"), []) == ["general"]
    assert required_skills(goal("x"), ["sql", "python"]) == ["sql"]


def test_a_failed_subgoal_is_replanned_while_replans_remain() -> None:
    record = run_wave(running(), {"a": S.FAILED})
    assert statuses(record)["c"] is S.SKIPPED  # skip rule applied at the end of the wave
    assert next_step(record, NOW) == (NextStep.REPLAN, ["a"])
    record = record.model_copy(update={"replans": 3})
    assert next_step(record, NOW) == (NextStep.STOP_FOR_PERSON, ["a"])


def test_without_escalation_a_failure_stands_and_the_plan_fails_with_the_reason() -> None:
    record = run_wave(running(escalate=False, config={"max_replans": 0}), {"a": S.FAILED})
    assert next_step(record, NOW) == (NextStep.FINISH, [])
    ended = finish(record, "", NOW)
    assert ended.state is PlanState.FAILED
    assert statuses(ended) == {"a": S.FAILED, "b": S.COMPLETED, "c": S.SKIPPED, "d": S.SKIPPED}
    assert "a (" in ended.reason and ended.result is not None and not ended.result.success


def test_a_spent_budget_stops_before_the_next_wave() -> None:
    record = run_wave(running(config={"cost_budget_usd": 0.01}), {}, cost=0.01)
    assert next_step(record, NOW) == (NextStep.STOP_FOR_PERSON, [])
    stop = PlanStop(reason=StopReason.BUDGET_SPENT, escalation_id="e1")
    lifted = apply_decision(stopped(record, stop, NOW), decision(EscalationAction.RETRY), NOW)
    assert lifted.budget_lifted and next_step(lifted, NOW)[0] is NextStep.RUN_WAVE
    ended = apply_decision(stopped(record, stop, NOW), decision(EscalationAction.SKIP), NOW)
    assert finish(ended, "", NOW).state is PlanState.FAILED
    no_person = run_wave(running(escalate=False, config={"cost_budget_usd": 0.01}), {}, cost=0.01)
    assert next_step(no_person, NOW) == (NextStep.FINISH, [])


def test_nothing_starts_after_the_deadline() -> None:
    record = run_wave(running(deadline=NOW + timedelta(minutes=1)), {})
    assert next_step(record, NOW)[0] is NextStep.RUN_WAVE
    assert next_step(record, NOW + timedelta(minutes=2)) == (NextStep.FINISH, [])
    ended = finish(record, "", NOW + timedelta(minutes=2))
    assert statuses(ended)["c"] is S.SKIPPED and ended.state is PlanState.FAILED


def decision(action: EscalationAction, prompt: str | None = None) -> PlanDecision:
    return PlanDecision(
        escalation_id="e1",
        response=EscalationResponse(action=action, modified_prompt=prompt),
        decided_by="pat",
    )


def stopped_on_a() -> PlanRecord:
    record = run_wave(running(config={"max_replans": 0}), {"a": S.FAILED})
    assert next_step(record, NOW) == (NextStep.STOP_FOR_PERSON, ["a"])
    stop = PlanStop(reason=StopReason.SUBGOAL_FAILED, subgoal_id="a", escalation_id="e1")
    return stopped(record, stop, NOW)


def test_retry_and_modify_run_the_subgoal_again() -> None:
    retried = apply_decision(stopped_on_a(), decision(EscalationAction.RETRY), NOW)
    assert retried.state is PlanState.RUNNING and retried.stop is None
    assert statuses(retried)["a"] is S.PENDING and next_step(retried, NOW) == (NextStep.RUN_WAVE, ["a"])
    assert retried.decisions == ["pat: retry"]
    modified = apply_decision(stopped_on_a(), decision(EscalationAction.MODIFY_PROMPT, "do it better"), NOW)
    assert modified.plan is not None and modified.plan.subgoal("a").description == "do it better"


def test_skip_waives_the_subgoal_and_its_dependents_run() -> None:
    record = stopped_on_a()
    assert statuses(record)["c"] is S.SKIPPED  # by the rule, while a had failed
    skipped = apply_decision(record, decision(EscalationAction.SKIP), NOW)
    assert skipped.waived == ["a"] and statuses(skipped)["a"] is S.SKIPPED
    assert statuses(skipped)["c"] is S.PENDING
    assert next_step(skipped, NOW) == (NextStep.RUN_WAVE, ["c"])
    ended = finish(run_wave(run_wave(skipped, {}), {}), "done", NOW)
    assert ended.state is PlanState.COMPLETED


def test_a_retried_subgoal_frees_the_dependents_the_failure_skipped() -> None:
    retried = apply_decision(stopped_on_a(), decision(EscalationAction.RETRY), NOW)
    assert statuses(retried) == {"a": S.PENDING, "b": S.COMPLETED, "c": S.PENDING, "d": S.PENDING}
    ended = finish(run_wave(run_wave(run_wave(retried, {}), {}), {}), "done", NOW)
    assert ended.state is PlanState.COMPLETED


def test_abort_ends_the_plan_keeping_what_completed() -> None:
    aborted = apply_decision(stopped_on_a(), decision(EscalationAction.ABORT), NOW)
    assert aborted.state is PlanState.ABORTED
    ended = finish(aborted, "partial", NOW)
    assert ended.state is PlanState.ABORTED and ended.reason == "aborted by pat"
    assert ended.result is not None and ended.result.completed_subgoals == ["b"]


def test_a_simple_task_is_one_subgoal_and_is_never_replanned() -> None:
    record = new_record(PlanRequest(plan_id="p1", task="Say hello"), NOW)
    record = with_plan(record, direct_plan("Say hello"), NOW, direct=True)
    assert record.direct and next_step(record, NOW) == (NextStep.RUN_WAVE, [DIRECT_SUBGOAL_ID])
    failed = run_wave(record, {DIRECT_SUBGOAL_ID: S.FAILED})
    assert next_step(failed, NOW) == (NextStep.STOP_FOR_PERSON, [DIRECT_SUBGOAL_ID])


def test_after_an_attempt_a_failure_tries_the_fallback_once() -> None:
    subgoal = goal("a", fallback_strategy="another way", max_retries=1)
    partial, used = after_attempt(
        subgoal, VerificationResult.PARTIAL, output="", reason="", fallback_used=False
    )
    assert partial.status is S.PENDING and not used and partial.description == "do a"
    failed, used = after_attempt(
        partial, VerificationResult.FAIL, output="", reason="no", fallback_used=False
    )
    assert failed.status is S.PENDING and used and failed.description == "another way"
    final, used = after_attempt(failed, VerificationResult.FAIL, output="", reason="no", fallback_used=True)
    assert final.status is S.FAILED and final.attempts == 3 and final.failure_reason == "no"
    no_fallback, _ = after_attempt(
        goal("b"), VerificationResult.FAIL, output="", reason="x", fallback_used=False
    )
    assert no_fallback.status is S.FAILED


def test_the_request_keeps_its_defaults_and_the_config_its_exact_values() -> None:
    request = PlanRequest(plan_id="p1", task="t")
    assert request.config == PlanningConfig()
    assert request.escalate is True and request.min_success_threshold == 0.5
    assert request.attempt_timeout_seconds == 900 and request.deadline is None


def test_a_given_plan_starts_fresh_and_must_validate() -> None:
    done = goal("a").model_copy(update={"status": S.COMPLETED, "attempts": 3})
    request = PlanRequest(plan_id="p1", task="t", subgoals=[done, goal("b", "a")])
    plan = given_plan(request)
    assert plan is not None and [s.status for s in plan.subgoals] == [S.PENDING, S.PENDING]
    assert plan.subgoals[0].attempts == 0
    assert given_plan(PlanRequest(plan_id="p1", task="t")) is None
    with pytest.raises(InvalidPlan, match="cycle"):
        given_plan(PlanRequest(plan_id="p1", task="t", subgoals=[goal("a", "b"), goal("b", "a")]))
