"""Agent apps: a team's agents as their own Dapr app on the market.

An agent app registers its agents' profiles with a lease (renewed every third of it), naming
itself as the app that answers their bid solicitations; answers them (`POST /v1/bids`) with
each agent's own estimate; takes the awards its agents win (acknowledged on the task board
with the award's token, checked against the board's record); runs each award as a Dapr
workflow (`agent_run`: execute, then report), so a crash of the app mid-run resumes the run
instead of losing the task; and publishes the outcome with its real cost, tokens and steps. On
shutdown it re-registers its agents with the shortest lease, so they leave the market within
seconds.

    agora-agent run my_agents.py        # or: python -m agora.sdk run my_agents.py

`my_agents.py` defines `agents = [Agent(profile, runner=...), ...]` (or module-level `Agent`s).
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dapr.ext.workflow import DaprWorkflowContext
from fastapi import FastAPI
from pydantic import AliasChoices, BaseModel, Field

from agora.core import topics
from agora.core.contracts import BidOffer, BidSolicitation
from agora.core.errors import AgoraError, InvalidArgument, NotFound
from agora.core.limits import MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.market import TaskOutcome, TaskSpec
from agora.core.messages import MAX_LEASE_SECONDS, MIN_LEASE_SECONDS, AwardAcknowledgement, TaskAwarded
from agora.core.models import CapabilityProfile
from agora.runtime.actor import ActorClient
from agora.runtime.clients import RegistryClient, task_actors
from agora.runtime.pubsub import RejectMessage
from agora.runtime.service import ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings
from agora.runtime.state import StateRepository
from agora.runtime.workflows import ACTIVITY_RETRY, RunFailure, result_of
from agora.sdk._runner import AgentDefinition, AgentRunner, AgentState, RunStatus

__all__ = [
    "Agent",
    "AgentAppSettings",
    "AgentLoad",
    "HandlerResult",
    "agent_app_module",
    "load_agents",
    "serve_agents",
]

log = logging.getLogger(__name__)

RUN_WORKFLOW = "agent_run"
EXECUTE = "agent.execute"
REPORT = "agent.report"
STATE_NAMESPACE = "agent:state"
RENEW_RETRY_SECONDS = 1.0


class HandlerResult(BaseModel):
    """What an agent's own handler reports for a task it ran."""

    success: bool
    summary: str = Field(default="", max_length=MAX_TEXT_CHARS)
    cost_usd: float = Field(default=0.0, ge=0.0)
    steps: int = Field(default=1, ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    partial: bool = False


@dataclass(frozen=True)
class AgentLoad:
    """How busy an agent is when it is asked to bid."""

    runs_in_flight: int
    max_concurrent_runs: int

    @property
    def fraction(self) -> float:
        return min(1.0, self.runs_in_flight / self.max_concurrent_runs)


Handler = Callable[[TaskAwarded], Awaitable[HandlerResult]]
Estimator = Callable[[TaskSpec, AgentLoad], Awaitable[BidOffer] | BidOffer]


@dataclass
class Agent:
    """One agent of an app: its profile, and how it works: an `AgentRunner` (with
    `instructions`) or a `handler` of its own; `estimate` makes its bids (by default from its
    price, its load and its step allowance)."""

    profile: CapabilityProfile
    runner: AgentRunner | None = None
    instructions: str = ""
    handler: Handler | None = None
    estimate: Estimator | None = None
    max_concurrent_runs: int = 4
    runs_in_flight: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if (self.runner is None) == (self.handler is None):
            raise ValueError(f"agent {self.profile.agent_id}: give a runner or a handler (one of them)")
        if self.max_concurrent_runs < 1:
            raise ValueError("max_concurrent_runs is at least 1")

    @property
    def agent_id(self) -> str:
        return self.profile.agent_id

    async def bid(self, spec: TaskSpec) -> BidOffer:
        load = AgentLoad(self.runs_in_flight, self.max_concurrent_runs)
        if self.estimate is None:
            return default_estimate(self.profile, spec, load)
        offer = self.estimate(spec, load)
        return await offer if inspect.isawaitable(offer) else offer


def default_estimate(profile: CapabilityProfile, spec: TaskSpec, load: AgentLoad) -> BidOffer:
    """Half its step allowance at its step price; 0.8 sure when idle, down to 0.4 when every
    run slot is taken (a busy agent is slower and more likely to miss)."""
    steps = max(1, profile.max_steps // 2)
    return BidOffer(
        self_reported_success_prob=round(0.8 - 0.4 * load.fraction, 3),
        estimated_cost_usd=round(steps * profile.cost_per_step_usd, 6),
        estimated_steps=steps,
        rationale=f"{profile.agent_name}: about {steps} steps, {load.runs_in_flight} of "
        f"{load.max_concurrent_runs} runs under way",
    )


class AgentAppSettings(ServiceSettings):
    app_id: str = Field(default="agents", validation_alias=AliasChoices("AGORA_APP_ID", "APP_ID"))
    """The app's Dapr app id (`dapr run --app-id` sets APP_ID); its agents' bids are asked here."""
    registry_app_id: str = "registry"
    taskboard_app_id: str = "taskboard"
    agents_file: Path | None = None
    """AGORA_AGENTS_FILE: the Python file defining the agents (`agora-agent run FILE` sets it)."""
    agent_lease_seconds: int = Field(default=60, ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)


class AgentRunStart(BaseModel):
    award: TaskAwarded


class DaprAgentStateStore:
    """Runner state in the app's Dapr state store (`agent:state:<agent>|<session>`)."""

    def __init__(self, repository: StateRepository[AgentState]) -> None:
        self._repository = repository

    async def load(self, agent_id: str, session_id: str) -> AgentState | None:
        found = await self._repository.get(f"{agent_id}|{session_id}")
        return found.value if found is not None else None

    async def save(self, state: AgentState) -> None:
        await self._repository.save(f"{state.agent_id}|{state.session_id}", state)


def agent_run(ctx: DaprWorkflowContext, raw: Any) -> Any:
    """An award's run: execute it, then report its outcome (each step recorded once)."""
    start = result_of(AgentRunStart, raw)
    outcome = yield ctx.call_activity(EXECUTE, input=start, retry_policy=ACTIVITY_RETRY)
    yield ctx.call_activity(REPORT, input=result_of(TaskOutcome, outcome), retry_policy=ACTIVITY_RETRY)


def agent_run_failed(ctx: DaprWorkflowContext, raw: Any, failure: RunFailure) -> Any:
    """A run that broke down still ends its task: a failed outcome with the reason."""
    award = result_of(AgentRunStart, raw).award
    outcome = failed_outcome(award, failure.reason)
    yield ctx.call_activity(REPORT, input=outcome, retry_policy=ACTIVITY_RETRY)


def failed_outcome(award: TaskAwarded, reason: str, *, cost_usd: float = 0.0, steps: int = 0,
                   input_tokens: int = 0, output_tokens: int = 0) -> TaskOutcome:  # fmt: skip
    return TaskOutcome(
        task_id=award.task_id,
        agent_id=award.agent_id,
        actual_success=False,
        actual_cost_usd=cost_usd,
        actual_steps=steps,
        summary=reason[:MAX_NOTE_CHARS],
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        award_token=award.award_token,
    )


def agent_app_module(agents: Sequence[Agent], settings: AgentAppSettings) -> ServiceModule:
    by_id = {agent.agent_id: agent for agent in agents}
    if len(by_id) != len(agents):
        raise ValueError("two agents of this app have one agent id")
    if not agents:
        raise ValueError("an agent app needs at least one agent")

    def profiles() -> list[CapabilityProfile]:
        return [a.profile.model_copy(update={"bid_app_id": settings.app_id}) for a in agents]

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        store = DaprAgentStateStore(ctx.repository(STATE_NAMESPACE, AgentState))
        for agent in agents:
            if agent.runner is not None:
                agent.runner.attach(state_store=store, cost_publisher=ctx.publisher)
        tasks = task_actors(ActorClient(ctx.sidecar))
        host = ctx.workflows()
        host.workflow(RUN_WORKFLOW, agent_run, on_failure=agent_run_failed)

        async def execute(start: AgentRunStart) -> TaskOutcome:
            award = start.award
            agent = by_id[award.agent_id]
            agent.runs_in_flight += 1
            try:
                return await _execute(agent, award, store)
            finally:
                agent.runs_in_flight -= 1

        async def report(outcome: TaskOutcome) -> None:
            await ctx.publisher.publish(topics.TASK_OUTCOME, outcome, message_id=f"outcome:{outcome.task_id}")

        host.activity(EXECUTE, AgentRunStart, execute)
        host.activity(REPORT, TaskOutcome, report)

        @app.post("/v1/bids", response_model=BidOffer)
        async def bid(solicitation: BidSolicitation) -> BidOffer:
            agent = by_id.get(solicitation.agent_id)
            if agent is None:
                raise NotFound(
                    f"no agent {solicitation.agent_id!r} in this app", agent_id=solicitation.agent_id
                )
            if not agent.profile.skill_tags or not set(solicitation.task.required_skills) <= set(
                agent.profile.skill_tags
            ):
                raise InvalidArgument(f"agent {agent.agent_id} lacks a required skill of the task")
            return await asyncio.wait_for(agent.bid(solicitation.task), solicitation.respond_within_ms / 1000)

        async def on_award(award: TaskAwarded) -> None:
            if award.agent_id not in by_id:
                return  # another app's agent
            acknowledgement = AwardAcknowledgement(agent_id=award.agent_id, award_token=award.award_token)
            try:
                board = await tasks(award.task_id).acknowledge_award(acknowledgement)
            except AgoraError as exc:
                if not exc.permanent:
                    raise
                raise RejectMessage(f"{exc.code}: {exc.message}") from exc
            held = board.allocation.winning_bid if board.allocation else None
            if board.spec != award.spec or held != award.bid:
                raise RejectMessage(f"award for {award.task_id} does not match the task board's record")
            if board.outcome is not None:
                return  # a redelivery of an award whose task is done
            await host.start_once(RUN_WORKFLOW, f"run.{award.task_id}", AgentRunStart(award=award))

        ctx.subscriptions.subscribe(topics.TASK_AWARDED, on_award, idempotent=True)

    async def warm_up(ctx: ServiceContext) -> None:
        registry = RegistryClient(ctx.sidecar, settings.registry_app_id)
        for profile in profiles():
            await registry.register(profile, lease_seconds=settings.agent_lease_seconds)
        log.info(
            "agents registered", extra={"agents": sorted(by_id), "lease_s": settings.agent_lease_seconds}
        )
        ctx.spawn_daemon(_renew(registry, profiles(), settings.agent_lease_seconds), name="agent leases")

    async def stop(ctx: ServiceContext) -> None:
        registry = RegistryClient(ctx.sidecar, settings.registry_app_id)
        for profile in profiles():
            await registry.register(profile, lease_seconds=MIN_LEASE_SECONDS)
        log.info("agents leave the market", extra={"agents": sorted(by_id), "within_s": MIN_LEASE_SECONDS})

    return ServiceModule("agents", setup=setup, warm_up=warm_up, stop=stop)


async def _execute(agent: Agent, award: TaskAwarded, store: DaprAgentStateStore) -> TaskOutcome:
    """Run the award: the agent's handler, or its runner on the task's description within the
    task's budget. A run that fails (its budget, its iteration limit, a model that is gone)
    ends as a failed outcome with the reason and what it spent."""
    if agent.handler is not None:
        result = await agent.handler(award)
        return TaskOutcome(
            task_id=award.task_id,
            agent_id=award.agent_id,
            actual_success=result.success,
            actual_cost_usd=result.cost_usd,
            actual_steps=result.steps,
            partial=result.partial,
            summary=result.summary,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            award_token=award.award_token,
        )
    assert agent.runner is not None
    definition = AgentDefinition(name=agent.agent_id, instructions=agent.instructions)
    try:
        run = await agent.runner.run(
            definition, award.spec.description, session_id=award.task_id, budget_usd=award.spec.budget_usd
        )
    except AgoraError as exc:
        spent = await store.load(agent.agent_id, award.task_id)
        return failed_outcome(
            award,
            f"{exc.code}: {exc.message}",
            cost_usd=spent.cost_usd if spent else 0.0,
            steps=spent.iterations if spent else 0,
            input_tokens=spent.input_tokens if spent else 0,
            output_tokens=spent.output_tokens if spent else 0,
        )
    return TaskOutcome(
        task_id=award.task_id,
        agent_id=award.agent_id,
        actual_success=run.status is RunStatus.COMPLETED,
        actual_cost_usd=run.cost.total_cost_usd,
        actual_steps=run.iterations,
        summary=(run.output or run.reason)[:MAX_TEXT_CHARS],
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        award_token=award.award_token,
    )


async def _renew(registry: RegistryClient, profiles: list[CapabilityProfile], lease_seconds: int) -> None:
    interval = lease_seconds / 3
    while True:
        await asyncio.sleep(interval)
        try:
            for profile in profiles:
                await registry.register(profile, lease_seconds=lease_seconds)
        except Exception as exc:  # the registry restarting: try again soon
            log.warning("renewing the agents' leases failed; retrying", extra={"reason": repr(exc)[:300]})
            await asyncio.sleep(RENEW_RETRY_SECONDS)


def load_agents(path: Path) -> list[Agent]:
    """The agents a Python file defines: its `agents` list, else every module-level `Agent`."""
    spec = importlib.util.spec_from_file_location(f"agora_agents_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    declared = getattr(module, "agents", None)
    found = (
        list(declared) if declared is not None else [v for v in vars(module).values() if isinstance(v, Agent)]
    )
    if not found or not all(isinstance(a, Agent) for a in found):
        raise ValueError(f"{path} defines no agents (an `agents` list of `Agent`, or module-level `Agent`s)")
    return found


def create_agent_app(agents: Sequence[Agent], settings: AgentAppSettings | None = None) -> FastAPI:
    settings = settings or AgentAppSettings()
    return create_service_app(settings, [agent_app_module(agents, settings)])


def serve_agents(agents: Sequence[Agent], settings: AgentAppSettings | None = None) -> None:
    """Serve `agents` as an agent app beside its own daprd (blocks until stopped)."""
    settings = settings or AgentAppSettings()
    serve(create_agent_app(agents, settings), settings)
