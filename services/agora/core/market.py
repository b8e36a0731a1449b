"""Market allocation models: tasks, bids, scores, allocation results, reputation, outcomes.

A task is posted, capable agents bid (each bid states the agent's own success probability and
cost estimate), every bid is scored (`agora.core.scoring`) and the best one is awarded; the
winner's outcome then updates its reputation (`agora.core.reputation`).
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agora.core.acceptance import Acceptance
from agora.core.escalation.checkpoints import CheckpointTrigger
from agora.core.limits import (
    MAX_CANDIDATES,
    MAX_ITEMS,
    MAX_TASK_SKILLS,
    Identifier,
    Name,
    Note,
    SkillTag,
    Text,
    clean_skill_tags,
)

Probability = float
AwardToken = Annotated[str, Field(min_length=16, max_length=64)]
"""The secret of one award (`TaskAwarded.award_token`), presented back by the winner's runtime."""


class AllocationStatus(StrEnum):
    PENDING = "PENDING"
    """Task posted, no bids yet."""
    BIDDING = "BIDDING"
    """Bid solicitation in progress."""
    QUEUED = "QUEUED"
    """Every eligible bidder is running as many tasks as it takes at once: the task waits for a
    run slot (`TaskRecord.queued` says which agents and why) and is awarded when one frees."""
    ALLOCATED = "ALLOCATED"
    """Winner selected."""
    REJECTED = "REJECTED"
    """No capable bidders, or every bid below the threshold."""
    COMPLETED = "COMPLETED"
    """Task finished successfully."""
    FAILED = "FAILED"
    """Task execution failed."""
    PARTIAL = "PARTIAL"
    """Task partly done, and the task allows partial outcomes (counts as success)."""


TERMINAL_STATUSES = frozenset(
    {AllocationStatus.REJECTED, AllocationStatus.COMPLETED, AllocationStatus.FAILED, AllocationStatus.PARTIAL}
)


class TaskSpec(BaseModel):
    """A task to allocate: what to do, the skills it needs, and what its owner accepts (budget,
    success threshold, deadline, partial results)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: Identifier
    description: Text = Field(min_length=1)
    required_skills: list[SkillTag] = Field(min_length=1, max_length=MAX_TASK_SKILLS)
    preferred_skills: list[SkillTag] = Field(default_factory=list, max_length=MAX_TASK_SKILLS)
    budget_usd: float | None = Field(default=None, gt=0.0, description="Hard cost cap; None = unlimited")
    min_success_threshold: Probability = Field(default=0.5, ge=0.0, le=1.0)
    deadline_ms: int | None = Field(default=None, gt=0)
    allow_partial: bool = False
    bid_deadline_ms: int | None = Field(
        default=None,
        gt=0,
        le=60_000,
        description="How long an agent's own app has to answer the bid solicitation (default: the "
        "allocator's, 300 ms); an app that does not answer in time gets the market's estimate.",
    )
    reply_to: Identifier | None = Field(
        default=None,
        description="The Dapr app id that waits for this task's end (a planner, an agent app's "
        "graph): the board's announcements of its end name it (the CloudEvent attribute "
        "`agorareplyto`), so that app's sidecar delivers it those and no other tasks' ends.",
    )
    checkpoints: list[CheckpointTrigger] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="The owner's checkpoint triggers for this task's run: evaluated before each of "
        "its steps with the agent's own and the uncertainty monitor's; one that requires "
        "confirmation holds the step for a person before it runs.",
        # Left out when empty: a task without them reads as it did to apps of an earlier
        # version (which refuse fields they do not know) while a release rolls.
        exclude_if=lambda triggers: not triggers,
    )
    acceptance: Acceptance | None = Field(
        default=None,
        description="How the task's result is checked, on the market's side, and what follows a "
        "failed check (agora.core.acceptance); without one the agent's own word stands.",
        exclude_if=lambda acceptance: acceptance is None,
    )

    @field_validator("required_skills", "preferred_skills")
    @classmethod
    def _skills_are_clean(cls, tags: list[str]) -> list[str]:
        return clean_skill_tags(tags)


class Bid(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    bid_id: Identifier = Field(default_factory=lambda: str(uuid.uuid4()))
    task_id: Identifier
    agent_id: Identifier
    self_reported_success_prob: Probability = Field(ge=0.0, le=1.0)
    estimated_cost_usd: float = Field(ge=0.0)
    estimated_steps: int = Field(ge=0)
    rationale: Note = ""
    fallback: bool = Field(
        default=False,
        description="True when the agent's own answer timed out, failed or did not parse, and "
        "this bid was made for it (from its capability profile, or the market's model estimate).",
    )
    fallback_reason: Note | None = Field(default=None, description="Why the fallback bid was used.")


class BidScore(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    bid_id: Identifier = Field(description="Id of the bid this score is for.")
    agent_id: Identifier = Field(description="Id of the agent that made the bid.")
    raw_success_prob: Probability
    calibrated_success_prob: Probability
    reputation_score: float
    cost_score: float
    composite: float
    ucb_bonus: float
    final_score: float


class ModelBill(BaseModel):
    """The model calls the market made to decide one task: its own estimates of the candidates
    that did not bid for themselves (an agent's own bid costs the market nothing)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_calls: int = Field(default=0, ge=0)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    model_seconds: float = Field(default=0.0, ge=0.0, description="Wall time of the calls, summed.")


class AllocationResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: Identifier
    status: AllocationStatus
    winning_agent_id: Identifier | None = None
    winning_bid: Bid | None = None
    winning_score: BidScore | None = None
    all_scores: list[BidScore] = Field(default_factory=list, max_length=MAX_CANDIDATES)
    all_bids: list[Bid] = Field(
        default_factory=list,
        max_length=MAX_CANDIDATES,
        description="Every bid received, the losing ones too.",
    )
    capability_filtered_out: list[Identifier] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Registered agents the capability filter did not keep (at most 100 of them are named).",
    )
    reject_reason: Text | None = None
    run_limits: dict[Identifier, int] = Field(
        default_factory=dict,
        exclude_if=lambda limits: not limits,
        max_length=MAX_CANDIDATES,
        description="Each bidder's `max_concurrent_runs` as its profile declared it when the task "
        "was allocated: an award never gives an agent a run past it.",
    )
    # Left out of JSON when unset: apps of an earlier version read the result while a release rolls.
    model_bill: ModelBill | None = Field(
        default=None,
        exclude_if=lambda bill: bill is None,
        description="The model calls, tokens and seconds the market spent on this decision.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> AllocationResult:
        unnamed_winner = self.winning_agent_id is None or self.winning_bid is None
        if self.status is AllocationStatus.ALLOCATED and unnamed_winner:
            raise ValueError("an ALLOCATED result names its winner and winning bid")
        if self.status is AllocationStatus.REJECTED and not self.reject_reason:
            raise ValueError("a REJECTED result says why (reject_reason)")
        return self


class ReputationRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: str = Field(default="", description="Id of the agent this record belongs to.")
    total_tasks: int = Field(default=0, ge=0)
    successful_tasks: int = Field(default=0, ge=0)
    success_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    cost_accuracy: float = Field(default=1.0, ge=0.0)
    calibration_factor: float = Field(default=1.0, ge=0.0)
    ucb_confidence: float = Field(default=1.0, ge=0.0)
    pending_self_reports: dict[str, Probability] = Field(
        default_factory=dict,
        description="The agent's self-reported success probability per task id it bid on, kept until "
        "that task's outcome arrives and calibrates it.",
    )
    evidence: float = Field(
        default=0.0,
        ge=0.0,
        description="The outcomes as evidence: each counted with its weight (a checked one 1, a "
        "success claim its check contradicted `OVERCLAIM_WEIGHT`, an unchecked one the "
        "reputation's unchecked weight); `success_rate` is `evidence_of_success / evidence`.",
    )
    evidence_of_success: float = Field(default=0.0, ge=0.0)
    overclaims: int = Field(default=0, ge=0, description="Success claims a check contradicted.")

    @model_validator(mode="before")
    @classmethod
    def _evidence_of_an_earlier_record(cls, data: object) -> object:
        # A record kept before outcomes were weighed: each of its outcomes counted once.
        if isinstance(data, dict) and "evidence" not in data and data.get("total_tasks"):
            data = {
                **data,
                "evidence": data["total_tasks"],
                "evidence_of_success": data.get("successful_tasks", 0),
            }
        return data

    @model_validator(mode="after")
    def _counts_agree(self) -> ReputationRecord:
        if self.successful_tasks > self.total_tasks:
            raise ValueError("successful_tasks cannot exceed total_tasks")
        if self.evidence_of_success > self.evidence + 1e-9:
            raise ValueError("evidence_of_success cannot exceed evidence")
        return self


class TaskOutcome(BaseModel):
    """How an awarded task went, as the winning agent's runtime reports it: success, cost, steps
    and a summary, with the award's token."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: Identifier
    agent_id: Identifier
    actual_success: bool
    actual_cost_usd: float = Field(ge=0.0)
    actual_steps: int = Field(ge=0)
    partial: bool = Field(default=False, description="The agent finished part of the task.")
    summary: Text = Field(default="", description="What the agent produced, briefly.")
    input_tokens: int = Field(default=0, ge=0, description="Model input tokens the run used.")
    output_tokens: int = Field(default=0, ge=0, description="Model output tokens the run used.")
    tools_called: list[Name] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="The tools the run called, in order (at most 100).",
    )
    award_token: AwardToken | None = Field(
        default=None,
        description="The award's token (from `TaskAwarded`); the task board accepts an "
        "outcome only with the token of the award it belongs to.",
    )
