"""What a plan's durable workflows hand each other and wait for: a subgoal's job (the input of
its child workflow) and report (what it returns), and a person's decision on a stopped plan
(`PlanDecision`); a market task's end is `agora.core.task_waits.TaskEnded`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agora.core.escalation.decisions import EscalationResponse
from agora.core.limits import MAX_TASK_SKILLS, Name, Text
from agora.core.market import Probability
from agora.core.planning import SubGoal
from agora.core.plans.record import SubGoalAttempt
from agora.core.plans.request import PlanId, SkillHint

__all__ = ["PlanDecision", "SubGoalJob", "SubGoalReport"]


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
    first_attempt_posted: bool = Field(
        default=False,
        description="The step that started the wave posted the first attempt's task: the subgoal's "
        "workflow waits for its end at once.",
    )


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
