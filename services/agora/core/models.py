"""Domain models shared by every service: the one place these schemas are defined."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agora.core.capacity import DEFAULT_MAX_CONCURRENT_RUNS, MAX_CONCURRENT_RUNS
from agora.core.limits import (
    MAX_CANDIDATES,
    MAX_SKILL_TAGS,
    MAX_TASK_SKILLS,
    Identifier,
    Name,
    SkillTag,
    clean_skill_tags,
)


class ModelTier(StrEnum):
    """How capable (and how costly) a model is: an agent's profile says which it runs on, a
    router picks a model of the tier a step needs."""

    FAST = "fast"
    """Simple classification and routing."""
    BALANCED = "balanced"
    """Standard agent tasks."""
    POWERFUL = "powerful"
    """Complex reasoning and synthesis."""


class CapabilityProfile(BaseModel):
    """What a worker agent can do and what it costs; the unit the registry filters on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_id: Identifier
    agent_name: Name
    skill_tags: list[SkillTag] = Field(min_length=1, max_length=MAX_SKILL_TAGS)
    model_tier: ModelTier = ModelTier.BALANCED
    cost_per_step_usd: float = Field(default=0.0, ge=0.0)
    max_steps: int = Field(default=20, ge=1)
    latency_sla_ms: int | None = Field(default=None, gt=0)
    bid_app_id: Identifier | None = Field(
        default=None,
        description="The Dapr app that answers this agent's bid solicitations (`POST /v1/bids`, an "
        "agent app); none: the market estimates the agent's bid itself.",
    )
    max_concurrent_runs: int = Field(
        default=DEFAULT_MAX_CONCURRENT_RUNS,
        ge=1,
        le=MAX_CONCURRENT_RUNS,
        description="Runs the agent takes at once: the market never awards it more (a task whose "
        "capable agents are all full waits, QUEUED, for a slot).",
    )

    @field_validator("skill_tags")
    @classmethod
    def _skills_are_clean(cls, tags: list[str]) -> list[str]:
        return clean_skill_tags(tags)


class CapabilityQuery(BaseModel):
    """A `filter_capable` request: every required skill must match; preferred skills rank."""

    model_config = ConfigDict(extra="forbid")

    required_skills: list[SkillTag] = Field(min_length=1, max_length=MAX_TASK_SKILLS)
    preferred_skills: list[SkillTag] = Field(default_factory=list, max_length=MAX_TASK_SKILLS)
    limit: int | None = Field(default=None, ge=1, le=MAX_CANDIDATES)

    @field_validator("required_skills", "preferred_skills")
    @classmethod
    def _skills_are_clean(cls, tags: list[str]) -> list[str]:
        return clean_skill_tags(tags)
