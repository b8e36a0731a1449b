"""The pure steps of a plan's run, which the durable workflow takes in order: the plan given,
drafted or direct (`given_plan`, `direct_plan`, `with_plan`); what to do next (`next_step`: run
a wave, replan, stop for a person, finish); a wave begun and ended (`begin_wave`, `end_wave`,
`after_attempt`), a replan, a stop and a person's decision on it (`apply_decision`); the end
(`finish`, `failed_with`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from agora.core.escalation.decisions import EscalationAction
from agora.core.limits import MAX_NOTE_CHARS, MAX_TASK_SKILLS
from agora.core.planning import (
    Plan,
    SubGoal,
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
from agora.core.plans.record import MAX_RECORDED_ATTEMPTS, PlanRecord, PlanState, PlanStop, StopReason
from agora.core.plans.request import PlanSubmission
from agora.core.plans.workflow import PlanDecision, SubGoalJob, SubGoalReport

__all__ = [
    "DIRECT_SUBGOAL_ID",
    "NextStep",
    "after_attempt",
    "apply_decision",
    "begin_wave",
    "budget_left",
    "direct_plan",
    "end_wave",
    "failed_with",
    "finish",
    "given_plan",
    "next_step",
    "outcome_state",
    "replanned",
    "required_skills",
    "stopped",
    "with_plan",
    "with_usage",
]

DIRECT_SUBGOAL_ID = "task"
"""The id of the one subgoal of a direct plan (a task below the complexity threshold)."""


class NextStep(StrEnum):
    RUN_WAVE = "run_wave"
    REPLAN = "replan"
    STOP_FOR_PERSON = "stop_for_person"
    FINISH = "finish"


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
    """The plan after a person decided on its stop (see the package's notes for each action).
    An abort, or a skip of a spent budget, ends the plan: the caller then finishes it."""
    stop = record.stop
    plan = record.plan
    assert stop is not None
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
    if stop.reason is StopReason.NOT_PLANNED:
        if action is EscalationAction.SKIP:
            update["state"] = PlanState.FAILED
            update["reason"] = f"{stop.detail}; {decision.decided_by} ended the plan"[:MAX_NOTE_CHARS]
        else:  # drafted again: by the caller, with the person's task if they gave one
            update["state"] = PlanState.PLANNING
        return record.model_copy(update=update)
    assert plan is not None
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
