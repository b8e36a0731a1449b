"""Pub/sub contracts: topic names and the payload each topic carries."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter

from agora.core.acceptance import DisputeVerdict
from agora.core.escalation.decisions import AnyResponse
from agora.core.escalation.record import (
    SYSTEM_ACTOR,
    AbortSummary,
    EscalationRecord,
    EscalationStatus,
    WaitingParty,
)
from agora.core.limits import MAX_ID_CHARS, MAX_ITEMS, Identifier, Name, Note, Text
from agora.core.market import AllocationResult, AwardToken, Bid, BidScore, TaskSpec
from agora.core.models import CapabilityProfile
from agora.core.task_lifecycle import DEFAULT_ACK_SECONDS, MAX_ACK_SECONDS, TaskRecord


class Topic(StrEnum):
    REGISTRY_COMMANDS = "agora.registry"
    """Register / deregister commands for the registry (any publisher)."""
    REGISTRY_CHANGED = "agora.registry.changed"
    """Published by a registry replica after it saved a change; every replica applies it."""
    DEAD_LETTER = "agora.deadletter"
    """Messages a subscriber could not accept, each with the reason."""
    TASKS = "agora.tasks"
    """Task intake: a `TaskSpec` to allocate (any publisher)."""
    TASK_AWARDED = "agora.task.awarded"
    """The allocator awarded a task (`TaskAwarded`); the winning agent's worker executes it."""
    TASK_REJECTED = "agora.task.rejected"
    """The allocator rejected a task (`TaskRejected`), with the reason."""
    TASK_AWARD_LAPSED = "agora.task.award_lapsed"
    """An award's acknowledgment window closed unacknowledged (`AwardLapsed`); the registry
    suspends the agent from bidding for a while."""
    TASK_CANCELLED = "agora.task.cancelled"
    """A person cancelled a task an agent held (`TaskCancelled`); the agent's runtime stops
    its run."""
    AGENT_RUN_FREED = "agora.agent.run_freed"
    """The task board freed a run slot of an agent that has tasks waiting for one (`RunFreed`);
    published and taken only by the board, which then tries the oldest waiters again."""
    TASK_OUTCOME = "agora.task.outcome"
    """An agent's runtime reports a finished task (`TaskOutcome`) it has not recorded on the
    board itself; the allocator records it there."""
    TASK_OUTCOME_RECORDED = "agora.task.outcome.recorded"
    """The task board recorded a task's outcome (`OutcomeReport`: the outcome, whether it
    counts as a success, the winning bid); published only by the board, in the turn that
    records it, so the reputation and whoever waits for the task learn it from the source."""
    ESCALATION_RESOLVED = "agora.escalation.resolved"
    """A parked escalation got its decision (`EscalationResolved`); the waiting party continues."""
    ESCALATION_OUTCOME = "agora.escalation.outcome"
    """How the waiting party fared after the decision (`EscalationOutcome`); learnt from."""
    PLANS = "agora.plans"
    """Plan intake: a `PlanRequest` to plan and carry out (any publisher)."""
    PLAN_COMPLETED = "agora.plan.completed"
    """A plan ended (`PlanCompleted`): COMPLETED, FAILED or ABORTED, with its result."""
    DEBATES = "agora.debates"
    """Debate intake: a `DebateRequest` (any publisher)."""
    DEBATE_COMPLETED = "agora.debate.completed"
    """A debate ended (`DebateCompleted`): its answer, whether a person gave it, the result."""
    COST_EVENTS = "agora.cost.events"
    """An agent spent on a model call (`CostEvent`), published before its budget is checked
    (any agent app publishes)."""


class ActorType(StrEnum):
    """Dapr actor types, as services call them (each is its actor class's name)."""

    TASK = "Task"
    AGENT_RUNS = "AgentRuns"
    REPUTATION = "Reputation"
    ESCALATION = "Escalation"
    SESSION_UNCERTAINTY = "SessionUncertainty"


MIN_LEASE_SECONDS = 5
MAX_LEASE_SECONDS = 24 * 3600
DEFAULT_LEASE_SECONDS = 120
"""The lease of a registration that names none: every registration lapses unless renewed."""


class RegisterAgent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["register"] = "register"
    profile: CapabilityProfile
    lease_seconds: int = Field(default=DEFAULT_LEASE_SECONDS, ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)
    """How long the registration lives unless renewed (registered again). An agent's runtime
    renews it while it runs, so an agent that is gone stops being offered tasks once its lease
    runs out; nothing is registered for ever."""


class DeregisterAgent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["deregister"] = "deregister"
    agent_id: Identifier


RegistryCommand = Annotated[RegisterAgent | DeregisterAgent, Field(discriminator="kind")]
registry_command_adapter: TypeAdapter[RegisterAgent | DeregisterAgent] = TypeAdapter(RegistryCommand)


class RegistryChange(StrEnum):
    REGISTERED = "registered"
    DEREGISTERED = "deregistered"
    SUSPENDED = "suspended"


class RegistryChanged(BaseModel):
    """A notification, not a copy: replicas re-read the profile from the state store,
    so out-of-order or repeated notifications converge on the stored truth."""

    agent_id: Identifier
    change: RegistryChange


class DeadLetter(BaseModel):
    """Why a message was refused, with the message itself, so nothing is lost."""

    topic: Name
    message_id: Note | None = Field(
        description="The refused message's id (any publisher's: one over 2,048 characters is kept cut)."
    )
    subscriber: Name
    reason: Text
    errors: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_ITEMS)
    payload: Any = None
    refused_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class TaskAwarded(BaseModel):
    """A task awarded to the agent whose bid scored best, with that bid, its score and the
    award's token."""

    task_id: Identifier
    agent_id: Identifier
    spec: TaskSpec
    bid: Bid
    score: BidScore
    award_token: AwardToken
    """A secret for this award: the winner's runtime presents it to acknowledge the award and
    with the outcome, so nobody who did not receive the award can act on its behalf."""
    acknowledge_within_ms: int = Field(
        default=int(DEFAULT_ACK_SECONDS * 1000), gt=0, le=int(MAX_ACK_SECONDS * 1000)
    )
    """How long the winner's runtime has, from the award, to acknowledge it or to report the
    outcome (which acknowledges it too); after that the task passes to the next-best bid."""
    attempt: int = Field(default=1, ge=1, le=MAX_ITEMS)
    """Which award of the task this is (1 for the first; the next-best bid's is 2, ...)."""
    awarded_at: AwareDatetime | None = None
    """When the board made this award (an award announced again keeps its time): a runtime
    runs an award this young at once, and checks an older one with the board first."""


class AwardAcknowledgement(BaseModel):
    """The winning agent's runtime holds the award (`Task` actor `acknowledge_award`), or
    asks whether it does before running it (`verify_award`, which changes nothing)."""

    agent_id: Identifier
    award_token: AwardToken


class ProgressNote(BaseModel):
    """What the agent running a task says of its progress (`Task` actor `note_progress`): kept in
    the task's history by the award's holder, once its run has taken the award up."""

    model_config = ConfigDict(extra="forbid")

    agent_id: Identifier
    award_token: AwardToken
    text: Note = Field(min_length=1)


class TaskDecision(BaseModel):
    """A task with its market decision, posted and decided in one call (`Task` actor
    `decide`): the allocator's path for a task it decided as it took it in."""

    model_config = ConfigDict(extra="forbid")

    spec: TaskSpec
    allocation: AllocationResult


AWARD_WATCH_ENTRY_PATTERN = r"^[0-9]{13}\|[^\s|\x00-\x1f\x7f]+$"


class AwardWindowDue(BaseModel):
    """The task board's watch found an award's acknowledgment window over (`Task` actor
    `award_window_due`): `watch_entry` is the award as the watch lists it, `<due epoch ms>|<task
    id>`. The actor acts on it only when it names the task's current unacknowledged award."""

    model_config = ConfigDict(extra="forbid")

    watch_entry: str = Field(max_length=14 + MAX_ID_CHARS, pattern=AWARD_WATCH_ENTRY_PATTERN)


class HandOver(BaseModel):
    """The agent running a task gives it up for another bidder, as a person decided on its
    paused run (`Task` actor `hand_over`): its award token proves it holds the task."""

    model_config = ConfigDict(extra="forbid")

    agent_id: Identifier
    award_token: AwardToken
    to_agent: Identifier | None = Field(
        default=None, description="The bidder to hand it to; none: the next-best bid not tried yet."
    )
    escalation_id: Identifier
    decided_by: Name


class TaskCancel(BaseModel):
    """A person cancels a task (`Task` actor `cancel`; `POST /v1/tasks/{id}/cancel`)."""

    model_config = ConfigDict(extra="forbid")

    cancelled_by: Name
    reason: Note = ""


class TaskDispute(BaseModel):
    """A person disputes a finished task's outcome (`Task` actor `dispute`;
    `POST /v1/tasks/{id}/dispute`): what the outcome was, by their word, and why."""

    model_config = ConfigDict(extra="forbid")

    disputed_by: Name
    reason: Note = Field(min_length=1)
    verdict: DisputeVerdict


class AwardLapsed(BaseModel):
    """The `Task` actor's notice that an award's acknowledgment window closed with the award
    unacknowledged (event id `lapsed:<task_id>.<attempt>`). The registry suspends the agent
    only after the task's own record bears the lapse out (`disagreement_with`)."""

    model_config = ConfigDict(extra="forbid")

    task_id: Identifier
    agent_id: Identifier
    attempt: int = Field(ge=1)
    """Which of the task's awards lapsed (1: the first; `TaskRecord.awards`)."""
    awarded_at: datetime
    lapsed_at: datetime

    @property
    def message_id(self) -> str:
        return f"lapsed:{self.task_id}.{self.attempt}"

    def disagreement_with(self, record: TaskRecord) -> str | None:
        """Why the task's record does not bear this lapse out (None when it does): that award
        attempt must be this agent's, never acknowledged, and expired at the stated time."""
        if record.task_id != self.task_id:
            return f"the record is of task {record.task_id}, not {self.task_id}"
        if self.attempt > len(record.awards):
            return f"task {self.task_id} has no award attempt {self.attempt}"
        award = record.awards[self.attempt - 1]
        if award.agent_id != self.agent_id:
            holder = award.agent_id
            return f"award {self.attempt} of task {self.task_id} went to {holder}, not {self.agent_id}"
        if award.acknowledged_at is not None:
            return f"{self.agent_id} acknowledged its award of task {self.task_id}"
        if award.expired_at is None:
            return f"the award of task {self.task_id} to {self.agent_id} has not lapsed"
        if (award.awarded_at, award.expired_at) != (self.awarded_at, self.lapsed_at):
            return f"the award of task {self.task_id} to {self.agent_id} was made or lapsed at another time"
        return None

    @classmethod
    def of(cls, record: TaskRecord, attempt: int) -> AwardLapsed:
        """The notice of the `attempt`-th award of `record`, which lapsed."""
        lapsed = record.awards[attempt - 1]
        if lapsed.expired_at is None:
            raise ValueError(f"award {attempt} of task {record.task_id} has not lapsed")
        return cls(
            task_id=record.task_id,
            agent_id=lapsed.agent_id,
            attempt=attempt,
            awarded_at=lapsed.awarded_at,
            lapsed_at=lapsed.expired_at,
        )


class TaskCancelled(BaseModel):
    """The `Task` actor's notice that a person cancelled a task an agent held (event id
    `cancelled:<task_id>`): the agent's runtime stops the run of that award, once the task's
    own record bears the cancel out (`disagreement_with`)."""

    model_config = ConfigDict(extra="forbid")

    task_id: Identifier
    agent_id: Identifier
    attempt: int = Field(ge=1)
    """Which of the task's awards was being run (1: the first; `TaskRecord.awards`)."""
    cancelled_by: Name
    reason: Note = ""

    @property
    def message_id(self) -> str:
        return f"cancelled:{self.task_id}"

    def disagreement_with(self, record: TaskRecord) -> str | None:
        """Why the task's record does not bear this cancel out (None when it does): the task
        was cancelled by that person while that award was the agent's."""
        cancellation = record.cancellation
        if record.task_id != self.task_id:
            return f"the record is of task {record.task_id}, not {self.task_id}"
        if cancellation is None or cancellation.by != self.cancelled_by:
            return f"task {self.task_id} was not cancelled by {self.cancelled_by}"
        if len(record.awards) != self.attempt or record.awards[-1].agent_id != self.agent_id:
            return f"task {self.task_id}'s award {self.attempt} was not {self.agent_id}'s at its cancel"
        return None

    @classmethod
    def of(cls, record: TaskRecord) -> TaskCancelled:
        """The notice of `record`'s cancel, which ended the run of its last award."""
        if record.cancellation is None or not record.awards:
            raise ValueError(f"task {record.task_id} was not cancelled while an agent held it")
        return cls(
            task_id=record.task_id,
            agent_id=record.awards[-1].agent_id,
            attempt=len(record.awards),
            cancelled_by=record.cancellation.by,
            reason=record.cancellation.reason,
        )


class TaskRejected(BaseModel):
    """A task no agent got (no capable agent, or no eligible bid), with why and the allocation."""

    task_id: Identifier
    reason: Text
    """Why no agent got the task (the allocation's `reject_reason`)."""
    result: AllocationResult


class EscalationResolved(BaseModel):
    """A decision, as its `Escalation` actor announces it. A waiting party acts on one only
    when it agrees with the escalation's own record (`disagreement_with`): anyone may be able
    to publish on a topic, only the escalation service can decide."""

    escalation_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    waiting_party: WaitingParty
    decision: AnyResponse
    decided_by: Name
    status: EscalationStatus
    """RESOLVED by a person, or EXPIRED when the deadline applied the default decision."""
    abort_summary: AbortSummary | None = None

    @classmethod
    def of(cls, record: EscalationRecord) -> EscalationResolved:
        """The announcement of a decided record."""
        if record.decision is None:
            raise ValueError(f"escalation {record.escalation_id} is not decided")
        return cls(
            escalation_id=record.escalation_id,
            waiting_party=record.waiting_party,
            decision=record.decision,
            decided_by=record.decided_by or SYSTEM_ACTOR,
            status=record.status,
            abort_summary=record.abort_summary,
        )

    def disagreement_with(self, record: EscalationRecord) -> str | None:
        """Why this announcement is not the record's decision (None when it is)."""
        if record.decision is None:
            return f"escalation {record.escalation_id} is {record.status}: it has no decision"
        announced = EscalationResolved.of(record)
        differing = [
            name for name in type(self).model_fields if getattr(self, name) != getattr(announced, name)
        ]
        if differing:
            return f"escalation {record.escalation_id} was not decided so ({', '.join(differing)} differ)"
        return None


class EscalationOutcome(BaseModel):
    """Whether a waiting party got on after a retry or modify decision; the escalation service
    learns from it which decisions work."""

    escalation_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    succeeded: bool
    """Whether the waiting party got on after the decision (its next step was confident)."""


class CostEvent(BaseModel):
    """Topic `agora.cost.events`: one model call's tokens and cost, as an agent's cost tracker
    recorded it, with the totals of its session so far."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: Identifier
    session_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    step_name: Name
    model_id: Name
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cost_usd: float = Field(ge=0.0)
    session_cost_usd: float = Field(ge=0.0, description="The session's total after this call.")
    budget_usd: float | None = Field(default=None, ge=0.0)
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
