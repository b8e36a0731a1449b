"""The worker app: registers its agents with the registry, hosts their `WorkerAgent` actors
and executes the tasks awarded to them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import yaml
from fastapi import FastAPI
from pydantic import Field

from agora.core import topics
from agora.core.contracts import AgentLearning
from agora.core.errors import NotFound
from agora.core.escalation.record import WaitingPartyKind
from agora.core.messages import (
    MAX_LEASE_SECONDS,
    MIN_LEASE_SECONDS,
    AwardAcknowledgement,
    EscalationResolved,
    TaskAwarded,
)
from agora.core.models import CapabilityProfile
from agora.core.triage.decision import DEFAULT_REPEAT_LIMIT
from agora.llm import ModelSettings, model_client_from_settings
from agora.runtime import decisions
from agora.runtime.actor import ActorClient
from agora.runtime.clients import RegistryClient, escalation_actors, task_actors
from agora.runtime.pubsub import RejectMessage
from agora.runtime.service import PathId, ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings
from agora.worker.actors import WorkerAgent, WorkerDeps
from agora.worker.client import WorkerAgents

__all__ = [
    "APP_ID",
    "RENEW_RETRY_SECONDS",
    "SAMPLE_AGENTS",
    "WorkerSettings",
    "create_app",
    "load_profiles",
    "main",
    "worker_module",
]

log = logging.getLogger(__name__)

APP_ID = "worker"
SAMPLE_AGENTS = Path(__file__).with_name("sample_agents.yaml")
RENEW_RETRY_SECONDS = 1.0


class WorkerSettings(ServiceSettings):
    app_id: str = APP_ID
    registry_app_id: str = "registry"
    agents_file: Path = SAMPLE_AGENTS
    uncertainty_checks: bool = False
    """AGORA_UNCERTAINTY_CHECKS: report every step to the uncertainty monitor, which may park
    the task for a person."""
    uncertainty_app_id: str = "uncertainty"
    triage_failures: bool = False
    """AGORA_TRIAGE_FAILURES: classify a failed attempt from its trajectory and recover it
    automatically (retry, replan, hint) until the triage policy escalates it to a person."""
    triage_repeat_limit: int = Field(default=DEFAULT_REPEAT_LIMIT, ge=0)
    """AGORA_TRIAGE_REPEAT_LIMIT: automatic recoveries per failure type before escalating."""
    max_runs_in_flight: int = Field(default=16, ge=1, le=10_000)
    """AGORA_MAX_RUNS_IN_FLIGHT: task runs this worker starts at once on delivery. An award
    that arrives with all of them under way is taken (acknowledged on the board) and waits as
    its run reminder, which starts it within 30 s; a decision waits in the broker."""
    agent_lease_seconds: int = Field(default=60, ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)
    """AGORA_AGENT_LEASE_SECONDS: the agents' registrations lapse this long after the worker
    last renewed them (it renews every third of it), so agents of a worker that is gone stop
    being offered tasks."""


def load_profiles(path: Path) -> list[CapabilityProfile]:
    loaded = yaml.safe_load(path.read_text()) or []
    return [CapabilityProfile.model_validate(p) for p in loaded]


def worker_module(settings: WorkerSettings | None = None) -> ServiceModule:
    settings = settings or WorkerSettings()
    profiles = {p.agent_id: p for p in load_profiles(settings.agents_file)}

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        ctx.host_actor(
            WorkerAgent,
            WorkerDeps(
                profiles=profiles,
                model=model_client_from_settings(ModelSettings(), ctx.sidecar),
                publisher=ctx.publisher,
                sidecar=ctx.sidecar,
                uncertainty_app_id=settings.uncertainty_app_id if settings.uncertainty_checks else None,
                triage_failures=settings.triage_failures,
                triage_repeat_limit=settings.triage_repeat_limit,
            ),
        )
        actors = ActorClient(ctx.sidecar)
        tasks = task_actors(actors)
        agents = WorkerAgents(actors)
        run_slots = asyncio.Semaphore(settings.max_runs_in_flight)

        def spawn_run(run: Callable[[], Coroutine[Any, Any, object]], name: str) -> None:
            async def bounded() -> None:
                try:
                    await run()
                finally:
                    run_slots.release()

            ctx.spawn(bounded(), name=name)

        @app.get("/v1/agents/{agent_id}/learning", response_model=AgentLearning)
        async def learning(agent_id: PathId) -> AgentLearning:
            """What the agent learnt from its recent runs, and how its patterns fare."""
            if agent_id not in profiles:
                raise NotFound(f"no agent {agent_id!r} runs on this worker", agent_id=agent_id)
            return await agents(agent_id).learning()

        async def on_award(award: TaskAwarded) -> None:
            if award.agent_id not in profiles:
                return  # another worker's agent
            # Take the award on the board first: it proves the award (its token) and starts the
            # work within the acknowledgment window; then the actor runs the task and publishes
            # its outcome while this delivery is acknowledged.
            acknowledgement = AwardAcknowledgement(agent_id=award.agent_id, award_token=award.award_token)
            board = await tasks(award.task_id).acknowledge_award(acknowledgement)
            held = board.allocation.winning_bid if board.allocation else None
            if board.spec != award.spec or held != award.bid:
                raise RejectMessage(f"award for {award.task_id} does not match the task board's record")
            if board.outcome is not None:
                return  # a redelivery of an award whose task is done: the board has its outcome
            await agents.watch(award.agent_id, award)
            if run_slots.locked():
                # As many runs as allowed are under way: the award waits as the reminder just
                # registered (durable, in the scheduler), which starts the run within its
                # period; nothing more is held here.
                return
            await run_slots.acquire()
            spawn_run(lambda: agents(award.agent_id).execute(award), name=f"execute {award.task_id}")

        # The board admits one acknowledgment per award and an agent runs a task once (it keeps
        # the outcome and re-announces it), so redeliveries are recognised there.
        ctx.subscriptions.subscribe(topics.TASK_AWARDED, on_award, idempotent=True)

        async def on_resolved(event: EscalationResolved) -> None:
            if event.waiting_party.kind not in (WaitingPartyKind.SESSION, WaitingPartyKind.TASK):
                return
            # A parked task waits in the actor of the agent that holds it on the board; a session
            # that is not a task on the board is someone else's to continue.
            try:
                board = await tasks(event.waiting_party.id).get_task()
            except NotFound:
                return
            holder = board.allocation.winning_agent_id if board.allocation else None
            if holder not in profiles:
                return
            await decisions.verified(escalation_actors(actors), event)
            await agents.hold_decision(holder, event)
            if run_slots.locked():
                return  # as for an award: the decision's reminder applies it
            await run_slots.acquire()
            spawn_run(lambda: agents(holder).resume(event), name=f"resume {event.escalation_id}")

        ctx.subscriptions.subscribe(topics.ESCALATION_RESOLVED, on_resolved)

    async def register_agents(ctx: ServiceContext) -> None:
        registry = RegistryClient(ctx.sidecar, settings.registry_app_id)
        for profile in profiles.values():
            await registry.register(profile, lease_seconds=settings.agent_lease_seconds)

    async def renew_leases(ctx: ServiceContext) -> None:
        """Renew every third of the lease; after a failure (the registry restarting), retry
        soon with backoff, so agents whose lease ran out meanwhile are back within a second or
        two of the registry's return."""
        interval = settings.agent_lease_seconds / 3
        wait = interval
        while True:
            await asyncio.sleep(wait)
            try:
                await register_agents(ctx)
                wait = interval
            except Exception as exc:
                wait = RENEW_RETRY_SECONDS if wait == interval else min(wait * 2, interval)
                log.warning(
                    "renewing the agents' registrations failed; retrying",
                    extra={"reason": repr(exc)[:500], "retry_in_s": wait},
                )

    async def warm_up(ctx: ServiceContext) -> None:
        await register_agents(ctx)
        log.info(
            "agents registered", extra={"agents": sorted(profiles), "lease_s": settings.agent_lease_seconds}
        )
        ctx.spawn_daemon(renew_leases(ctx), name="agent leases")

    return ServiceModule("worker", setup=setup, warm_up=warm_up)


def create_app(settings: WorkerSettings | None = None) -> FastAPI:
    settings = settings or WorkerSettings()
    return create_service_app(settings, [worker_module(settings)])


def main() -> None:
    settings = WorkerSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
