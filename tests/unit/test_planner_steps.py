"""The planner's model calls, on the offline model (as a planner) and on scripted answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agora.core.planning import (
    SUBGOAL_ID_CHARS,
    PlanningConfig,
    PlanNotMade,
    SubGoalStatus,
    VerificationResult,
    execution_waves,
)
from agora.llm import ChatMessage, Completion, OfflineModelClient, TracedModelClient
from agora.planner.steps import (
    DRAFT_SUBGOALS_CEILING,
    DRAFT_TEXT_CHARS,
    DRAFT_TOKENS_CEILING,
    DRAFT_TOKENS_PER_SUBGOAL,
    PlanDraft,
    SubGoalDraft,
    _rules,
    create_plan,
    draft_max_tokens,
    draft_schema,
    drafted_subgoals,
    estimate_complexity,
    lookahead,
    offline_answers,
    replan,
    synthesize,
    unrepeated,
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


class CutOffThenValid(TracedModelClient):
    """A model whose first answer runs into its output limit part way through a plan (as a small
    model repeating one subgoal does), then answers a valid draft; it keeps the schemas asked."""

    backend = "scripted"

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[list[ChatMessage]] = []
        self.schemas: list[dict[str, Any] | None] = []

    async def _complete(self, messages: list[ChatMessage], **options: Any) -> Completion:
        self.asked.append(list(messages))
        self.schemas.append(options.get("json_schema"))
        text = self.answers[len(self.asked) - 1]
        reason = "length" if len(self.asked) == 1 else "stop"
        return Completion(text=text, model="m", backend=self.backend, finish_reason=reason)


async def test_a_draft_cut_off_in_its_subgoals_is_asked_again_more_briefly_not_read_as_one_subgoal() -> None:
    subgoal = {"id": "a", "description": "do a", "success_criterion": "a done"}
    unfinished = '{"total_estimated_steps": 3, "subgoals": [' + ", ".join([json.dumps(subgoal)] * 3)
    model = CutOffThenValid(unfinished, draft(("a", []), ("b", ["a"])))
    plan = await create_plan(model, TASK, CONFIG)
    assert [s.id for s in plan.subgoals] == ["a", "b"]
    told = model.asked[1][-1].content
    assert "cut off at the output limit" in told and "more briefly" in told, told
    assert "Field required" not in told


def test_the_draft_schema_asks_for_what_the_plan_may_hold_and_its_count_first() -> None:
    config = PlanningConfig(max_subgoals=4)
    schema = draft_schema(config)
    assert list(schema["properties"]) == ["total_estimated_steps", "subgoals"]
    assert schema["properties"]["subgoals"]["maxItems"] == 4
    subgoal = schema["$defs"]["SubGoalDraft"]["properties"]
    assert subgoal["id"]["pattern"] == "^[a-z][a-z0-9_]{0,19}$"
    assert subgoal["dependencies"]["maxItems"] == 4
    assert (
        subgoal["description"]["maxLength"] == subgoal["success_criterion"]["maxLength"] == DRAFT_TEXT_CHARS
    )
    # Whatever the narrowed schema admits, PlanDraft takes.
    assert PlanDraft.model_json_schema()["properties"]["subgoals"]["maxItems"] >= 4


def test_a_draft_has_room_for_every_subgoal_it_may_hold_and_a_large_plan_is_asked_for_fewer() -> None:
    small, default, large = (PlanningConfig(max_subgoals=n) for n in (4, 12, 50))
    assert draft_max_tokens(small) == 64 + 4 * DRAFT_TOKENS_PER_SUBGOAL
    # SmolLM2-135M wrote 12 subgoals in 1,065 tokens: a default plan's draft is not cut there.
    assert draft_max_tokens(default) > 1_065
    assert drafted_subgoals(large) == DRAFT_SUBGOALS_CEILING < 50
    assert draft_max_tokens(large) <= DRAFT_TOKENS_CEILING
    schema = draft_schema(large)
    assert schema["properties"]["subgoals"]["maxItems"] == DRAFT_SUBGOALS_CEILING
    assert f"at most {DRAFT_SUBGOALS_CEILING} subgoals" in _rules(large)


def test_a_draft_s_tool_hints_are_among_the_plan_s_skills_when_it_names_some() -> None:
    hints = draft_schema(CONFIG, ["web_search", "write", "web_search"])["$defs"]["SubGoalDraft"]["properties"]
    assert hints["tool_hints"]["items"] == {"enum": ["web_search", "write"]}
    free = draft_schema(CONFIG)["$defs"]["SubGoalDraft"]["properties"]["tool_hints"]["items"]
    assert "enum" not in free, "a plan that names no skill leaves its hints free"


async def test_a_draft_is_asked_for_with_the_narrowed_schema() -> None:
    model = CutOffThenValid("{", draft(("a", [])))
    await create_plan(model, TASK, CONFIG)
    assert model.schemas[0] == draft_schema(CONFIG) and model.schemas[1] == draft_schema(CONFIG)


def test_a_draft_s_repeats_are_taken_out_where_their_meaning_is_plain() -> None:
    def sub(i: str, description: str, dependencies: list[str] | None = None) -> SubGoalDraft:
        return SubGoalDraft(
            id=i, description=description, success_criterion="done", dependencies=dependencies or []
        )

    same = sub("a", "do a")
    assert unrepeated([same, same, sub("b", "do b")]) == [same, sub("b", "do b")], "a repeat is dropped"
    renamed = unrepeated([sub("a", "do a"), sub("a", "do more"), sub("a", "do most")])
    assert [s.id for s in renamed] == ["a", "a_2", "a_3"], "an id reused for other work is numbered"
    long_id = "s" * SUBGOAL_ID_CHARS
    assert [s.id for s in unrepeated([sub(long_id, "x"), sub(long_id, "y")])] == [long_id, "s" * 18 + "_2"]
    ambiguous = [sub("a", "do a"), sub("a", "do more"), sub("b", "use a", ["a"])]
    assert [s.id for s in unrepeated(ambiguous)] == ["a", "a", "b"], "which `a` b needs cannot be told"
