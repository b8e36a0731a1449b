"""Every topic and the one payload type its messages carry (`Channel`): services publish and
subscribe through these, so a payload of the wrong type, or a handler that expects another,
fails mypy rather than a delivery.

    await publisher.publish(topics.TASK_OUTCOME, outcome)
    ctx.subscriptions.subscribe(topics.TASK_AWARDED, on_award)   # on_award(award: TaskAwarded)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter

from agora.core.capacity import RunFreed
from agora.core.contracts import OutcomeReport
from agora.core.debate.record import DebateCompleted
from agora.core.debate.request import DebateRequest
from agora.core.market import TaskOutcome, TaskSpec
from agora.core.messages import (
    AwardLapsed,
    CostEvent,
    DeadLetter,
    DeregisterAgent,
    EscalationOutcome,
    EscalationResolved,
    RegisterAgent,
    RegistryChanged,
    TaskAwarded,
    TaskCancelled,
    TaskRejected,
    Topic,
    registry_command_adapter,
)
from agora.core.plans.record import PlanCompleted
from agora.core.plans.request import PlanRequest

__all__ = [
    "AGENT_RUN_FREED",
    "COST_EVENTS",
    "DEAD_LETTER",
    "DEBATES",
    "DEBATE_COMPLETED",
    "ESCALATION_OUTCOME",
    "ESCALATION_RESOLVED",
    "EVERY_CHANNEL",
    "PLANS",
    "PLAN_COMPLETED",
    "REGISTRY_CHANGED",
    "REGISTRY_COMMANDS",
    "TASKS",
    "TASK_AWARDED",
    "TASK_AWARD_LAPSED",
    "TASK_CANCELLED",
    "TASK_OUTCOME",
    "TASK_OUTCOME_RECORDED",
    "TASK_REJECTED",
    "Channel",
    "channel",
]

P = TypeVar("P", bound=BaseModel)


@dataclass(frozen=True)
class Channel(Generic[P]):
    """A topic and the type of its payload (a union, for a topic of several kinds of message)."""

    topic: str
    """The topic's name (a `Topic` for Agora's own)."""
    adapter: TypeAdapter[P]

    @property
    def name(self) -> str:
        return str(self.topic)


def channel(topic: str, payload: type[P]) -> Channel[P]:
    return Channel(topic, TypeAdapter(payload))


REGISTRY_COMMANDS: Channel[RegisterAgent | DeregisterAgent] = Channel(
    Topic.REGISTRY_COMMANDS, registry_command_adapter
)
REGISTRY_CHANGED = channel(Topic.REGISTRY_CHANGED, RegistryChanged)
DEAD_LETTER = channel(Topic.DEAD_LETTER, DeadLetter)
TASKS = channel(Topic.TASKS, TaskSpec)
TASK_AWARDED = channel(Topic.TASK_AWARDED, TaskAwarded)
TASK_REJECTED = channel(Topic.TASK_REJECTED, TaskRejected)
TASK_AWARD_LAPSED = channel(Topic.TASK_AWARD_LAPSED, AwardLapsed)
TASK_CANCELLED = channel(Topic.TASK_CANCELLED, TaskCancelled)
AGENT_RUN_FREED = channel(Topic.AGENT_RUN_FREED, RunFreed)
TASK_OUTCOME = channel(Topic.TASK_OUTCOME, TaskOutcome)
TASK_OUTCOME_RECORDED = channel(Topic.TASK_OUTCOME_RECORDED, OutcomeReport)
ESCALATION_RESOLVED = channel(Topic.ESCALATION_RESOLVED, EscalationResolved)
ESCALATION_OUTCOME = channel(Topic.ESCALATION_OUTCOME, EscalationOutcome)
PLANS = channel(Topic.PLANS, PlanRequest)
PLAN_COMPLETED = channel(Topic.PLAN_COMPLETED, PlanCompleted)
DEBATES = channel(Topic.DEBATES, DebateRequest)
DEBATE_COMPLETED = channel(Topic.DEBATE_COMPLETED, DebateCompleted)
COST_EVENTS = channel(Topic.COST_EVENTS, CostEvent)

EVERY_CHANNEL: tuple[Channel[Any], ...] = (
    REGISTRY_COMMANDS,
    REGISTRY_CHANGED,
    DEAD_LETTER,
    TASKS,
    TASK_AWARDED,
    TASK_REJECTED,
    TASK_AWARD_LAPSED,
    TASK_CANCELLED,
    AGENT_RUN_FREED,
    TASK_OUTCOME,
    TASK_OUTCOME_RECORDED,
    ESCALATION_RESOLVED,
    ESCALATION_OUTCOME,
    PLANS,
    PLAN_COMPLETED,
    DEBATES,
    DEBATE_COMPLETED,
    COST_EVENTS,
)
"""One channel per topic (a unit test holds it to `Topic`)."""
