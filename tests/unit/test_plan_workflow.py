"""The planner's workflows, run without Dapr: which steps go side by side, what each save holds,
which step posts a subgoal's attempts, and that a run begun before a change keeps the order its
history recorded."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.market import TaskOutcome
from agora.core.planning import Plan, SubGoal, SubGoalStatus, TokenUsage, VerificationResult
from agora.core.plans.record import AttemptEnd, PlanRecord, PlanState, PlanStop, StopReason, SubGoalAttempt
from agora.core.plans.request import PlanRequest
from agora.core.plans.workflow import PlanDecision, SubGoalJob, SubGoalReport
from agora.core.task_waits import TaskEnded
from agora.planner.workflow import (
    ANNOUNCE,
    DISPATCH,
    DRAFT,
    ESTIMATE,
    LOOKAHEAD,
    SAVE,
    START_WAVE,
    STOP,
    SUBGOAL_RUN,
    SYNTHESIZE,
    VERIFY,
    Approach,
    Drafted,
    Estimated,
    PlanStart,
    SaveRecord,
    Synthesized,
    Verified,
    WaveStarted,
    attempt_dispatch,
    plan_run,
    subgoal_run,
)
from agora.runtime.patches import FIRST_ATTEMPTS_WITH_WAVE, SAVES_RIDE_ALONG
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
    if step.name == SYNTHESIZE.name:
        return Synthesized(final_output="all done")
    if step.name == START_WAVE.name:
        chosen = [Approach(approach=f"the way to {job.subgoal.id}", usage=TokenUsage(prompt_tokens=5))
                  for job in step.argument.jobs]  # fmt: skip
        return WaveStarted(approaches=chosen)
    return None


def names(ctx: ScriptedContext) -> list[list[str]]:
    return [[s.name for s in wait] for wait in ctx.waits]


def saves_of(ctx: ScriptedContext) -> list[SaveRecord]:
    """Every save of the run, in order: on their own and those a wave's start carried."""
    found = []
    for wait in ctx.waits:
        for step in wait:
            if step.name == SAVE.name:
                found.append(step.argument)
            elif step.name == START_WAVE.name and step.argument.save is not None:
                found.append(step.argument.save)
    return found


def test_a_wave_s_start_goes_with_its_subgoals_and_its_end_with_the_next_step() -> None:
    ctx = ScriptedContext(completes)
    ctx.run(plan_run, start())

    child, wave = SUBGOAL_RUN.name, START_WAVE.name
    assert names(ctx) == [
        [child, child, wave],  # the new record, its plan and the first wave's start
        [child, wave],  # the first wave's end and the second's start
        [SYNTHESIZE.name, SAVE.name],  # the second wave's end
        [SAVE.name],  # the plan's end
        [ANNOUNCE.name],
    ]
    saves = saves_of(ctx)
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

    child, save, synthesize = SUBGOAL_RUN.name, [SAVE.name], [SYNTHESIZE.name]
    assert names(ctx) == [
        save, save, save, [child, child], save, save, [child], save, synthesize, save, [ANNOUNCE.name]
    ]  # fmt: skip
    assert [len(s.finished) for s in ctx.activities(SAVE.name)] == [0, 0, 0, 1, 0, 1, 1]


def test_a_save_scheduled_by_an_earlier_version_with_one_span_or_none_is_read() -> None:
    ctx = ScriptedContext(completes)
    ctx.run(plan_run, start())
    last = saves_of(ctx)[-1].model_dump(mode="json")
    one = SaveRecord.model_validate({**last, "finished": last["finished"][0]})
    none = SaveRecord.model_validate({**last, "finished": None})
    assert [s.name for s in one.finished] == ["planning.run"] and none.finished == []


def test_a_wave_s_start_posts_its_subgoals_first_attempts_and_their_workflows_wait_for_them() -> None:
    ctx = ScriptedContext(completes)
    ctx.run(plan_run, start())

    first, second = ctx.activities(START_WAVE.name)
    assert [job.subgoal.id for job in first.jobs] == ["a", "b"]
    assert [job.subgoal.id for job in second.jobs] == ["c"]
    children = [s.argument for wait in ctx.waits for s in wait if s.kind == "child"]
    assert [job.first_attempt_posted for job in children] == [True, True, True]
    # each first attempt is recorded with the approach it was posted with, and its tokens
    ended = saves_of(ctx)[-1].record
    assert [(a.subgoal_id, a.approach) for a in ended.attempts] == [
        ("a", "the way to a"),
        ("b", "the way to b"),
        ("c", "the way to c"),
    ]
    assert ended.token_usage.prompt_tokens == 15


def test_a_first_attempt_is_posted_as_its_look_ahead_chose_and_the_same_way_again() -> None:
    job = subgoal_job(posted=True, lookahead=2)
    dispatch = attempt_dispatch(job, job.subgoal, 1, "the way to a")
    assert (dispatch.task_id, dispatch.instance_id, dispatch.event, dispatch.approach) == (
        "p1.a.1.1", "p1.a.1", "ended.1", "the way to a"
    )  # fmt: skip


def test_a_run_begun_before_first_attempts_went_with_the_wave_keeps_its_subgoals_posting_them() -> None:
    ctx = ScriptedContext(completes, patched=frozenset({SAVES_RIDE_ALONG.name}))
    ctx.run(plan_run, start())

    child = SUBGOAL_RUN.name
    assert names(ctx) == [
        [child, child, SAVE.name],
        [child, SAVE.name],
        [SYNTHESIZE.name, SAVE.name],
        [SAVE.name],
        [ANNOUNCE.name],
    ]
    children = [s.argument for wait in ctx.waits for s in wait if s.kind == "child"]
    assert [job.first_attempt_posted for job in children] == [False, False, False]


def subgoal_job(*, posted: bool, lookahead: int = 0) -> SubGoalJob:
    retried = goal("a").model_copy(update={"fallback_strategy": "do a the other way"})
    return SubGoalJob(plan_id="p1", task="a task", subgoal=retried, round=1, wave=0,
                      required_skills=["web_search"], attempt_timeout_seconds=300,
                      lookahead_paths=lookahead, first_attempt_posted=posted)  # fmt: skip


def fails_then_passes(step: Scheduled) -> Any:
    """Each attempt's task ends with an outcome; the first is judged failed, the next passed."""
    if step.kind == "event":
        number = int(step.name.rsplit(".", 1)[1])
        outcome = TaskOutcome(task_id=f"p1.a.1.{number}", agent_id="agent-1", actual_success=True,
                              actual_cost_usd=0.0, actual_steps=1)  # fmt: skip
        return TaskEnded(task_id=outcome.task_id, outcome=outcome).model_dump(mode="json")
    if step.name == VERIFY.name:
        first = step.argument.ended.task_id.endswith(".1")
        verdict = VerificationResult.FAIL if first else VerificationResult.PASS
        return Verified(ended=AttemptEnd.SUCCEEDED, verdict=verdict)
    if step.name == LOOKAHEAD.name:
        return Approach(approach="")
    return None


def test_a_subgoal_whose_first_attempt_went_with_the_wave_waits_for_it_and_posts_the_next_itself() -> None:
    ctx = ScriptedContext(fails_then_passes)
    report = SubGoalReport.model_validate(ctx.run(subgoal_run, subgoal_job(posted=True)))

    assert names(ctx)[0] == ["ended.1", "0:01:00"]  # its first step waits for the task's end
    [retry] = ctx.activities(DISPATCH.name)
    assert (retry.attempt, retry.task_id, retry.event, retry.description) == (
        2, "p1.a.1.2", "ended.2", "do a the other way"
    )  # fmt: skip
    assert [a.task_id for a in report.attempts] == ["p1.a.1.1", "p1.a.1.2"]


def test_a_subgoal_not_posted_with_its_wave_posts_its_first_attempt_itself() -> None:
    for job in (subgoal_job(posted=False), subgoal_job(posted=False, lookahead=2)):
        ctx = ScriptedContext(fails_then_passes)
        ctx.run(subgoal_run, job)
        assert [d.attempt for d in ctx.activities(DISPATCH.name)] == [1, 2]


def unplannable(decisions: list[EscalationResponse]) -> Any:
    """The task gets no plan at its first draft; a person decides each stop in turn (the
    drafts after a decision make a plan of one subgoal, which completes)."""
    given = iter(decisions)

    def answer(step: Scheduled) -> Any:
        if step.name == ESTIMATE.name:
            return Estimated(steps=None)
        if step.name == DRAFT.name:
            if not step.argument.task:
                return Drafted(problem="no valid plan after 3 drafts: the answer holds no JSON object")
            return Drafted(plan=Plan(task=step.argument.task, subgoals=[goal("a")], total_estimated_steps=1))
        if step.name == STOP.name:
            number = len(step.argument.record.decisions) + 1
            return PlanStop(reason=step.argument.reason, escalation_id=f"plan.p1.stop{number}",
                            detail=f"no plan was made: {step.argument.problem}")  # fmt: skip
        if step.kind == "event":
            decision = PlanDecision(escalation_id="plan.p1.stop1", response=next(given), decided_by="pat")
            return decision.model_dump(mode="json")
        return completes(step)

    return answer


def unplanned_start() -> PlanStart:
    return PlanStart(
        request=PlanRequest(plan_id="p1", task="a task", skills=["web_search"]), traceparent=TRACE
    )


def test_a_task_that_gets_no_plan_waits_for_a_person_who_has_it_planned_again_with_their_task() -> None:
    retry = EscalationResponse(action=EscalationAction.MODIFY_PROMPT, modified_prompt="a smaller task")
    ctx = ScriptedContext(unplannable([retry]))
    result = ctx.run(plan_run, unplanned_start())

    [stop] = ctx.activities(STOP.name)
    assert stop.reason is StopReason.NOT_PLANNED and "holds no JSON object" in stop.problem
    waiting = [s.record for s in saves_of(ctx) if s.record.state is PlanState.WAITING_FOR_HUMAN]
    assert (
        len(waiting) == 1 and waiting[0].stop is not None and waiting[0].stop.reason is StopReason.NOT_PLANNED
    )
    assert [d.task for d in ctx.activities(DRAFT.name)] == ["", "a smaller task"]
    assert saves_of(ctx)[-1].record.state is PlanState.COMPLETED and result is not None


def test_a_person_who_skips_a_task_that_got_no_plan_ends_it_failed_with_the_reason() -> None:
    ctx = ScriptedContext(unplannable([EscalationResponse(action=EscalationAction.SKIP)]))
    ctx.run(plan_run, unplanned_start())

    ended = saves_of(ctx)[-1].record
    assert ended.state is PlanState.FAILED
    assert (
        ended.reason.startswith("no plan was made: no valid plan after 3 drafts")
        and "pat ended" in ended.reason
    )
    assert len(ctx.activities(DRAFT.name)) == 1 and names(ctx)[-1] == [ANNOUNCE.name]


def test_a_run_begun_before_no_plan_stopped_for_a_person_fails_at_once() -> None:
    patched = frozenset({SAVES_RIDE_ALONG.name, FIRST_ATTEMPTS_WITH_WAVE.name})
    ctx = ScriptedContext(unplannable([]), patched=patched)
    ctx.run(plan_run, unplanned_start())

    assert ctx.activities(STOP.name) == []
    ended = saves_of(ctx)[-1].record
    assert ended.state is PlanState.FAILED and ended.reason.startswith("no valid plan after 3 drafts")
