"""What a plan is asked with: the submission (`PUT /v1/plans/{id}`: the task, skill hints, the
planning config, a plan given as is, whether to stop for a person, the bar a bid must clear,
an attempt's timeout, a deadline) and the request that carries it with its plan id (topic
`agora.plans`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from agora.core.limits import ID_PATTERN, MAX_SKILL_TAG_CHARS, MAX_TASK_SKILLS, Text
from agora.core.market import Probability
from agora.core.planning import MAX_PLAN_SUBGOALS, PlanningConfig, SubGoal

__all__ = [
    "DEFAULT_ATTEMPT_TIMEOUT_SECONDS",
    "MAX_PLAN_ID_CHARS",
    "PlanId",
    "PlanRequest",
    "PlanSubmission",
    "SkillHint",
    "submission_of",
]

MAX_PLAN_ID_CHARS = 200
"""Shorter than other ids: a subgoal's market task id is the plan id plus a suffix."""
DEFAULT_ATTEMPT_TIMEOUT_SECONDS = 900

PlanId = Annotated[str, Field(min_length=1, max_length=MAX_PLAN_ID_CHARS, pattern=ID_PATTERN)]
SkillHint = Annotated[str, Field(min_length=1, max_length=MAX_SKILL_TAG_CHARS)]


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


def submission_of(request: PlanRequest) -> PlanSubmission:
    """The request without its id: what a plan record keeps, and what a repeat must match."""
    return PlanSubmission.model_validate(request.model_dump(exclude={"plan_id"}))
