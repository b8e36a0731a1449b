"""Typed clients for calls between services: one method per HTTP route, taking and returning
the contract models (`agora.core.contracts`, the domain records), so no caller builds a dict or
reads an answer by key; and the actor families other services call, whose proxies are typed as
the actors' interfaces (`agora.runtime.interfaces`), so no caller names an actor method by
string."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from pydantic import BaseModel

from agora.core.contracts import (
    AgentList,
    CheckpointAnswer,
    CheckpointRequest,
    DeadlineExtension,
    EscalationList,
    FilterAnswer,
    RegisteredAgent,
    ResumeRequest,
    SessionState,
    StepReport,
    StepVerdict,
    TaskList,
    TaskPublished,
)
from agora.core.debate.record import DebateAccepted, DebateList, DebateRecord
from agora.core.debate.request import DebateSubmission
from agora.core.escalation.listing import ListingFilter
from agora.core.escalation.record import EscalationRecord, EscalationStatus
from agora.core.market import AllocationStatus, ReputationRecord, TaskSpec
from agora.core.messages import DEFAULT_LEASE_SECONDS, TaskCancel, TaskDispute
from agora.core.models import CapabilityProfile, CapabilityQuery
from agora.core.plans.record import PlanAccepted, PlanList, PlanRecord
from agora.core.plans.request import PlanSubmission
from agora.core.task_lifecycle import TaskRecord
from agora.runtime.actor_client import ActorClient, Actors
from agora.runtime.interfaces import (
    AgentRunsInterface,
    EscalationInterface,
    ReputationInterface,
    TaskInterface,
)
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

    async def agents(self) -> AgentList:
        return await _as(AgentList, self._sidecar.invoke(self._app_id, "v1/agents", http_method="GET"))

    async def agent(self, agent_id: str) -> RegisteredAgent:
        path = f"v1/agents/{agent_id}"
        return await _as(RegisteredAgent, self._sidecar.invoke(self._app_id, path, http_method="GET"))

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

    async def get(self, task_id: str) -> TaskRecord:
        path = f"v1/tasks/{quote(task_id, safe='')}"
        return await _as(TaskRecord, self._sidecar.invoke(self._app_id, path, http_method="GET"))

    def events(self, task_id: str, last_event_id: str | None = None) -> AsyncIterator[bytes]:
        """The task's live event stream (Server-Sent Events, as the board sends them), after
        `last_event_id`."""
        path = f"/v1.0/invoke/{self._app_id}/method/v1/tasks/{quote(task_id, safe='')}/events"
        # No `accept: text/event-stream`: with it, daprd 1.18 fails a call to another app's
        # sidecar whose answer is not an event stream (the board's 404 for an unknown task
        # became "500 ERR_DIRECT_INVOKE ... no response received from stream").
        headers = {"last-event-id": last_event_id} if last_event_id is not None else {}
        return self._sidecar.stream(path, headers=headers)

    async def cancel(self, task_id: str, cancel: TaskCancel) -> TaskRecord:
        """A person cancels the task: the task as it stands after the cancel."""
        path = f"v1/tasks/{quote(task_id, safe='')}/cancel"
        answer = self._sidecar.invoke(self._app_id, path, json_body=cancel.model_dump(mode="json"))
        return await _as(TaskRecord, answer)

    async def dispute(self, task_id: str, dispute: TaskDispute) -> TaskRecord:
        """A person (through the console) or the app the task answers to disputes the task's
        finished outcome: the task as it stands after."""
        path = f"v1/tasks/{quote(task_id, safe='')}/dispute"
        answer = self._sidecar.invoke(self._app_id, path, json_body=dispute.model_dump(mode="json"))
        return await _as(TaskRecord, answer)

    async def publish(self, spec: TaskSpec) -> TaskPublished:
        """Put a task on the market's topic through the board (for a caller whose own sidecar's
        broker the market does not share)."""
        answer = self._sidecar.invoke(self._app_id, "v1/tasks", json_body=spec.model_dump(mode="json"))
        return await _as(TaskPublished, answer)


class ReputationClient:
    """The reputation service's HTTP API, through service invocation."""

    def __init__(self, sidecar: DaprSidecar, app_id: str) -> None:
        self._sidecar = sidecar
        self._app_id = app_id

    async def get(self, agent_id: str) -> ReputationRecord:
        path = f"v1/reputation/{quote(agent_id, safe='')}"
        return await _as(ReputationRecord, self._sidecar.invoke(self._app_id, path, http_method="GET"))


class PlannerClient:
    """The planner's HTTP API for people's tools, through service invocation."""

    def __init__(self, sidecar: DaprSidecar, app_id: str) -> None:
        self._sidecar = sidecar
        self._app_id = app_id

    async def listed(self, limit: int, offset: int = 0) -> PlanList:
        path = f"v1/plans?limit={limit}&offset={offset}"
        return await _as(PlanList, self._sidecar.invoke(self._app_id, path, http_method="GET"))

    async def get(self, plan_id: str) -> PlanRecord:
        path = f"v1/plans/{quote(plan_id, safe='')}"
        return await _as(PlanRecord, self._sidecar.invoke(self._app_id, path, http_method="GET"))

    async def submit(self, plan_id: str, submission: PlanSubmission) -> PlanAccepted:
        """Start a plan under `plan_id` (the same submission again starts nothing new)."""
        path = f"v1/plans/{quote(plan_id, safe='')}"
        body = submission.model_dump(mode="json")
        return await _as(
            PlanAccepted, self._sidecar.invoke(self._app_id, path, json_body=body, http_method="PUT")
        )


class DebateClient:
    """The debate service's HTTP API for people's tools, through service invocation."""

    def __init__(self, sidecar: DaprSidecar, app_id: str) -> None:
        self._sidecar = sidecar
        self._app_id = app_id

    async def listed(self, limit: int, offset: int = 0) -> DebateList:
        path = f"v1/debates?limit={limit}&offset={offset}"
        return await _as(DebateList, self._sidecar.invoke(self._app_id, path, http_method="GET"))

    async def get(self, debate_id: str) -> DebateRecord:
        path = f"v1/debates/{quote(debate_id, safe='')}"
        return await _as(DebateRecord, self._sidecar.invoke(self._app_id, path, http_method="GET"))

    async def ask(self, debate_id: str, submission: DebateSubmission) -> DebateAccepted:
        """Start a debate under `debate_id` (the same submission again starts nothing new)."""
        path = f"v1/debates/{quote(debate_id, safe='')}"
        body = submission.model_dump(mode="json")
        answer = self._sidecar.invoke(self._app_id, path, json_body=body, http_method="PUT")
        return await _as(DebateAccepted, answer)


class UncertaintyClient:
    """The uncertainty monitor's HTTP API, through service invocation."""

    def __init__(self, sidecar: DaprSidecar, app_id: str) -> None:
        self._sidecar = sidecar
        self._app_id = app_id

    async def llm_response(self, session_id: str, report: StepReport) -> StepVerdict:
        path = f"v1/sessions/{session_id}/llm-responses"
        body = report.model_dump(mode="json")
        return await _as(StepVerdict, self._sidecar.invoke(self._app_id, path, json_body=body))

    async def tool_call(self, session_id: str, report: StepReport) -> StepVerdict:
        """The check before a tool runs (`report.tool_name`): it may park the session for a
        person before the tool runs."""
        path = f"v1/sessions/{session_id}/tool-calls"
        body = report.model_dump(mode="json")
        return await _as(StepVerdict, self._sidecar.invoke(self._app_id, path, json_body=body))

    async def checkpoint(self, session_id: str, request: CheckpointRequest) -> CheckpointAnswer:
        """The checkpoint before a step runs: a trigger that requires confirmation parks the
        session for a person before the step runs."""
        path = f"v1/sessions/{session_id}/checkpoints"
        body = request.model_dump(mode="json")
        return await _as(CheckpointAnswer, self._sidecar.invoke(self._app_id, path, json_body=body))

    async def session(self, session_id: str) -> SessionState:
        path = f"v1/sessions/{session_id}"
        return await _as(SessionState, self._sidecar.invoke(self._app_id, path, http_method="GET"))


class EscalationClient:
    """The escalation service's HTTP API for people's tools (the console), through service
    invocation: the listing, one escalation, and deciding one."""

    def __init__(self, sidecar: DaprSidecar, app_id: str, api_token: str | None = None) -> None:
        self._sidecar = sidecar
        self._app_id = app_id
        self._api_token = api_token

    async def listed(
        self, status: EscalationStatus | None, limit: int, offset: int = 0, shown: ListingFilter | None = None
    ) -> EscalationList:
        """A page of the escalations in `status` (None: every one kept), the newest first, narrowed
        by `shown`."""
        query: dict[str, str] = {"limit": str(limit), "offset": str(offset)}
        if status is not None:
            query["status"] = str(status)
        if shown is not None:
            query.update((name, str(value)) for name, value in shown.model_dump(exclude_none=True).items())
        path = f"v1/escalations?{urlencode(query)}"
        return await _as(EscalationList, self._sidecar.invoke(self._app_id, path, http_method="GET"))

    async def get(self, escalation_id: str) -> EscalationRecord:
        path = f"v1/escalations/{quote(escalation_id, safe='')}"
        return await _as(EscalationRecord, self._sidecar.invoke(self._app_id, path, http_method="GET"))

    async def resume(self, escalation_id: str, request: ResumeRequest) -> EscalationRecord:
        """Decide; sent once (a decision whose answer was lost is not sent again: asking for the
        escalation tells whether it was applied)."""
        path = f"v1/escalations/{quote(escalation_id, safe='')}/resume"
        headers = {"x-agora-token": self._api_token} if self._api_token else None
        answer = self._sidecar.invoke(
            self._app_id, path, json_body=request.model_dump(mode="json"), headers=headers, idempotent=False
        )
        return await _as(EscalationRecord, answer)

    async def extend_deadline(self, escalation_id: str, extension: DeadlineExtension) -> EscalationRecord:
        path = f"v1/escalations/{quote(escalation_id, safe='')}/deadline"
        headers = {"x-agora-token": self._api_token} if self._api_token else None
        answer = self._sidecar.invoke(
            self._app_id, path, json_body=extension.model_dump(mode="json"), headers=headers, idempotent=False
        )
        return await _as(EscalationRecord, answer)


TaskActors = Actors[TaskInterface]
"""`Task` actors (the task board), one per task id: `tasks(task_id).post_task(spec)`."""
AgentRunsActors = Actors[AgentRunsInterface]
"""`AgentRuns` actors (the task board), one per agent id: its run slots and waiting tasks."""
ReputationActors = Actors[ReputationInterface]
"""`Reputation` actors, one per agent id."""
EscalationActors = Actors[EscalationInterface]
"""`Escalation` actors, one per escalation id."""


def task_actors(client: ActorClient) -> TaskActors:
    return Actors(client, TaskInterface)


def agent_runs_actors(client: ActorClient) -> AgentRunsActors:
    return Actors(client, AgentRunsInterface)


def reputation_actors(client: ActorClient) -> ReputationActors:
    return Actors(client, ReputationInterface)


def escalation_actors(client: ActorClient) -> EscalationActors:
    return Actors(client, EscalationInterface)
