"""The planner's model calls, on the offline model (as a planner) and on scripted answers."""

from __future__ import annotations

import json

import pytest

from agora.core.planning import (
    PlanningConfig,
    PlanNotMade,
    SubGoalStatus,
    VerificationResult,
    execution_waves,
)
from agora.llm import OfflineModelClient
from agora.planner.steps import (
    create_plan,
    estimate_complexity,
    lookahead,
    offline_answers,
    replan,
    synthesize,
    verify,
)
from agora.sdk.testing import ScriptedModel

CONFIG = PlanningConfig()
TASK = "Write the quarterly report on agent market efficiency"


def planner_model() -> OfflineModelClient:
    return OfflineModelClient(overrides=offline_answers)


def draft(*subgoals: tuple[str, list[str]]) -> str:
    return json.dumps(
        {
            "subgoals": [
                {"id": i, "description": f"do {i}", "success_criterion": f"{i} done", "dependencies": d}
                for i, d in subgoals
            ],
            "total_estimated_steps": 4,
        }
    )


async def test_the_offline_model_plans_six_subgoals_in_three_waves() -> None:
    model = planner_model()
    assert await estimate_complexity(model, TASK) > CONFIG.complexity_threshold
    plan = await create_plan(model, TASK, CONFIG, skills=["web_search", "summarize"])
    assert len(plan.subgoals) == 6 and plan.version == 1 and plan.task == TASK
    assert len(execution_waves(plan)) == 3
    assert all(s.tool_hints and s.tool_hints[0] in ("web_search", "summarize") for s in plan.subgoals)
    again = await create_plan(planner_model(), TASK, CONFIG, skills=["web_search", "summarize"])
    assert again.subgoals == plan.subgoals  # the same task gets the same plan
    assert await estimate_complexity(model, "Say hello") <= CONFIG.complexity_threshold


async def test_an_invalid_draft_is_sent_back_with_its_problems() -> None:
    cyclic = draft(("gather", ["write"]), ("write", ["gather"]))
    model = ScriptedModel(cyclic, draft(("gather", []), ("write", ["gather"])))
    plan = await create_plan(model, TASK, CONFIG)
    assert [s.id for s in plan.subgoals] == ["gather", "write"]
    correction = model.asked[1][-1].content
    assert correction.startswith("Fix these problems") and "dependency cycle" in correction
    assert model.asked[1][-2].role == "assistant" and model.asked[1][-2].content == cyclic


async def test_a_model_that_never_drafts_a_valid_plan_is_given_up_on() -> None:
    model = ScriptedModel("not json at all", draft(("Bad Id", [])), draft(("a", ["nowhere"])))
    with pytest.raises(PlanNotMade, match="no valid plan after 3 drafts: subgoal 'a' depends on unknown"):
        await create_plan(model, TASK, CONFIG)
    assert "not a valid plan draft" in model.asked[1][-1].content


@pytest.mark.parametrize(
    ("outcome", "verdict"),
    [
        ("succeeded", VerificationResult.PASS),
        ("partial", VerificationResult.PARTIAL),
        ("failed", VerificationResult.FAIL),
    ],
)
async def test_the_offline_verifier_follows_the_reported_outcome(
    outcome: str, verdict: VerificationResult
) -> None:
    plan = await create_plan(planner_model(), TASK, CONFIG)
    answer = await verify(planner_model(), plan.subgoals[0], outcome, "three sources found")
    assert answer.result is verdict


async def test_an_answer_that_is_no_verdict_is_asked_again_then_fails_the_subgoal_with_the_reason() -> None:
    plan = await create_plan(planner_model(), TASK, CONFIG)
    model = ScriptedModel('{"result": "MAYBE"}', '{"result": "PERHAPS"}')
    answer = await verify(model, plan.subgoals[0], "succeeded", "done")
    assert answer.result is VerificationResult.FAIL and "could not answer" in answer.reason
    again = model.asked[1][-1].content
    assert again.startswith("That answer is not valid: result: Input should be") and "PASS" in again


async def test_a_verdict_given_when_asked_again_is_taken() -> None:
    plan = await create_plan(planner_model(), TASK, CONFIG)
    model = ScriptedModel('{"result": "MAYBE"}', '{"result": "PASS", "reason": "it is done"}')
    answer = await verify(model, plan.subgoals[0], "succeeded", "done")
    assert answer.result is VerificationResult.PASS and len(model.asked) == 2


async def test_a_replan_keeps_what_completed_and_redescribes_the_failed_subgoal() -> None:
    model = planner_model()
    plan = await create_plan(model, TASK, CONFIG)
    done = plan.subgoals[0].model_copy(
        update={"status": SubGoalStatus.COMPLETED, "output_summary": "12 sources"}
    )
    failed = plan.subgoals[2].model_copy(update={"status": SubGoalStatus.FAILED, "failure_reason": "no data"})
    current = plan.model_copy(update={"subgoals": [done, plan.subgoals[1], failed, *plan.subgoals[3:]]})
    repaired = await replan(model, current, failed, CONFIG)
    assert repaired.version == 2
    assert repaired.subgoal(done.id) == done
    assert repaired.subgoal(failed.id).description == failed.fallback_strategy
    assert repaired.subgoal(failed.id).status is SubGoalStatus.PENDING


async def test_the_synthesis_draws_on_the_completed_subgoals() -> None:
    plan = await create_plan(planner_model(), TASK, CONFIG)
    summarised = plan.model_copy(
        update={
            "subgoals": [s.model_copy(update={"output_summary": f"{s.id} result"}) for s in plan.subgoals]
        }
    )
    final = await synthesize(planner_model(), summarised)
    assert final.startswith(TASK) and "write_draft: write_draft result" in final


async def test_the_lookahead_gives_the_most_confident_of_the_paths_asked_for() -> None:
    plan = await create_plan(planner_model(), TASK, CONFIG)
    subgoal = plan.subgoals[0]
    path = await lookahead(planner_model(), TASK, subgoal, paths=2)
    assert path is not None and path.confidence == 0.9 and "Work step by step" in path.approach
    paths = json.dumps({"paths": [
        {"approach": "slow", "confidence": 0.2}, {"approach": "sure", "confidence": 0.8},
        {"approach": "beyond the paths asked for", "confidence": 1.0},
    ]})  # fmt: skip
    chosen = await lookahead(ScriptedModel(paths), TASK, subgoal, paths=2, previous_failure="timed out")
    assert chosen is not None and chosen.approach == "sure"


async def test_a_lookahead_answer_without_a_path_twice_gives_none() -> None:
    plan = await create_plan(planner_model(), TASK, CONFIG)
    model = ScriptedModel('{"paths": []}', '{"paths": []}')
    assert await lookahead(model, TASK, plan.subgoals[0], paths=2) is None
    assert "paths: List should have at least 1 item" in model.asked[1][-1].content
