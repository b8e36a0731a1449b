"""Pub/sub contracts: topic names and the payload each topic carries."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agora.core.escalation import AbortSummary, AnyResponse, EscalationStatus, WaitingParty
from agora.core.market import AllocationResult, Bid, BidScore, TaskSpec
from agora.core.models import CapabilityProfile


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
    TASK_OUTCOME = "agora.task.outcome"
    """A worker finished a task (`TaskOutcome`); board and reputation learn from it."""
    ESCALATION_RESOLVED = "agora.escalation.resolved"
    """A parked escalation got its decision (`EscalationResolved`); the waiting party continues."""
    ESCALATION_OUTCOME = "agora.escalation.outcome"
    """How the waiting party fared after the decision (`EscalationOutcome`); learnt from."""


class ActorType(StrEnum):
    """Dapr actor types, as services call them (each is its actor class's name)."""

    TASK = "Task"
    REPUTATION = "Reputation"
    WORKER_AGENT = "WorkerAgent"
    ESCALATION = "Escalation"
    SESSION_UNCERTAINTY = "SessionUncertainty"


class RegisterAgent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["register"] = "register"
    profile: CapabilityProfile


class DeregisterAgent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["deregister"] = "deregister"
    agent_id: str = Field(min_length=1)


RegistryCommand = Annotated[RegisterAgent | DeregisterAgent, Field(discriminator="kind")]
registry_command_adapter: TypeAdapter[RegisterAgent | DeregisterAgent] = TypeAdapter(RegistryCommand)


class RegistryChange(StrEnum):
    REGISTERED = "registered"
    DEREGISTERED = "deregistered"


class RegistryChanged(BaseModel):
    """A notification, not a copy: replicas re-read the profile from the state store,
    so out-of-order or repeated notifications converge on the stored truth."""

    agent_id: str
    change: RegistryChange


class DeadLetter(BaseModel):
    """Why a message was refused, with the message itself, so nothing is lost."""

    topic: str
    message_id: str | None
    subscriber: str
    reason: str
    errors: list[dict[str, Any]] = Field(default_factory=list)
    payload: Any = None
    refused_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class TaskAwarded(BaseModel):
    task_id: str
    agent_id: str
    spec: TaskSpec
    bid: Bid
    score: BidScore


class TaskRejected(BaseModel):
    task_id: str
    reason: str
    result: AllocationResult


class EscalationResolved(BaseModel):
    escalation_id: str
    waiting_party: WaitingParty
    decision: AnyResponse
    decided_by: str
    status: EscalationStatus
    """RESOLVED by a person, or EXPIRED when the deadline applied the default decision."""
    abort_summary: AbortSummary | None = None


class EscalationOutcome(BaseModel):
    escalation_id: str
    succeeded: bool
    """Whether the waiting party got on after the decision (its next step was confident)."""
