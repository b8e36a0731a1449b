"""The planner's model calls go to the tiers the plan's `PlanningConfig` names: verification to
`verifier_model_tier`, every other planning call to `planner_model_tier`, each through a
`ModelRouter` that falls back down its chain when a tier's model fails."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from agora.core.market import TaskOutcome
from agora.core.planning import PlanningCall, PlanningConfig, SubGoal, SubGoalStatus, model_tier
from agora.core.plans.record import PlanRecord, new_record
from agora.core.plans.request import PlanRequest
from agora.core.plans.run import with_plan
from agora.core.plans.workflow import SubGoalJob
from agora.core.task_waits import TaskEnded
from agora.llm import ChatMessage, Completion, ModelUnavailable, OfflineModelClient
from agora.planner.activities import PlannerActivities
from agora.planner.steps import PlannerModels, offline_answers
from agora.planner.workflow import Draft, Estimate, LookAhead, SaveRecord, Synthesize, Verify
from agora.sdk import ModelSpec, ModelTier

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GOAL = SubGoal(id="collect", description="Collect the data", success_criterion="the data is collected")
TASK = "Write the report on solar prices in Spain with sources and data"


class TierModel(OfflineModelClient):
    """The offline planner, remembering which planning prompts reached it."""

    def __init__(self, name: str, *, down: bool = False) -> None:
        super().__init__(model=name, overrides=offline_answers)
        self.asked: list[str] = []
        self.down = down

    async def complete(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Completion:
        self.asked.append(messages[0].content.split(" ", 2)[1])  # "You plan ...", "You verify ..."
        if self.down:
            raise ModelUnavailable(f"{self.model} is down")
        return await super().complete(messages, **kwargs)


class Records:
    """A plan's saved records, as `RunRecords` answers them."""

    def __init__(self, *records: PlanRecord) -> None:
        self.by_id = {r.plan_id: r for r in records}
        self.reads = 0

    async def get(self, plan_id: str) -> PlanRecord | None:
        self.reads += 1
        return self.by_id.get(plan_id)

    async def save(self, plan_id: str, record: PlanRecord, *args: Any) -> None:
        self.by_id[plan_id] = record


def tiers(**down: bool) -> dict[ModelTier, TierModel]:
    return {tier: TierModel(tier.value, down=down.get(tier.value, False)) for tier in ModelTier}


def planner(models: dict[ModelTier, TierModel], records: Records | None = None) -> PlannerActivities:
    specs = [ModelSpec(model_id=m.model, tier=ModelTier(t.value)) for t, m in models.items()]
    routed = PlannerModels(specs, {m.model: m for m in models.values()})
    unused = cast(Any, None)
    return PlannerActivities(routed, unused, cast(Any, records or Records()), unused, unused, unused)


def record(config: PlanningConfig, plan_id: str = "p1") -> PlanRecord:
    return new_record(PlanRequest(plan_id=plan_id, task=TASK, config=config), NOW)


def job(plan_id: str = "p1") -> SubGoalJob:
    return SubGoalJob(plan_id=plan_id, task=TASK, subgoal=GOAL, round=1, wave=0, required_skills=["sql"],
                      attempt_timeout_seconds=60, lookahead_paths=2)  # fmt: skip


def ended() -> TaskEnded:
    outcome = TaskOutcome(task_id="p1.collect.1.1", agent_id="analyst", actual_success=True,
                          actual_cost_usd=0.01, actual_steps=2, summary="rows")  # fmt: skip
    return TaskEnded(task_id="p1.collect.1.1", outcome=outcome)


def test_verification_goes_to_the_verifier_tier_and_every_other_planning_call_to_the_planner_s() -> None:
    config = PlanningConfig(planner_model_tier=ModelTier.BALANCED, verifier_model_tier=ModelTier.POWERFUL)
    assert model_tier(config, PlanningCall.VERIFY) is ModelTier.POWERFUL
    others = [call for call in PlanningCall if call is not PlanningCall.VERIFY]
    assert {model_tier(config, call) for call in others} == {ModelTier.BALANCED}
    defaults = PlanningConfig()
    assert model_tier(defaults, PlanningCall.PLAN) is ModelTier.POWERFUL
    assert model_tier(defaults, PlanningCall.VERIFY) is ModelTier.FAST


async def test_each_planning_call_reaches_the_model_of_its_tier_by_default() -> None:
    models = tiers()
    steps = planner(models)
    start = record(PlanningConfig())
    drafted = await steps.draft(Draft(record=start))
    assert drafted.plan is not None and drafted.usage.total_tokens > 0
    running = with_plan(start, drafted.plan, NOW)
    await steps.lookahead(LookAhead(job=job(), subgoal=GOAL))
    verified = await steps.verify(Verify(job=job(), subgoal=GOAL, ended=ended()))
    assert verified.usage.total_tokens > 0
    done = [s.model_copy(update={"status": SubGoalStatus.COMPLETED, "output_summary": "x"})
            for s in drafted.plan.subgoals]  # fmt: skip
    final = running.model_copy(update={"plan": drafted.plan.model_copy(update={"subgoals": done})})
    await steps.synthesize(Synthesize(record=final))
    await steps.estimate(Estimate(task=TASK))

    assert models[ModelTier.POWERFUL].asked == ["plan", "look", "write", "estimate"]
    assert models[ModelTier.FAST].asked == ["verify"]
    assert models[ModelTier.BALANCED].asked == []


async def test_a_plan_s_own_tiers_route_its_calls_found_from_what_was_saved_or_its_record() -> None:
    config = PlanningConfig(planner_model_tier=ModelTier.FAST, verifier_model_tier=ModelTier.POWERFUL)
    models = tiers()
    saved = record(config)
    records = Records(saved)
    steps = planner(models, records)

    await steps.verify(Verify(job=job(), subgoal=GOAL, ended=ended()))  # a plan not seen here yet
    assert records.reads == 1 and models[ModelTier.POWERFUL].asked == ["verify"]
    await steps.lookahead(LookAhead(job=job(), subgoal=GOAL))
    assert records.reads == 1, "the config is kept once read"
    assert models[ModelTier.FAST].asked == ["look"]

    other = record(PlanningConfig(verifier_model_tier=ModelTier.BALANCED), plan_id="p2")
    await steps.save(SaveRecord(record=other))
    await steps.verify(Verify(job=job("p2"), subgoal=GOAL, ended=ended()))
    assert records.reads == 1 and models[ModelTier.BALANCED].asked == ["verify"]

    await steps.verify(Verify(job=job("gone"), subgoal=GOAL, ended=ended()))  # no record: the defaults
    assert models[ModelTier.FAST].asked == ["look", "verify"]


async def test_a_tier_whose_model_fails_falls_back_down_the_router_s_chain() -> None:
    models = tiers(powerful=True)
    steps = planner(models)
    drafted = await steps.draft(Draft(record=record(PlanningConfig())))
    assert drafted.plan is not None
    assert models[ModelTier.POWERFUL].asked == ["plan"]
    assert models[ModelTier.BALANCED].asked == ["plan"], "the chain's first tier answered"


async def test_a_planner_with_one_model_sends_every_tier_to_it_and_reads_no_record() -> None:
    only = TierModel("only")
    records = Records()
    unused = cast(Any, None)
    steps = PlannerActivities(only, unused, cast(Any, records), unused, unused, unused)
    assert steps.models.by_tier is False
    await steps.verify(Verify(job=job(), subgoal=GOAL, ended=ended()))
    await steps.lookahead(LookAhead(job=job(), subgoal=GOAL))
    assert only.asked == ["verify", "look"] and records.reads == 0


def test_a_router_needs_a_client_for_each_model() -> None:
    with pytest.raises(ValueError, match="no client"):
        PlannerModels([ModelSpec(model_id="x", tier=ModelTier.FAST)], {})
