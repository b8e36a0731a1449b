"""A plan's run as Dapr workflows: `plan_run` for the plan, `subgoal_run` for each subgoal.

`plan_run` estimates the task, drafts the plan, then runs it wave by wave: each wave's
subgoals start together as child workflows (fan-out) and the wave ends when all have
(fan-in). A subgoal that failed leads to a replan (bounded by `max_replans`), then to a stop
for a person (an `Escalation` whose decision arrives as an external event). At the end the
completed subgoals' results are synthesized in one model call and the plan is announced on
`agora.plan.completed`. The run's record is saved at every step, for `GET /v1/plans/{id}`,
side by side with the step that follows (`SAVES_RIDE_ALONG`).

`subgoal_run` runs one subgoal through the market: it posts the subgoal as a task on
`agora.tasks`, waits for the task's end (an external event raised by the planner's
subscription to outcomes and rejections, or a durable timer), verifies the result against
the success criterion, and retries (PARTIAL) or tries the fallback strategy (FAIL) as the
rules of `agora.core.planning` say.

A `plan_run` whose steps break down for a reason the code did not foresee (an activity that
failed for good, a defect) ends through `plan_failed`: its record FAILED with the error as
the reason, and its completion announced.

The workflow functions only decide (pure functions of their recorded history); everything
that touches the world is an activity (`PlannerActivities`), each declared below once with the
model it takes and what it gives back (`ActivityRef`). Their names are part of the recorded
history: renaming one breaks the plans in flight.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from dapr.ext.workflow import DaprWorkflowContext
from pydantic import BaseModel, Field, field_validator

from agora.core.limits import MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.messages import EscalationResolved
from agora.core.planning import (
    Plan,
    PlanResult,
    SubGoal,
    SubGoalStatus,
    TokenUsage,
    VerificationResult,
    needs_plan,
)
from agora.core.plans.record import (
    AttemptEnd,
    PlanRecord,
    PlanState,
    PlanStop,
    StopReason,
    SubGoalAttempt,
    new_record,
)
from agora.core.plans.request import PlanRequest
from agora.core.plans.run import (
    NextStep,
    after_attempt,
    apply_decision,
    begin_wave,
    direct_plan,
    end_wave,
    failed_with,
    finish,
    given_plan,
    next_step,
    replanned,
    stopped,
    with_plan,
    with_usage,
)
from agora.core.plans.workflow import PlanDecision, SubGoalJob, SubGoalReport
from agora.core.task_waits import TaskEnded
from agora.runtime.patches import (
    FIRST_ATTEMPTS_WITH_WAVE,
    NOT_PLANNED_STOPS,
    PLAN_DECISION_ON_RECORD,
    SAVES_RIDE_ALONG,
)
from agora.runtime.tracing import span_traceparent, stable_span_id
from agora.runtime.workflows import (
    ActivityRef,
    DecisionOnRecord,
    Decisions,
    DurableRun,
    FinishedSpan,
    Pending,
    RunFailure,
    Steps,
    WorkflowRef,
    escalation_answer,
    event_or_check,
    side_by_side,
    workflow_now,
)

BOARD_CHECK_EVERY = timedelta(seconds=60)
"""How often a subgoal attempt waiting for its task's end reads the board meanwhile."""


# -- activity inputs and results -----------------------------------------------------------------


class PlanStart(BaseModel):
    """`plan_run`'s input: the request, the `planning.run` span's traceparent (chosen at
    intake; every step of the run is its descendant) and the intake's own (its parent)."""

    request: PlanRequest
    traceparent: str
    parent_traceparent: str | None = None


class SaveRecord(BaseModel):
    record: PlanRecord
    previous_state: PlanState | None = None
    finished: list[FinishedSpan] = Field(default_factory=list)
    """The spans that ended since the last save."""

    @field_validator("finished", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        """A save scheduled by an earlier version carries one span or none."""
        if value is None:
            return []
        return [value] if isinstance(value, dict | FinishedSpan) else value

    @classmethod
    def of(cls, record: PlanRecord, previous: PlanRecord | None, finished: list[FinishedSpan]) -> SaveRecord:
        """The save of `record`, its state moving from that of `previous` (the record saved before)."""
        return cls(
            record=record, previous_state=previous.state if previous is not None else None, finished=finished
        )


class Estimate(BaseModel):
    task: str
    traceparent: str | None = None


class Estimated(BaseModel):
    steps: int | None
    """None: the model could not estimate (the task is then planned)."""
    usage: TokenUsage = Field(default_factory=TokenUsage)


class Draft(BaseModel):
    record: PlanRecord
    failed_subgoal: str | None = None
    """Set for a replan: the subgoal that could not be completed."""
    task: str = Field(default="", max_length=MAX_TEXT_CHARS)
    """The task to plan instead of the request's: a person's, after no plan could be made."""


class Drafted(BaseModel):
    plan: Plan | None = None
    problem: str = ""
    usage: TokenUsage = Field(default_factory=TokenUsage)


class Stop(BaseModel):
    record: PlanRecord
    reason: StopReason
    subgoal_id: str | None = None
    problem: str = Field(default="", max_length=MAX_NOTE_CHARS)
    """Why no plan could be made (`NOT_PLANNED`)."""


class Synthesize(BaseModel):
    record: PlanRecord


class Synthesized(BaseModel):
    final_output: str
    problem: str = ""
    usage: TokenUsage = Field(default_factory=TokenUsage)


class Announce(BaseModel):
    record: PlanRecord


class PlanFailed(BaseModel):
    """A plan whose run broke down: the run's input, why, and when (the workflow's clock)."""

    start: PlanStart
    failure: RunFailure
    failed_at: datetime


class LookAhead(BaseModel):
    job: SubGoalJob
    subgoal: SubGoal
    previous_failure: str = ""


class Approach(BaseModel):
    approach: str = ""
    """Empty: no usable path (the subgoal goes out as it is)."""
    usage: TokenUsage = Field(default_factory=TokenUsage)


class Dispatch(BaseModel):
    job: SubGoalJob
    attempt: int
    task_id: str
    description: str
    approach: str = ""
    instance_id: str
    event: str


class StartWave(BaseModel):
    """A wave's start: the save held for it, if any, then the first attempt of each of `jobs`
    posted (after its look-ahead, for a job that has one)."""

    save: SaveRecord | None = None
    jobs: list[SubGoalJob] = Field(default_factory=list)


class WaveStarted(BaseModel):
    approaches: list[Approach] = Field(default_factory=list)
    """The approach each job's first attempt was posted with, in the order of the jobs."""


class Check(BaseModel):
    task_id: str


class Verify(BaseModel):
    job: SubGoalJob
    subgoal: SubGoal
    ended: TaskEnded | None
    """None: no end within the attempt's time."""


class Verified(BaseModel):
    ended: AttemptEnd
    verdict: VerificationResult
    reason: str = ""
    output: str = ""
    agent_id: str | None = None
    cost_usd: float = 0.0
    usage: TokenUsage = Field(default_factory=TokenUsage)


# -- the activities and workflows (their names are recorded in each run's history) ----------------

SAVE = ActivityRef("plan.save", SaveRecord, None)
START_WAVE = ActivityRef("plan.start_wave", StartWave, WaveStarted)
ESTIMATE = ActivityRef("plan.estimate", Estimate, Estimated)
DRAFT = ActivityRef("plan.draft", Draft, Drafted)
REPLAN = ActivityRef("plan.replan", Draft, Drafted)
STOP = ActivityRef("plan.stop", Stop, PlanStop)
SYNTHESIZE = ActivityRef("plan.synthesize", Synthesize, Synthesized)
ANNOUNCE = ActivityRef("plan.announce", Announce, None)
FAIL = ActivityRef("plan.fail", PlanFailed, None)
LOOKAHEAD = ActivityRef("subgoal.lookahead", LookAhead, Approach)
DISPATCH = ActivityRef("subgoal.dispatch", Dispatch, None)
CHECK = ActivityRef("subgoal.check", Check, TaskEnded | None)
VERIFY = ActivityRef("subgoal.verify", Verify, Verified)

PLAN_RUN = WorkflowRef("plan_run", PlanStart, PlanResult | None)
SUBGOAL_RUN = WorkflowRef("subgoal_run", SubGoalJob, SubGoalReport)


def plan_decision(event: EscalationResolved) -> PlanDecision:
    """A person's decision on a plan's stop, as its run receives it."""
    answer = escalation_answer(event, "a plan's stop")
    return PlanDecision(escalation_id=event.escalation_id, response=answer, decided_by=event.decided_by)


READ_DECISION = ActivityRef("plan.decision-on-record", DecisionOnRecord, PlanDecision | None)
"""A waiting run's reading of its escalation's record (`Decisions`)."""
PLAN_DECISIONS = Decisions(
    PlanDecision, plan_decision, on_record=READ_DECISION, patch=PLAN_DECISION_ON_RECORD
)


# -- the workflows -------------------------------------------------------------------------------


def plan_run(ctx: DaprWorkflowContext, start: PlanStart) -> Steps[PlanResult | None]:
    request, trace = start.request, start.traceparent
    begun = new_record(request, workflow_now(ctx)).model_copy(update={"traceparent": trace})
    run = DurableRun(ctx, begun, SAVE, SaveRecord.of, holds_saves=SAVES_RIDE_ALONG.applies(ctx))
    first_attempts_posted = FIRST_ATTEMPTS_WITH_WAVE.applies(ctx)

    yield from run.save_later(run.record)
    given = given_plan(request)  # validated at intake
    estimated = Estimated(steps=None)
    if given is None:
        estimate = Estimate(task=request.task, traceparent=trace)
        [estimated] = yield from run.along([ESTIMATE.schedule(ctx, estimate)])
        run.record = with_usage(run.record, estimated.usage)
    if given is not None:
        yield from run.save_later(with_plan(run.record, given, workflow_now(ctx)))
    elif estimated.steps is not None and not needs_plan(estimated.steps, request.config):
        direct = with_plan(run.record, direct_plan(request.task), workflow_now(ctx), direct=True)
        yield from run.save_later(direct)
    else:
        [drafted] = yield from run.along([DRAFT.schedule(ctx, Draft(record=run.record))])
        run.record = with_usage(run.record, drafted.usage)
        if drafted.plan is None and NOT_PLANNED_STOPS.applies(ctx):
            drafted = yield from until_planned(run, request.task, drafted)
        if drafted.plan is None:
            ended = (
                failed_with(run.record, drafted.problem, workflow_now(ctx))
                if run.record.state is PlanState.PLANNING  # a run begun before NOT_PLANNED_STOPS
                else finish(run.record, "", workflow_now(ctx))  # a person ended it
            )
            yield from run.save(ended)
            yield from ANNOUNCE.run(ctx, Announce(record=run.record))
            return run.record.result
        yield from run.save_later(with_plan(run.record, drafted.plan, workflow_now(ctx)))

    waves_run = 0
    while run.record.state is PlanState.RUNNING:
        step, subgoal_ids = next_step(run.record, workflow_now(ctx))
        if step is NextStep.RUN_WAVE:
            waves_run += 1
            wave_started = workflow_now(ctx)
            wave_trace = span_traceparent(trace, stable_span_id(request.plan_id, "wave", str(waves_run)))
            running, jobs = begin_wave(run.record, subgoal_ids, wave_started)
            posted = {"traceparent": wave_trace, "first_attempt_posted": first_attempts_posted}
            jobs = [job.model_copy(update=posted) for job in jobs]
            yield from run.save_later(running)
            children = [SUBGOAL_RUN.child(ctx, job, instance_id=subgoal_instance_id(job)) for job in jobs]
            if first_attempts_posted:
                reports = yield from wave(run, children, jobs)
            else:
                reports = yield from run.along(children)
            ended = end_wave(run.record, reports, workflow_now(ctx))
            wave_span = FinishedSpan(
                name="planning.wave",
                traceparent=wave_trace,
                parent=trace,
                start=wave_started,
                end=ended.updated_at,
                attributes={"agora.plan_id": request.plan_id, "agora.wave": jobs[0].wave,
                            "agora.subgoals": ",".join(subgoal_ids)},
            )  # fmt: skip
            yield from run.save_later(ended, wave_span)
        elif step is NextStep.REPLAN:
            replanning = Draft(record=run.record, failed_subgoal=subgoal_ids[0])
            [drafted] = yield from run.along([REPLAN.schedule(ctx, replanning)])
            run.record = with_usage(run.record, drafted.usage)
            if drafted.plan is not None:
                yield from run.save_later(replanned(run.record, drafted.plan, workflow_now(ctx)))
            else:  # the replan itself failed: it counts, and the failure stands
                counted = {"replans": run.record.replans + 1, "reason": drafted.problem}
                yield from run.save_later(run.record.model_copy(update=counted))
        elif step is NextStep.STOP_FOR_PERSON:
            reason = StopReason.SUBGOAL_FAILED if subgoal_ids else StopReason.BUDGET_SPENT
            failed = subgoal_ids[0] if subgoal_ids else None
            stopping = Stop(record=run.record, reason=reason, subgoal_id=failed)
            [stop] = yield from run.along([STOP.schedule(ctx, stopping)])
            yield from run.save(
                stopped(run.record, stop, workflow_now(ctx))
            )  # before the wait: a person reads it
            decision = yield from PLAN_DECISIONS.wait(ctx, stop.escalation_id)
            decided = apply_decision(run.record, decision, workflow_now(ctx))
            if decided.state is PlanState.RUNNING:
                yield from run.save_later(decided)
            else:  # the decision ends the plan: saved once, with its result, below
                run.record = decided
        else:
            break

    final_output = ""
    plan = run.record.plan
    if plan is not None and any(s.status is SubGoalStatus.COMPLETED for s in plan.subgoals):
        [synthesized] = yield from run.along([SYNTHESIZE.schedule(ctx, Synthesize(record=run.record))])
        final_output = synthesized.final_output
        run.record = with_usage(run.record, synthesized.usage)
        if synthesized.problem:
            run.record = run.record.model_copy(update={"reason": synthesized.problem})
    finished = finish(run.record, final_output, workflow_now(ctx))
    run_span = FinishedSpan(
        name="planning.run",
        traceparent=trace,
        parent=start.parent_traceparent,
        start=run.record.created_at,
        end=finished.updated_at,
        attributes={"agora.plan_id": request.plan_id, "agora.plan_state": str(finished.state),
                    "agora.replans": finished.replans},
    )  # fmt: skip
    yield from run.save(finished, run_span)
    yield from ANNOUNCE.run(ctx, Announce(record=run.record))
    return run.record.result


def until_planned(run: DurableRun[PlanRecord, SaveRecord], task: str, drafted: Drafted) -> Steps[Drafted]:
    """No plan could be made: the plan waits for a person, who has it drafted again (with the
    task they give, if any) until a plan is made, or ends it. The last draft, without a plan
    when the person ended the plan (then the record says how)."""
    ctx = run.ctx
    while drafted.plan is None:
        stopping = Stop(
            record=run.record, reason=StopReason.NOT_PLANNED, problem=drafted.problem[:MAX_NOTE_CHARS]
        )
        [stop] = yield from run.along([STOP.schedule(ctx, stopping)])
        # Saved before the wait: a person reads it.
        yield from run.save(stopped(run.record, stop, workflow_now(ctx)))
        decision = yield from PLAN_DECISIONS.wait(ctx, stop.escalation_id)
        run.record = apply_decision(run.record, decision, workflow_now(ctx))
        if run.record.state is not PlanState.PLANNING:
            return drafted
        task = decision.response.modified_prompt or task
        yield from run.save_later(run.record)
        [drafted] = yield from run.along([DRAFT.schedule(ctx, Draft(record=run.record, task=task))])
        run.record = with_usage(run.record, drafted.usage)
    return drafted


def wave(
    run: DurableRun[PlanRecord, SaveRecord], children: list[Pending[SubGoalReport]], jobs: list[SubGoalJob]
) -> Steps[list[SubGoalReport]]:
    """The subgoals' workflows (started just before) side by side with the wave's start (the
    save held back, if any, and their first attempts posted): their reports, each first attempt
    with the approach it was posted with."""
    starting = StartWave(save=run.held_save(), jobs=jobs)
    started, reports = yield from side_by_side(START_WAVE.schedule(run.ctx, starting), children)
    return [with_first_approach(r, a) for r, a in zip(reports, started.approaches, strict=True)]


def plan_failed(ctx: DaprWorkflowContext, start: PlanStart, failure: RunFailure) -> Steps[None]:
    """`plan_run`'s end when its steps broke down: the record FAILED with the reason, announced."""
    yield from FAIL.run(ctx, PlanFailed(start=start, failure=failure, failed_at=workflow_now(ctx)))


def subgoal_run(ctx: DaprWorkflowContext, job: SubGoalJob) -> Steps[SubGoalReport]:
    subgoal = job.subgoal
    attempts: list[SubGoalAttempt] = []
    fallback_used = False
    while True:
        number = len(attempts) + 1
        task_id = subgoal_task_id(job, number)
        event = attempt_event(number)
        started = workflow_now(ctx)
        chosen = Approach()
        posted = number == 1 and job.first_attempt_posted  # by the wave's start, which notes how
        if job.lookahead_paths and not posted:
            last_failure = attempts[-1].reason if attempts else ""
            looking = LookAhead(job=job, subgoal=subgoal, previous_failure=last_failure)
            chosen = yield from LOOKAHEAD.run(ctx, looking)
        approach = chosen.approach
        if not posted:
            yield from DISPATCH.run(ctx, attempt_dispatch(job, subgoal, number, approach))
        # The planner raises the event when it hears the task's end; the board is read every
        # minute meanwhile, so a lost signal costs at most that long, not the attempt's timeout.
        timeout = timedelta(seconds=job.attempt_timeout_seconds)
        checked = Check(task_id=task_id)
        ended = yield from event_or_check(
            ctx, event, CHECK, checked, every=BOARD_CHECK_EVERY, timeout=timeout
        )
        verified = yield from VERIFY.run(ctx, Verify(job=job, subgoal=subgoal, ended=ended))
        attempts.append(
            SubGoalAttempt(
                subgoal_id=subgoal.id,
                attempt=number,
                task_id=task_id,
                description=subgoal.description,
                started_at=started,
                finished_at=workflow_now(ctx),
                agent_id=verified.agent_id,
                ended=verified.ended,
                verdict=verified.verdict,
                reason=verified.reason[:2048],
                cost_usd=verified.cost_usd,
                approach=approach,
                token_usage=chosen.usage + verified.usage,
            )
        )
        subgoal, fallback_used = after_attempt(
            subgoal,
            verified.verdict,
            output=verified.output,
            reason=verified.reason,
            fallback_used=fallback_used,
        )
        if subgoal.status is not SubGoalStatus.PENDING:
            return SubGoalReport(subgoal=subgoal, attempts=attempts)


def attempt_dispatch(job: SubGoalJob, subgoal: SubGoal, number: int, approach: str = "") -> Dispatch:
    """Attempt `number` of the subgoal as its task goes to the market, waited for by the
    subgoal's workflow (its instance id is the job's)."""
    return Dispatch(
        job=job,
        attempt=number,
        task_id=subgoal_task_id(job, number),
        description=subgoal.description,
        approach=approach,
        instance_id=subgoal_instance_id(job),
        event=attempt_event(number),
    )


def with_first_approach(report: SubGoalReport, chosen: Approach) -> SubGoalReport:
    """The report with its first attempt as the wave's start posted it: its approach, and the
    look-ahead's tokens."""
    attempts = [
        a.model_copy(update={"approach": chosen.approach, "token_usage": a.token_usage + chosen.usage})
        if a.attempt == 1
        else a
        for a in report.attempts
    ]
    return report.model_copy(update={"attempts": attempts})


def attempt_event(number: int) -> str:
    """The event that tells a subgoal's workflow that attempt `number`'s task ended."""
    return f"ended.{number}"


def subgoal_instance_id(job: SubGoalJob) -> str:
    return f"{job.plan_id}.{job.subgoal.id}.{job.round}"


def subgoal_task_id(job: SubGoalJob, attempt: int) -> str:
    """The market task of one attempt: unique per plan, subgoal, round and attempt."""
    return f"{subgoal_instance_id(job)}.{attempt}"
