"""The reference worker: an agent app built on the agent SDK, whose agents are defined in a YAML
file of capability profiles (`sample_agents.yaml` unless AGORA_AGENTS_FILE names another).

Each agent is an `AgentRunner` over the configured model (the offline model by default), with
the runner's own step checks by the uncertainty monitor (AGORA_UNCERTAINTY_CHECKS), failure
triage and the escalation ladder (AGORA_TRIAGE_FAILURES) and learning from its recent runs;
the app takes its agents' awards, runs each as a Dapr workflow, and reports outcomes like any
agent app (`agora.sdk`). Its agents' bids are the market's own estimates unless AGORA_BIDS=self
has them answer the market's solicitations themselves."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from fastapi import FastAPI
from pydantic import Field

from agora.core.messages import MAX_LEASE_SECONDS, MIN_LEASE_SECONDS
from agora.core.models import CapabilityProfile
from agora.core.triage.decision import DEFAULT_REPEAT_LIMIT
from agora.llm import (
    ChatMessage,
    Completion,
    ModelClient,
    ModelSettings,
    ToolChoice,
    ToolSpec,
    model_client_from_settings,
)
from agora.runtime.service import ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprSidecar
from agora.sdk import Agent
from agora.sdk._app import agent_app_module
from agora.sdk.app import AgentAppSettings
from agora.sdk.graphs import CompiledGraph
from agora.sdk.runner import AgentRunner, RecoveryPolicy, RunnerConfig

__all__ = [
    "APP_ID",
    "SAMPLE_AGENTS",
    "WorkerSettings",
    "create_app",
    "load_profiles",
    "main",
    "worker_agents",
    "worker_module",
]

APP_ID = "worker"
SAMPLE_AGENTS = Path(__file__).with_name("sample_agents.yaml")


class WorkerSettings(ServiceSettings):
    app_id: str = APP_ID
    registry_app_id: str = "registry"
    taskboard_app_id: str = "taskboard"
    agents_file: Path = SAMPLE_AGENTS
    uncertainty_checks: bool = False
    """AGORA_UNCERTAINTY_CHECKS: report every step to the uncertainty monitor, which may park
    the task for a person."""
    uncertainty_app_id: str = "uncertainty"
    triage_failures: bool = False
    """AGORA_TRIAGE_FAILURES: classify a failed attempt from its steps and recover it as the
    escalation ladder says (again, after the agent's own analysis, with a notice), until triage
    or the ladder hands it to a person."""
    triage_repeat_limit: int = Field(default=DEFAULT_REPEAT_LIMIT, ge=0, le=100)
    """AGORA_TRIAGE_REPEAT_LIMIT: automatic recoveries per failure type before escalating."""
    max_runs_in_flight: int = Field(default=16, ge=1, le=10_000)
    """AGORA_MAX_RUNS_IN_FLIGHT: runs the worker works on at once; the workflow engine holds
    the others' next steps until a slot frees."""
    bids: Literal["market", "self"] = "market"
    """AGORA_BIDS: who writes the agents' bids: the market's own model (the default), or the
    agents themselves, each answering the market's solicitations from the worker's app with the
    SDK's default estimate (its price, its load, its step allowance)."""
    agent_lease_seconds: int = Field(default=60, ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)
    """AGORA_AGENT_LEASE_SECONDS: the agents' registrations lapse this long after the worker
    last renewed them (it renews every third of it), so agents of a worker that is gone stop
    being offered tasks."""


def load_profiles(path: Path) -> list[CapabilityProfile]:
    loaded = yaml.safe_load(path.read_text()) or []
    return [CapabilityProfile.model_validate(p) for p in loaded]


class SidecarModel:
    """The configured model client, built once the app's sidecar client exists (a model behind
    Dapr's Conversation API is reached through it); every runner of the app shares it."""

    def __init__(self, settings: ModelSettings) -> None:
        self._settings = settings
        self._client: ModelClient | None = None
        self.backend: str = settings.backend
        self.model: str = settings.model

    @property
    def supports_tools(self) -> bool:
        """As the client it was bound to says (runs start after the app, so after `bind`)."""
        return self._client is not None and self._client.supports_tools

    def bind(self, sidecar: DaprSidecar) -> None:
        if self._client is None:
            self._client = model_client_from_settings(self._settings, sidecar)

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice = "auto",
    ) -> Completion:
        if self._client is None:
            raise RuntimeError("the worker's model is used before its app started")
        return await self._client.complete(
            messages,
            json_schema=json_schema,
            temperature=temperature,
            max_tokens=max_tokens,
            tools=tools,
            tool_choice=tool_choice,
        )

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


def worker_agents(settings: WorkerSettings, model: ModelClient) -> list[Agent]:
    """The worker's agents: one runner per profile, up to its `max_steps` per attempt."""
    recovery = RecoveryPolicy(repeat_limit=settings.triage_repeat_limit) if settings.triage_failures else None
    return [
        Agent.from_profile(
            profile,
            runner=AgentRunner(
                model, config=RunnerConfig(max_iterations=profile.max_steps), recovery=recovery
            ),
            instructions=f"You are {profile.agent_name}, skilled in {', '.join(profile.skill_tags)}. "
            "Work on the task step by step, and say whether you did it.",
            bids=settings.bids,
            max_concurrent_runs=settings.max_runs_in_flight,
        )
        for profile in load_profiles(settings.agents_file)
    ]


def worker_module(
    settings: WorkerSettings | None = None,
    extra_agents: Sequence[Agent] = (),
    extra_graphs: Sequence[CompiledGraph[Any]] = (),
) -> ServiceModule:
    """The worker as an app's module; `extra_agents` and `extra_graphs` (a team's SDK agents and
    graphs) share its app, as in the embedded default."""
    settings = settings or WorkerSettings()
    model = SidecarModel(ModelSettings())
    agents = AgentAppSettings(
        app_id=settings.app_id,
        registry_app_id=settings.registry_app_id,
        taskboard_app_id=settings.taskboard_app_id,
        agent_lease_seconds=settings.agent_lease_seconds,
        max_runs_in_flight=settings.max_runs_in_flight,
        uncertainty_app_id=settings.uncertainty_app_id if settings.uncertainty_checks else None,
    )
    app_module = agent_app_module([*worker_agents(settings, model), *extra_agents], agents, extra_graphs)

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        model.bind(ctx.sidecar)
        app_module.setup(ctx, app)

    return ServiceModule("worker", setup=setup, warm_up=app_module.warm_up, stop=app_module.stop)


def create_app(settings: WorkerSettings | None = None) -> FastAPI:
    settings = settings or WorkerSettings()
    return create_service_app(settings, [worker_module(settings)])


def main() -> None:
    settings = WorkerSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
