"""The planner's workflow, run without Dapr: which steps go side by side, what each save holds,
and that a run begun before the saves rode along keeps the order its history recorded."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agora.core.planning import SubGoal, SubGoalStatus
from agora.core.plans.record import PlanRecord, PlanState, SubGoalAttempt
from agora.core.plans.request import PlanRequest
from agora.core.plans.workflow import SubGoalJob, SubGoalReport
from agora.planner.workflow import SUBGOAL_WORKFLOW, Activity, PlanStart, SaveRecord, Synthesized, plan_run
from tests.unit.workflow_replay import Scheduled, ScriptedContext

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def goal(subgoal_id: str, *dependencies: str) -> SubGoal:
    return SubGoal(
        id=subgoal_id,
        description=f"do {subgoal_id}",
        success_criterion=f"{subgoal_id} is done",
        dependencies=list(dependencies),
    )


def start() -> PlanStart:
    """Two waves: a and b, then c."""
    request = PlanRequest(
        plan_id="p1",
        task="a task",
        skills=["web_search"],
        subgoals=[goal("a"), goal("b"), goal("c", "a", "b")],
    )
    return PlanStart(request=request, traceparent=TRACE)


def completes(step: Scheduled) -> Any:
    """Every subgoal completes at its first attempt; the synthesis answers; other steps return nothing."""
    if step.kind == "child":
        job: SubGoalJob = step.argument
        attempt = SubGoalAttempt(
            subgoal_id=job.subgoal.id,
            attempt=1,
            task_id=f"{job.plan_id}.{job.subgoal.id}.{job.round}.1",
            description=job.subgoal.description,
            started_at=NOW,
            finished_at=NOW,
        )
        ended = job.subgoal.model_copy(
            update={"status": SubGoalStatus.COMPLETED, "attempts": 1, "output": "ok"}
        )
        return SubGoalReport(subgoal=ended, attempts=[attempt])
    if step.name == Activity.SYNTHESIZE:
        return Synthesized(final_output="all done")
    return None


def names(ctx: ScriptedContext) -> list[list[str]]:
    return [[s.name for s in wait] for wait in ctx.waits]


def test_a_wave_s_start_goes_with_its_subgoals_and_its_end_with_the_next_step() -> None:
    ctx = ScriptedContext(completes)
    ctx.run(plan_run, start())

    child = SUBGOAL_WORKFLOW
    assert names(ctx) == [
        [child, child, Activity.SAVE],  # the new record, its plan and the first wave's start
        [child, Activity.SAVE],  # the first wave's end and the second's start
        [Activity.SYNTHESIZE, Activity.SAVE],  # the second wave's end
        [Activity.SAVE],  # the plan's end
        [Activity.ANNOUNCE],
    ]
    saves: list[SaveRecord] = ctx.activities(Activity.SAVE)
    assert [s.record.revision for s in saves] == [1, 2, 3, 4]
    assert [s.previous_state for s in saves] == [
        None,
        PlanState.RUNNING,
        PlanState.RUNNING,
        PlanState.RUNNING,
    ]
    first: PlanRecord = saves[0].record
    assert first.plan is not None
    assert [s.status for s in first.plan.subgoals] == [
        SubGoalStatus.RUNNING,
        SubGoalStatus.RUNNING,
        SubGoalStatus.PENDING,
    ]
    assert [len(s.record.attempts) for s in saves] == [0, 2, 3, 3]
    assert saves[-1].record.state is PlanState.COMPLETED
    spans = [(span.name, span.attributes.get("agora.wave")) for s in saves for span in s.finished]
    assert spans == [("planning.wave", 0), ("planning.wave", 1), ("planning.run", None)]


def test_a_run_begun_before_the_saves_rode_along_replays_its_recorded_order() -> None:
    ctx = ScriptedContext(completes, patched=False)
    ctx.run(plan_run, start())

    child, save, synthesize = SUBGOAL_WORKFLOW, [Activity.SAVE], [Activity.SYNTHESIZE]
    assert names(ctx) == [
        save, save, save, [child, child], save, save, [child], save, synthesize, save, [Activity.ANNOUNCE]
    ]  # fmt: skip
    assert [len(s.finished) for s in ctx.activities(Activity.SAVE)] == [0, 0, 0, 1, 0, 1, 1]


def test_a_save_scheduled_by_an_earlier_version_with_one_span_or_none_is_read() -> None:
    ctx = ScriptedContext(completes)
    ctx.run(plan_run, start())
    last = ctx.activities(Activity.SAVE)[-1].model_dump(mode="json")
    one = SaveRecord.model_validate({**last, "finished": last["finished"][0]})
    none = SaveRecord.model_validate({**last, "finished": None})
    assert [s.name for s in one.finished] == ["planning.run"] and none.finished == []
