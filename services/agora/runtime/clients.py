"""Typed clients for calls between services: one method per HTTP route or actor method, taking
and returning the contract models (`agora.core.contracts`, the domain records), so no caller
builds a dict or reads an answer by key, and no caller names an actor method by string."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from agora.core.contracts import (
    Decision,
    FilterAnswer,
    OutcomeReport,
    RegisteredAgent,
    SessionState,
    StepReport,
    StepVerdict,
    TaskList,
)
from agora.core.escalation import EscalationRecord, ParkRequest
from agora.core.market import AllocationResult, AllocationStatus, ReputationRecord, TaskOutcome, TaskSpec
from agora.core.messages import DEFAULT_LEASE_SECONDS, ActorType, AwardAcknowledgement
from agora.core.models import CapabilityProfile, CapabilityQuery
from agora.core.task_lifecycle import TaskRecord
from agora.runtime.actor import ActorClient
from agora.runtime.sidecar import DaprSidecar

M = TypeVar("M", bound=BaseModel)


async def _as(model: type[M], answer: Awaitable[Any]) -> M:
    return model.model_validate(await answer)


class RegistryClient:
    """The registry's HTTP API, through service invocation."""

    def __init__(self, sidecar: DaprSidecar, app_id: str) -> None:
        self._sidecar = sidecar
        self._app_id = app_id

    async def filter(self, query: CapabilityQuery) -> FilterAnswer:
        body = query.model_dump(mode="json", exclude_none=True)
        return await _as(FilterAnswer, self._sidecar.invoke(self._app_id, "v1/agents/filter", json_body=body))

    async def register(
        self, profile: CapabilityProfile, lease_seconds: int = DEFAULT_LEASE_SECONDS
    ) -> RegisteredAgent:
        """Register (or renew) for `lease_seconds`: register again before it runs out."""
        path = f"v1/agents?lease_seconds={lease_seconds}"
        body = profile.model_dump(mode="json")
        return await _as(RegisteredAgent, self._sidecar.invoke(self._app_id, path, json_body=body))


class TaskBoardClient:
    """The task board's HTTP API, through service invocation."""

    def __init__(self, sidecar: DaprSidecar, app_id: str) -> None:
        self._sidecar = sidecar
        self._app_id = app_id

    async def listed(self, status: AllocationStatus) -> TaskList:
        path = f"v1/tasks?status={status}"
        return await _as(TaskList, self._sidecar.invoke(self._app_id, path, http_method="GET"))


class UncertaintyClient:
    """The uncertainty monitor's HTTP API, through service invocation."""

    def __init__(self, sidecar: DaprSidecar, app_id: str) -> None:
        self._sidecar = sidecar
        self._app_id = app_id

    async def llm_response(self, session_id: str, report: StepReport) -> StepVerdict:
        path = f"v1/sessions/{session_id}/llm-responses"
        body = report.model_dump(mode="json")
        return await _as(StepVerdict, self._sidecar.invoke(self._app_id, path, json_body=body))

    async def session(self, session_id: str) -> SessionState:
        path = f"v1/sessions/{session_id}"
        return await _as(SessionState, self._sidecar.invoke(self._app_id, path, http_method="GET"))


class TaskActors:
    """`Task` actors (the task board), one per task id."""

    def __init__(self, actors: ActorClient) -> None:
        self._call: Callable[..., Awaitable[Any]] = actors.call

    async def post(self, spec: TaskSpec) -> TaskRecord:
        return await _as(TaskRecord, self._call(ActorType.TASK, spec.task_id, "post_task", spec))

    async def get(self, task_id: str) -> TaskRecord:
        return await _as(TaskRecord, self._call(ActorType.TASK, task_id, "get_task"))

    async def record_allocation(self, result: AllocationResult) -> TaskRecord:
        return await _as(TaskRecord, self._call(ActorType.TASK, result.task_id, "record_allocation", result))

    async def announce(self, task_id: str) -> TaskRecord:
        return await _as(TaskRecord, self._call(ActorType.TASK, task_id, "announce"))

    async def acknowledge_award(self, task_id: str, acknowledgement: AwardAcknowledgement) -> TaskRecord:
        return await _as(
            TaskRecord, self._call(ActorType.TASK, task_id, "acknowledge_award", acknowledgement)
        )

    async def mark_outcome(self, outcome: TaskOutcome) -> TaskRecord:
        return await _as(TaskRecord, self._call(ActorType.TASK, outcome.task_id, "mark_outcome", outcome))


class ReputationActors:
    """`Reputation` actors, one per agent id."""

    def __init__(self, actors: ActorClient) -> None:
        self._call: Callable[..., Awaitable[Any]] = actors.call

    async def get_record(self, agent_id: str) -> ReputationRecord:
        return await _as(ReputationRecord, self._call(ActorType.REPUTATION, agent_id, "get_record"))

    async def apply_outcome(self, report: OutcomeReport) -> ReputationRecord:
        agent_id = report.outcome.agent_id
        return await _as(
            ReputationRecord, self._call(ActorType.REPUTATION, agent_id, "apply_outcome", report)
        )


class EscalationActors:
    """`Escalation` actors, one per escalation id."""

    def __init__(self, actors: ActorClient) -> None:
        self._call: Callable[..., Awaitable[Any]] = actors.call

    async def park(self, escalation_id: str, request: ParkRequest) -> EscalationRecord:
        return await _as(EscalationRecord, self._call(ActorType.ESCALATION, escalation_id, "park", request))

    async def get(self, escalation_id: str) -> EscalationRecord:
        return await _as(EscalationRecord, self._call(ActorType.ESCALATION, escalation_id, "get"))

    async def resolve(self, escalation_id: str, decision: Decision) -> EscalationRecord:
        return await _as(
            EscalationRecord, self._call(ActorType.ESCALATION, escalation_id, "resolve", decision)
        )
