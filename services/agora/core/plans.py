"""A plan as the planner service runs it: the request, the record people watch, and the rules
that move a running plan from wave to wave.

`agora.core.planning` holds the plan itself (subgoals, waves, verification, replan merge);
this module adds what a service around it needs: `PlanRequest` (topic `agora.plans` and
`PUT /v1/plans/{id}`), `PlanRecord` (`GET /v1/plans/{id}`: the plan version, every subgoal's
status and attempts, replans, cost so far), `PlanCompleted` (topic `agora.plan.completed`),
and the pure steps the durable run takes (`begin_wave`, `end_wave`, `next_step`,
`apply_decision`, `finish`), so the run's decisions are tested without Dapr.

Choices made as users would expect them:

* a task estimated at or below `complexity_threshold` still gets a record and a result: a
  plan of one subgoal (`DIRECT_SUBGOAL_ID`) that goes to the market as the task itself, with
  `direct` set;
* the budget is `config.cost_budget_usd`, counted from what the market's agents report
  (`actual_cost_usd`); before each wave, a plan that has spent its budget stops for a person
  (or fails, with `escalate` off); each subgoal's task gets an equal share of what is left;
* a subgoal that still fails after its fallback and the last replan stops the plan for a
  person (`escalate`, the default) or stays FAILED, its dependents SKIPPED (`escalate` off);
* a person's decision on a stopped subgoal: `retry` runs it again (with `modified_prompt`
  as its description when given), `modify_prompt` runs it again with the new description,
  `skip` waives it (its dependents run without it), `abort` ends the plan: what completed is
  kept and summarized;
* on a budget stop, `retry` and `modify_prompt` lift the budget for the rest of the plan,
  `skip` ends the plan with what completed, `abort` aborts it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.limits import (
    ID_PATTERN,
    MAX_NOTE_CHARS,
    MAX_PAGE_SIZE,
    MAX_SKILL_TAG_CHARS,
    MAX_TASK_SKILLS,
    Identifier,
    IdRef,
    Name,
    Note,
    Text,
    Traceparent,
)
from agora.core.market import Probability, TaskOutcome
from agora.core.planning import (
    MAX_PLAN_SUBGOALS,
    Plan,
    PlanningConfig,
    PlanResult,
    SubGoal,
    SubGoalId,
    SubGoalStatus,
    TokenUsage,
    VerificationResult,
    apply_verification,
    execution_waves,
    next_wave,
    plan_result,
    skip_blocked,
    validate_plan,
)

MAX_PLAN_ID_CHARS = 200
"""Shorter than other ids: a subgoal's market task id is the plan id plus a suffix."""
MAX_RECORDED_ATTEMPTS = 500
"""The most subgoal attempts a plan record keeps (the oldest are dropped beyond it)."""
DIRECT_SUBGOAL_ID = "task"
DEFAULT_ATTEMPT_TIMEOUT_SECONDS = 900

PlanId = Annotated[str, Field(min_length=1, max_length=MAX_PLAN_ID_CHARS, pattern=ID_PATTERN)]
SkillHint = Annotated[str, Field(min_length=1, max_length=MAX_SKILL_TAG_CHARS)]


class PlanState(StrEnum):
    PLANNING = "PLANNING"
    """Estimating the task and drafting the plan."""
    RUNNING = "RUNNING"
    """Subgoals are in the market or being verified."""
    WAITING_FOR_HUMAN = "WAITING_FOR_HUMAN"
    """Stopped until a person decides (`escalation_id`)."""
    COMPLETED = "COMPLETED"
    """Every subgoal completed (or was waived by a person); the result is synthesized."""
    FAILED = "FAILED"
    """The plan ended with subgoals that could not be completed; `reason` says why."""
    ABORTED = "ABORTED"
    """A person aborted it; what completed is kept in the result."""


FINAL_STATES = frozenset({PlanState.COMPLETED, PlanState.FAILED, PlanState.ABORTED})


class PlanSubmission(BaseModel):
    """`PUT /v1/plans/{id}`: what to plan and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: Text = Field(min_length=1, description="The task to plan and carry out.")
    skills: list[SkillHint] = Field(
        default_factory=list,
        max_length=MAX_TASK_SKILLS,
        description="Skills the market's agents offer, as hints for the planner; a subgoal's "
        "market task requires its tool hints, else these.",
    )
    config: PlanningConfig = Field(default_factory=PlanningConfig)
    subgoals: list[SubGoal] | None = Field(
        default=None,
        max_length=MAX_PLAN_SUBGOALS,
        description="A plan to run as given instead of one the planner drafts (no estimate, no "
        "draft); it must validate like a drafted one. Statuses and attempts in it are ignored.",
    )
    escalate: bool = Field(
        default=True,
        description="Stop for a person when a subgoal still fails after the last replan or the "
        "budget is spent; off: the plan fails instead.",
    )
    min_success_threshold: Probability = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="The least calibrated success probability a bid needs to win a subgoal's task "
        "(`TaskSpec.min_success_threshold`); a subgoal nobody bids high enough for fails.",
    )
    attempt_timeout_seconds: int = Field(
        default=DEFAULT_ATTEMPT_TIMEOUT_SECONDS,
        ge=5,
        le=7 * 24 * 3600,
        description="How long one market attempt of a subgoal may take before it counts as failed.",
    )
    deadline: AwareDatetime | None = Field(
        default=None,
        description="When the plan must be done, with its time zone (e.g. `2030-01-01T00:00:00Z`; "
        "a time without one is refused), still ahead when the plan is submitted: no subgoal starts "
        "after it, and the plan fails with what completed.",
    )


class PlanRequest(PlanSubmission):
    """Topic `agora.plans`: a submission with its plan id (the workflow instance id)."""

    plan_id: PlanId


class AttemptEnd(StrEnum):
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    FAILED = "failed"
    REJECTED = "rejected"
    """The market found no agent for it (`agora.task.rejected`)."""
    TIMED_OUT = "timed_out"
    """No outcome within `attempt_timeout_seconds`."""


class SubGoalAttempt(BaseModel):
    """One market task a subgoal ran as, and how it was judged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    subgoal_id: SubGoalId
    attempt: int = Field(ge=1, description="1 for the first run of this subgoal in its round.")
    task_id: Identifier = Field(description="`<plan_id>.<subgoal_id>.<round>.<attempt>`.")
    description: Text
    started_at: datetime
    finished_at: datetime | None = None
    agent_id: Identifier | None = None
    ended: AttemptEnd | None = None
    verdict: VerificationResult | None = None
    reason: Note = ""
    cost_usd: float = Field(default=0.0, ge=0.0)
    approach: Note = Field(default="", description="The path the lookahead chose for the agent, if any.")
    token_usage: TokenUsage = Field(
        default_factory=TokenUsage, description="The planner's model calls for it."
    )


class TaskLink(BaseModel):
    """Which workflow waits for a market task's end (state `planner:task:<task id>`)."""

    task_id: str
    instance_id: str
    event: str


class TaskEnded(BaseModel):
    """The external event a subgoal's workflow waits for: its task's outcome or rejection, as
    the task board recorded it."""

    task_id: str
    outcome: TaskOutcome | None = None
    rejected_reason: Note | None = None


class SubGoalJob(BaseModel):
    """The input of one subgoal's child workflow."""

    plan_id: PlanId
    task: Text
    subgoal: SubGoal
    round: int = Field(ge=1, description="Numbers the subgoal's fresh starts in this plan.")
    wave: int = Field(ge=0)
    required_skills: list[SkillHint] = Field(min_length=1, max_length=MAX_TASK_SKILLS)
    budget_usd: float | None = Field(default=None, gt=0.0)
    min_success_threshold: Probability = Field(default=0.5, ge=0.0, le=1.0)
    attempt_timeout_seconds: int
    lookahead_paths: int = Field(default=0, ge=0, description="Paths simulated before each attempt; 0: none.")
    traceparent: str | None = None


class SubGoalReport(BaseModel):
    """What a subgoal's child workflow returns: the subgoal as it ended and its attempts."""

    subgoal: SubGoal
    attempts: list[SubGoalAttempt]


class StopReason(StrEnum):
    SUBGOAL_FAILED = "subgoal_failed"
    BUDGET_SPENT = "budget_spent"


class PlanStop(BaseModel):
    """Why a running plan waits for a person."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: StopReason
    subgoal_id: SubGoalId | None = None
    escalation_id: IdRef = Field(description="`plan.<plan_id>.stop<n>`.")
    detail: Note = ""


class PlanRecord(BaseModel):
    """A plan as it runs: its version, waves, every subgoal's status and attempts, replans, cost
    so far, a stop waiting for a person, the result.

    Kept as state `planner:plan:<plan id>` and answered by `GET /v1/plans/{id}`; written by the
    plan's workflow after every step (`revision` counts the writes)."""

    plan_id: PlanId
    request: PlanSubmission
    state: PlanState = PlanState.PLANNING
    direct: bool = Field(default=False, description="The task was simple enough to run as one market task.")
    plan: Plan | None = None
    waves: list[Annotated[list[SubGoalId], Field(max_length=MAX_PLAN_SUBGOALS)]] = Field(
        default_factory=list, max_length=MAX_PLAN_SUBGOALS
    )
    current_wave: int | None = None
    replans: int = 0
    rounds: int = Field(default=0, description="Subgoal starts so far (numbers market task ids).")
    cost_usd: float = 0.0
    token_usage: TokenUsage = Field(
        default_factory=TokenUsage,
        description="The planner's own model calls (the agents' are in their cost).",
    )
    budget_lifted: bool = False
    waived: list[SubGoalId] = Field(
        default_factory=list,
        description="Subgoals a person skipped, one entry per skip (not capped: a plan may stop for "
        "a person any number of times).",
    )
    attempts: list[SubGoalAttempt] = Field(default_factory=list, max_length=MAX_RECORDED_ATTEMPTS)
    stop: PlanStop | None = None
    decisions: list[Note] = Field(
        default_factory=list,
        description="Who decided what, in order (not capped: a plan may stop for a person any number "
        "of times).",
    )
    result: PlanResult | None = None
    reason: Note = ""
    traceparent: Traceparent | None = Field(default=None, description="The run's trace (W3C traceparent).")
    created_at: datetime
    updated_at: datetime
    revision: int = 0


class PlanCompleted(BaseModel):
    """Topic `agora.plan.completed`: a plan ended (COMPLETED, FAILED or ABORTED)."""

    plan_id: PlanId
    state: PlanState
    result: PlanResult
    reason: Note = ""
    decided_by: Name | None = Field(default=None, description="Who aborted or last decided, if a person did.")


class PlanAccepted(BaseModel):
    """`PUT /v1/plans/{id}`'s answer: the plan runs (or already ran) under this id."""

    plan_id: PlanId
    state: PlanState
    created: bool = Field(description="False when a plan with this id already existed (nothing new started).")


class PlanList(BaseModel):
    """`GET /v1/plans?state=...`: one page of the plans in a state, by id; with no state, of
    every plan, the newest first (plans created before that listing existed are not in it)."""

    state: PlanState | None = Field(default=None, description="The state listed; None: every state.")
    total: int = Field(description="How many plans the listing has; `plans` is one page of them.")
    plans: list[PlanRecord] = Field(max_length=MAX_PAGE_SIZE)


class PlanDecision(BaseModel):
    """The external event a stopped plan waits for: the person's decision, as its escalation
    recorded it."""

    escalation_id: str
    response: EscalationResponse
    decided_by: Name
    kind: Literal["plan_decision"] = "plan_decision"


# -- the run's steps, pure ----------------------------------------------------------------------


class NextStep(StrEnum):
    RUN_WAVE = "run_wave"
    REPLAN = "replan"
    STOP_FOR_PERSON = "stop_for_person"
    FINISH = "finish"


def submission_of(request: PlanRequest) -> PlanSubmission:
    """The request without its id: what a plan record keeps, and what a repeat must match."""
    return PlanSubmission.model_validate(request.model_dump(exclude={"plan_id"}))


def new_record(request: PlanRequest, now: datetime) -> PlanRecord:
    return PlanRecord(
        plan_id=request.plan_id,
        request=submission_of(request),
        created_at=now,
        updated_at=now,
    )


def after_attempt(
    subgoal: SubGoal, verdict: VerificationResult, *, output: str, reason: str, fallback_used: bool
) -> tuple[SubGoal, bool]:
    """The subgoal after one verified attempt (`apply_verification`), and whether its fallback
    strategy is in use: a subgoal that FAILED and has an unused fallback runs once more with
    the fallback as its description."""
    subgoal = apply_verification(subgoal, verdict, output_summary=output, reason=reason)
    if subgoal.status is SubGoalStatus.FAILED and not fallback_used and subgoal.fallback_strategy.strip():
        retried = subgoal.model_copy(
            update={"status": SubGoalStatus.PENDING, "description": subgoal.fallback_strategy}
        )
        return retried, True
    return subgoal, fallback_used


def given_plan(request: PlanSubmission) -> Plan | None:
    """The plan the request brings, every subgoal fresh (PENDING, no attempts), validated
    (`InvalidPlan` names every problem); None when the planner is to draft one."""
    if request.subgoals is None:
        return None
    fresh = {"status": SubGoalStatus.PENDING, "attempts": 0, "output_summary": "", "failure_reason": ""}
    plan = Plan(
        task=request.task,
        subgoals=[s.model_copy(update=fresh) for s in request.subgoals],
        total_estimated_steps=len(request.subgoals),
    )
    validate_plan(plan, request.config)
    return plan


def direct_plan(task: str) -> Plan:
    """The one-subgoal plan of a task below the complexity threshold: the task as it is."""
    return Plan(
        task=task,
        subgoals=[
            SubGoal(
                id=DIRECT_SUBGOAL_ID,
                description=task,
                success_criterion="the task is done as asked",
            )
        ],
        total_estimated_steps=1,
    )


def with_plan(record: PlanRecord, plan: Plan, now: datetime, *, direct: bool = False) -> PlanRecord:
    return record.model_copy(
        update={
            "plan": plan,
            "waves": execution_waves(plan),
            "state": PlanState.RUNNING,
            "direct": direct or record.direct,
            "updated_at": now,
        }
    )


def budget_left(record: PlanRecord) -> float | None:
    budget = record.request.config.cost_budget_usd
    if budget is None or record.budget_lifted:
        return None
    return max(0.0, budget - record.cost_usd)


def required_skills(subgoal: SubGoal, hints: list[str]) -> list[str]:
    """A subgoal's market task requires its tool hints; without any, the request's first skill
    hint (the others are only what the market offers, not all needed at once), else
    `general`."""
    return list(dict.fromkeys(subgoal.tool_hints or hints[:1] or ["general"]))[:MAX_TASK_SKILLS]


def next_step(record: PlanRecord, now: datetime) -> tuple[NextStep, list[str]]:
    """What the run does next, with the subgoal ids it concerns: run the next wave, replan
    around a failed subgoal, stop for a person (a failed subgoal, or a spent budget), or
    finish. Call after `skip_blocked` has been applied (`end_wave` does)."""
    plan = record.plan
    assert plan is not None
    failed = [s.id for s in plan.subgoals if s.status is SubGoalStatus.FAILED]
    if failed and not _accepted_failures(record):
        if record.replans < record.request.config.max_replans and not record.direct:
            return NextStep.REPLAN, failed[:1]
        if record.request.escalate:
            return NextStep.STOP_FOR_PERSON, failed[:1]
    wave = next_wave(plan, record.waived)
    if not wave:
        return NextStep.FINISH, []
    deadline = record.request.deadline
    if deadline is not None and now >= deadline:
        return NextStep.FINISH, []
    left = budget_left(record)
    if left is not None and left <= 0.0 and record.request.escalate:
        return NextStep.STOP_FOR_PERSON, []
    if left is not None and left <= 0.0:
        return NextStep.FINISH, []
    if not record.request.config.enable_parallel_subgoals:
        wave = wave[:1]
    return NextStep.RUN_WAVE, wave


def _accepted_failures(record: PlanRecord) -> bool:
    """With `escalate` off and the replans spent, failures stand: the plan goes on without them."""
    return not record.request.escalate and (
        record.replans >= record.request.config.max_replans or record.direct
    )


def begin_wave(record: PlanRecord, wave: list[str], now: datetime) -> tuple[PlanRecord, list[SubGoalJob]]:
    """Mark `wave` RUNNING and make one job per subgoal (each a fresh round)."""
    plan = record.plan
    assert plan is not None
    config = record.request.config
    left = budget_left(record)
    share = left / len(wave) if left else None
    wave_index = next(i for i, ids in enumerate(execution_waves(plan)) if wave[0] in ids)
    jobs: list[SubGoalJob] = []
    rounds = record.rounds
    subgoals = []
    for subgoal in plan.subgoals:
        if subgoal.id in wave:
            subgoal = subgoal.model_copy(update={"status": SubGoalStatus.RUNNING})
            rounds += 1
            jobs.append(
                SubGoalJob(
                    plan_id=record.plan_id,
                    task=plan.task,
                    subgoal=subgoal,
                    round=rounds,
                    wave=wave_index,
                    required_skills=required_skills(subgoal, record.request.skills),
                    budget_usd=share,
                    min_success_threshold=record.request.min_success_threshold,
                    lookahead_paths=config.lookahead_paths if config.enable_lookahead else 0,
                    attempt_timeout_seconds=record.request.attempt_timeout_seconds,
                )
            )
        subgoals.append(subgoal)
    updated = record.model_copy(
        update={
            "plan": plan.model_copy(update={"subgoals": subgoals}),
            "rounds": rounds,
            "current_wave": wave_index,
            "state": PlanState.RUNNING,
            "updated_at": now,
        }
    )
    return updated, jobs


def end_wave(record: PlanRecord, reports: list[SubGoalReport], now: datetime) -> PlanRecord:
    """Apply the wave's reports: each subgoal as it ended, its attempts and their cost; then the
    skip rule."""
    plan = record.plan
    assert plan is not None
    ended = {r.subgoal.id: r.subgoal for r in reports}
    attempts = [a for r in reports for a in r.attempts]
    plan = plan.model_copy(update={"subgoals": [ended.get(s.id, s) for s in plan.subgoals]})
    plan = skip_blocked(plan, record.waived)
    return record.model_copy(
        update={
            "plan": plan,
            "attempts": [*record.attempts, *attempts][-MAX_RECORDED_ATTEMPTS:],
            "cost_usd": record.cost_usd + sum(a.cost_usd for a in attempts),
            "token_usage": sum((a.token_usage for a in attempts), record.token_usage),
            "current_wave": None,
            "updated_at": now,
        }
    )


def with_usage(record: PlanRecord, usage: TokenUsage) -> PlanRecord:
    return record.model_copy(update={"token_usage": record.token_usage + usage})


def replanned(record: PlanRecord, plan: Plan, now: datetime) -> PlanRecord:
    return record.model_copy(
        update={
            "plan": plan,
            "waves": execution_waves(plan),
            "replans": record.replans + 1,
            "updated_at": now,
        }
    )


def stopped(record: PlanRecord, stop: PlanStop, now: datetime) -> PlanRecord:
    return record.model_copy(update={"state": PlanState.WAITING_FOR_HUMAN, "stop": stop, "updated_at": now})


def apply_decision(record: PlanRecord, decision: PlanDecision, now: datetime) -> PlanRecord:
    """The plan after a person decided on its stop (see the module's notes for each action).
    An abort, or a skip of a spent budget, ends the plan: the caller then finishes it."""
    stop = record.stop
    plan = record.plan
    assert stop is not None and plan is not None
    response = decision.response
    action = response.action
    note = f"{decision.decided_by}: {action}" + (f" ({response.guidance})" if response.guidance else "")
    update: dict[str, object] = {
        "stop": None,
        "state": PlanState.RUNNING,
        "decisions": [*record.decisions, note[:MAX_NOTE_CHARS]],
        "updated_at": now,
    }
    if action is EscalationAction.ABORT:
        update["state"] = PlanState.ABORTED
        update["reason"] = f"aborted by {decision.decided_by}"
        return record.model_copy(update=update)
    if stop.reason is StopReason.BUDGET_SPENT:
        if action is EscalationAction.SKIP:
            update["reason"] = f"budget spent; {decision.decided_by} ended the plan with what completed"
            update["state"] = PlanState.FAILED
        else:
            update["budget_lifted"] = True
        return record.model_copy(update=update)
    assert stop.subgoal_id is not None
    subgoals = []
    for subgoal in plan.subgoals:
        if subgoal.id == stop.subgoal_id:
            if action is EscalationAction.SKIP:
                subgoal = subgoal.model_copy(
                    update={
                        "status": SubGoalStatus.SKIPPED,
                        "failure_reason": f"skipped by {decision.decided_by}",
                    }
                )
                update["waived"] = [*record.waived, subgoal.id]
            else:
                description = response.modified_prompt or subgoal.description
                subgoal = subgoal.model_copy(
                    update={
                        "status": SubGoalStatus.PENDING,
                        "description": description,
                        "attempts": 0,
                        "failure_reason": "",
                    }
                )
        subgoals.append(subgoal)
    waived = list(update.get("waived", record.waived))  # type: ignore[call-overload]
    # Subgoals the skip rule SKIPPED may run now: pending again, then the rule re-applied.
    subgoals = [
        s.model_copy(update={"status": SubGoalStatus.PENDING, "failure_reason": ""})
        if s.status is SubGoalStatus.SKIPPED and s.id not in waived
        else s
        for s in subgoals
    ]
    update["plan"] = skip_blocked(plan.model_copy(update={"subgoals": subgoals}), waived)
    return record.model_copy(update=update)


def outcome_state(record: PlanRecord) -> PlanState:
    """How a plan that ran out of work ends: COMPLETED when every subgoal completed or was
    waived, else FAILED (an abort was settled by `apply_decision`)."""
    if record.state is PlanState.ABORTED:
        return PlanState.ABORTED
    plan = record.plan
    if plan is None:
        return PlanState.FAILED
    done = all(s.status is SubGoalStatus.COMPLETED or s.id in record.waived for s in plan.subgoals)
    return PlanState.COMPLETED if done and record.state is not PlanState.FAILED else PlanState.FAILED


def finish(record: PlanRecord, final_output: str, now: datetime) -> PlanRecord:
    """The ended record with its `PlanResult`; subgoals that never started are SKIPPED."""
    state = outcome_state(record)
    plan = record.plan or direct_plan(record.request.task)
    never_ran = {SubGoalStatus.PENDING, SubGoalStatus.RUNNING}
    plan = plan.model_copy(
        update={
            "subgoals": [
                s.model_copy(
                    update={"status": SubGoalStatus.SKIPPED, "failure_reason": "the plan ended first"}
                )
                if s.status in never_ran
                else s
                for s in plan.subgoals
            ]
        }
    )
    duration = max(0.0, (now - record.created_at).total_seconds())
    result = plan_result(
        plan,
        final_output=final_output,
        replans_triggered=record.replans,
        duration_seconds=duration,
        usage=[record.token_usage],
    )
    reason = record.reason
    if not reason and state is PlanState.FAILED:
        failed = [
            f"{s.id} ({s.failure_reason or s.status})"
            for s in plan.subgoals
            if s.status is not SubGoalStatus.COMPLETED
        ]
        reason = ("not completed: " + ", ".join(failed))[:MAX_NOTE_CHARS]
    return record.model_copy(
        update={
            "plan": plan,
            "state": state,
            "result": result,
            "reason": reason,
            "stop": None,
            "updated_at": now,
        }
    )


def failed_with(record: PlanRecord, reason: str, now: datetime) -> PlanRecord:
    """The plan ends FAILED with the reason: it could not be made (`PLAN_NOT_MADE`), or its run
    broke down; what completed is kept in the result."""
    return finish(
        record.model_copy(update={"state": PlanState.FAILED, "reason": reason[:MAX_NOTE_CHARS]}), "", now
    )
