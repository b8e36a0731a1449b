"""Long-horizon planning's pure core: its defaults, DAG validation, waves, the
verification, skip and replan rules, and the plan's result."""

from __future__ import annotations

from datetime import UTC

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agora.core.errors import error_from
from agora.core.models import ModelTier
from agora.core.planning import (
    InvalidPlan,
    Plan,
    PlanningConfig,
    SubGoal,
    SubGoalStatus,
    VerificationResult,
    apply_verification,
    execution_waves,
    merge_replan,
    needs_plan,
    next_wave,
    skip_blocked,
    validate_plan,
)

CONFIG = PlanningConfig()


def goal(subgoal_id: str, *dependencies: str, status: SubGoalStatus = SubGoalStatus.PENDING) -> SubGoal:
    return SubGoal(
        id=subgoal_id,
        description=f"do {subgoal_id}",
        success_criterion=f"{subgoal_id} is done",
        dependencies=list(dependencies),
        status=status,
    )


def plan(*subgoals: SubGoal, version: int = 1) -> Plan:
    return Plan(
        task="write the quarterly report", subgoals=list(subgoals), total_estimated_steps=6, version=version
    )


def with_status(made: Plan, subgoal_id: str, status: SubGoalStatus) -> Plan:
    changed = [s.model_copy(update={"status": status}) if s.id == subgoal_id else s for s in made.subgoals]
    return made.model_copy(update={"subgoals": changed})


def diamond() -> Plan:
    """gather → (analyse, chart) → write, plus an independent `notify`."""
    return plan(
        goal("gather"), goal("analyse", "gather"), goal("chart", "gather"), goal("write", "analyse", "chart"),
        goal("notify"),
    )  # fmt: skip


def test_the_defaults_are_the_references() -> None:
    assert CONFIG.model_dump() == {
        "max_subgoals": 12,
        "max_replans": 3,
        "complexity_threshold": 4,
        "enable_lookahead": True,
        "lookahead_paths": 2,
        "enable_parallel_subgoals": True,
        "cost_budget_usd": None,
        "planner_model_tier": ModelTier.POWERFUL,
        "executor_model_tier": ModelTier.BALANCED,
        "verifier_model_tier": ModelTier.FAST,
    }
    subgoal = SubGoal(id="gather", description="d", success_criterion="c")
    assert (subgoal.dependencies, subgoal.tool_hints, subgoal.fallback_strategy) == ([], [], "")
    assert (subgoal.max_retries, subgoal.status, subgoal.attempts) == (2, SubGoalStatus.PENDING, 0)
    assert (subgoal.output_summary, subgoal.failure_reason) == ("", "")
    made = plan(subgoal)
    assert made.version == 1 and made.created_at.tzinfo is UTC
    assert [v.value for v in VerificationResult] == ["PASS", "PARTIAL", "FAIL"]
    assert [s.value for s in SubGoalStatus] == ["PENDING", "RUNNING", "COMPLETED", "FAILED", "SKIPPED"]


@pytest.mark.parametrize("subgoal_id", ["Gather", "1st_step", "gather-data", "a" * 21, ""])
def test_a_subgoal_id_is_a_short_snake_case_slug(subgoal_id: str) -> None:
    with pytest.raises(ValidationError):
        SubGoal(id=subgoal_id, description="d", success_criterion="c")
    assert SubGoal(id="a" * 20, description="d", success_criterion="c").id == "a" * 20


def test_only_more_steps_than_the_threshold_get_a_plan() -> None:
    assert not needs_plan(4, CONFIG) and needs_plan(5, CONFIG)


def test_every_problem_of_a_plan_is_named_at_once() -> None:
    broken = plan(goal("gather", "write"), goal("write", "gather"), goal("chart", "nowhere"), goal("chart"))
    with pytest.raises(InvalidPlan) as refused:
        validate_plan(broken, CONFIG)
    problems = refused.value.problems
    assert "subgoal id 'chart' is used twice" in problems
    assert "subgoal 'chart' depends on unknown subgoal 'nowhere'" in problems
    assert any(p.startswith("dependency cycle: ") and "gather" in p and "write" in p for p in problems)
    assert len(problems) == 3


def test_a_self_dependency_an_empty_plan_and_too_many_subgoals_are_refused() -> None:
    with pytest.raises(InvalidPlan, match="dependency cycle: loop -> loop"):
        validate_plan(plan(goal("loop", "loop")), CONFIG)
    with pytest.raises(InvalidPlan, match="no subgoals"):
        validate_plan(plan(), CONFIG)
    with pytest.raises(InvalidPlan, match="13 subgoals, more than the limit of 12"):
        validate_plan(plan(*(goal(f"step_{i}") for i in range(13))), CONFIG)
    validate_plan(plan(*(goal(f"step_{i}") for i in range(12))), CONFIG)


def test_the_typed_error_survives_a_trip_between_services() -> None:
    error = error_from(InvalidPlan.code, InvalidPlan(["a is wrong", "b is wrong"]).message)
    assert isinstance(error, InvalidPlan) and error.problems == ["a is wrong", "b is wrong"]


def test_waves_follow_dependencies_and_group_independent_subgoals() -> None:
    assert execution_waves(diamond()) == [["gather", "notify"], ["analyse", "chart"], ["write"]]


@st.composite
def dags(draw: st.DrawFn) -> Plan:
    """A random valid plan: each subgoal depends on some earlier ones; listed in shuffled order."""
    size = draw(st.integers(min_value=1, max_value=12))
    subgoals = []
    for i in range(size):
        dependencies = (
            draw(st.lists(st.integers(min_value=0, max_value=max(0, i - 1)), max_size=3)) if i else []
        )
        subgoals.append(goal(f"s{i}", *sorted({f"s{d}" for d in dependencies})))
    order = draw(st.permutations(subgoals))
    return plan(*order)


@settings(max_examples=200, deadline=None)
@given(dags())
def test_every_subgoal_runs_in_the_first_wave_after_all_its_dependencies(made: Plan) -> None:
    validate_plan(made, CONFIG)
    waves = execution_waves(made)
    wave_of = {subgoal_id: i for i, wave in enumerate(waves) for subgoal_id in wave}
    assert sorted(wave_of) == sorted(s.id for s in made.subgoals)  # each exactly once
    assert sum(len(w) for w in waves) == len(made.subgoals)
    for subgoal in made.subgoals:
        depths = [wave_of[d] for d in subgoal.dependencies]
        # after every dependency, and no later than needed: independent subgoals of the same
        # depth share a wave
        assert wave_of[subgoal.id] == (max(depths) + 1 if depths else 0)
    assert all(waves)


def test_a_failed_subgoal_skips_its_dependents_transitively() -> None:
    failed = with_status(diamond(), "analyse", SubGoalStatus.FAILED)
    chained = plan(*failed.subgoals, goal("publish", "write"))
    skipped = skip_blocked(chained)
    status = {s.id: s.status for s in skipped.subgoals}
    assert status["write"] is SubGoalStatus.SKIPPED and status["publish"] is SubGoalStatus.SKIPPED
    assert status["chart"] is SubGoalStatus.PENDING and status["notify"] is SubGoalStatus.PENDING
    assert skipped.subgoal("write").failure_reason == "dependency analyse failed"
    assert skipped.subgoal("publish").failure_reason == "dependency write was skipped"
    alone = plan(goal("alone"))
    assert skip_blocked(alone) is alone


def test_partial_is_retried_max_retries_times_then_fails() -> None:
    subgoal = goal("gather")
    first = apply_verification(subgoal, VerificationResult.PARTIAL, output_summary="half the ledgers")
    second = apply_verification(first, VerificationResult.PARTIAL)
    third = apply_verification(second, VerificationResult.PARTIAL)
    assert (first.status, first.attempts) == (SubGoalStatus.PENDING, 1)
    assert (second.status, second.attempts) == (SubGoalStatus.PENDING, 2)
    assert (third.status, third.attempts) == (SubGoalStatus.FAILED, 3)
    assert third.failure_reason == "still partial after every retry"
    passed = apply_verification(second, VerificationResult.PASS, output_summary="all ledgers read")
    assert (passed.status, passed.output_summary) == (SubGoalStatus.COMPLETED, "all ledgers read")
    failed = apply_verification(subgoal, VerificationResult.FAIL, reason="the ledgers are locked")
    assert (failed.status, failed.failure_reason, failed.attempts) == (
        SubGoalStatus.FAILED,
        "the ledgers are locked",
        1,
    )


def test_a_replan_keeps_completed_subgoals_and_continues_from_the_first_new_wave() -> None:
    done = goal("gather", status=SubGoalStatus.COMPLETED).model_copy(
        update={"attempts": 1, "output_summary": "ledgers read"}
    )
    current = plan(done, goal("analyse", "gather", status=SubGoalStatus.FAILED), goal("write", "analyse"))
    proposed = plan(
        goal("gather").model_copy(update={"description": "read them again"}),  # may not undo a completed one
        goal("clean", "gather"),
        goal("analyse", "clean"),
        goal("write", "analyse"),
    )
    merged = merge_replan(current, proposed, CONFIG)
    assert merged.version == 2
    assert merged.subgoal("gather") == done
    assert all(
        s.status is SubGoalStatus.PENDING and s.attempts == 0 for s in merged.subgoals if s.id != "gather"
    )
    assert next_wave(merged) == ["clean"]

    left_out = merge_replan(current, plan(goal("summarise", "gather")), CONFIG)
    assert [s.id for s in left_out.subgoals] == ["gather", "summarise"]  # a completed one is never dropped
    with pytest.raises(InvalidPlan, match="unknown subgoal 'nowhere'"):
        merge_replan(current, plan(goal("write", "nowhere")), CONFIG)


def test_next_wave_runs_only_subgoals_whose_dependencies_completed() -> None:
    made = diamond()
    assert next_wave(made) == ["gather", "notify"]
    started = with_status(made, "gather", SubGoalStatus.COMPLETED)
    assert next_wave(started) == ["notify"]  # waves start in order: wave 1 once wave 0 has started
    assert next_wave(with_status(started, "notify", SubGoalStatus.RUNNING)) == ["analyse", "chart"]
