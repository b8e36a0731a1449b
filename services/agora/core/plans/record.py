"""A plan's record, as people watch it (`PlanRecord`, state `planner:plan:<plan id>`): its
state, version, waves, every subgoal's status and attempts (`SubGoalAttempt`), replans, cost so
far, a stop waiting for a person (`PlanStop`), the decisions and the result; and what the
service answers and announces of it (`PlanAccepted`, `PlanList`, `PlanCompleted`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from agora.core.limits import MAX_PAGE_SIZE, Identifier, IdRef, Name, Note, Text, Traceparent
from agora.core.planning import (
    MAX_PLAN_SUBGOALS,
    Plan,
    PlanResult,
    SubGoalId,
    TokenUsage,
    VerificationResult,
)
from agora.core.plans.request import PlanId, PlanRequest, PlanSubmission, submission_of

__all__ = [
    "FINAL_STATES",
    "MAX_RECORDED_ATTEMPTS",
    "AttemptEnd",
    "PlanAccepted",
    "PlanCompleted",
    "PlanList",
    "PlanRecord",
    "PlanState",
    "PlanStop",
    "StopReason",
    "SubGoalAttempt",
    "new_record",
]

MAX_RECORDED_ATTEMPTS = 500
"""The most subgoal attempts a plan record keeps (the oldest are dropped beyond it)."""


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


class StopReason(StrEnum):
    SUBGOAL_FAILED = "subgoal_failed"
    BUDGET_SPENT = "budget_spent"
    NOT_PLANNED = "not_planned"
    """The planner model gave no valid plan within its drafts: a person has it drafted again
    (retry, or modify_prompt with the task to plan instead) or ends the plan (skip, abort)."""


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

    @classmethod
    def of(cls, record: PlanRecord) -> PlanCompleted:
        """The announcement of an ended plan's record (its result is set once it ended)."""
        assert record.result is not None
        who = record.decisions[-1].split(":", 1)[0] if record.decisions else None
        return cls(plan_id=record.plan_id, state=record.state, result=record.result, reason=record.reason,
                   decided_by=who)  # fmt: skip


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


def new_record(request: PlanRequest, now: datetime) -> PlanRecord:
    return PlanRecord(
        plan_id=request.plan_id,
        request=submission_of(request),
        created_at=now,
        updated_at=now,
    )
