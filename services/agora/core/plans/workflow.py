"""What a plan's durable workflows hand each other and wait for: a subgoal's job (the input of
its child workflow) and report (what it returns), the external events (a market task's end,
`TaskEnded`; a person's decision on a stopped plan, `PlanDecision`) and which workflow waits for
a market task (`TaskLink`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agora.core.escalation.decisions import EscalationResponse
from agora.core.limits import MAX_NOTE_CHARS, MAX_TASK_SKILLS, Name, Note, Text
from agora.core.market import AllocationStatus, Probability, TaskOutcome
from agora.core.planning import SubGoal
from agora.core.plans.record import SubGoalAttempt
from agora.core.plans.request import PlanId, SkillHint
from agora.core.task_lifecycle import TaskRecord

__all__ = ["PlanDecision", "SubGoalJob", "SubGoalReport", "TaskEnded", "TaskLink"]


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

    @classmethod
    def on_board(cls, record: TaskRecord) -> TaskEnded | None:
        """The task's end as its board record tells it (None while it has none): its outcome,
        its rejection, or its failure without an outcome (no agent acknowledged the award)."""
        if record.outcome is not None:
            return cls(task_id=record.task_id, outcome=record.outcome)
        if record.status is AllocationStatus.REJECTED:
            reason = (record.allocation.reject_reason if record.allocation else None) or "rejected"
            return cls(task_id=record.task_id, rejected_reason=str(reason)[:MAX_NOTE_CHARS])
        if record.status is AllocationStatus.FAILED:
            reason = record.failure_reason or "the task failed"
            return cls(task_id=record.task_id, rejected_reason=reason[:MAX_NOTE_CHARS])
        return None


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


class PlanDecision(BaseModel):
    """The external event a stopped plan waits for: the person's decision, as its escalation
    recorded it."""

    escalation_id: str
    response: EscalationResponse
    decided_by: Name
    kind: Literal["plan_decision"] = "plan_decision"
