"""The registry app: HTTP API (reached through Dapr service invocation) and subscriptions."""

from __future__ import annotations

import asyncio
import logging

from fastapi import FastAPI, Query
from pydantic import Field

from agora.core import topics
from agora.core.contracts import AgentList, Deregistered, FilterAnswer, RegisteredAgent
from agora.core.errors import NotFound
from agora.core.limits import MAX_CANDIDATES
from agora.core.messages import (
    DEFAULT_LEASE_SECONDS,
    MAX_LEASE_SECONDS,
    MIN_LEASE_SECONDS,
    AwardLapsed,
    DeregisterAgent,
    RegisterAgent,
)
from agora.core.models import CapabilityProfile, CapabilityQuery
from agora.registry.service import DEFAULT_MAX_CANDIDATES, CapabilityRegistry
from agora.runtime.actor_client import ActorClient
from agora.runtime.clients import task_actors
from agora.runtime.service import PathId, ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings

log = logging.getLogger(__name__)

APP_ID = "registry"


class RegistrySettings(ServiceSettings):
    app_id: str = APP_ID
    max_candidates: int = Field(default=DEFAULT_MAX_CANDIDATES, ge=1, le=MAX_CANDIDATES)
    reload_seconds: float = 30.0
    """AGORA_RELOAD_SECONDS: how often a replica also reloads every profile from the state
    store (0 = never), so it converges even if a change notification was lost."""


def registry_module(settings: RegistrySettings | None = None) -> ServiceModule:
    settings = settings or RegistrySettings()
    registry: CapabilityRegistry | None = None

    def current() -> CapabilityRegistry:
        assert registry is not None, "registry used before setup"
        return registry

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        nonlocal registry
        registry = CapabilityRegistry.from_context(ctx, settings.max_candidates)
        app.state.registry = registry

        @app.post("/v1/agents", response_model=RegisteredAgent)
        async def register(
            profile: CapabilityProfile,
            lease_seconds: int = Query(
                default=DEFAULT_LEASE_SECONDS, ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS
            ),
        ) -> RegisteredAgent:
            """Register or update an agent for `lease_seconds` (default `DEFAULT_LEASE_SECONDS`,
            120 s): the registration lapses unless it is registered again within that time.
            Registering again does not lift a suspension from bidding."""
            return await current().register(profile, lease_seconds)

        @app.get("/v1/agents", response_model=AgentList)
        async def list_agents() -> AgentList:
            return AgentList(agents=current().list_agents())

        @app.get("/v1/agents/{agent_id}", response_model=RegisteredAgent)
        async def get_agent(agent_id: PathId) -> RegisteredAgent:
            agent = current().get(agent_id)
            if agent is None:
                raise NotFound(f"no agent registered as {agent_id!r}", agent_id=agent_id)
            return agent

        @app.delete("/v1/agents/{agent_id}", response_model=Deregistered)
        async def deregister(agent_id: PathId) -> Deregistered:
            return Deregistered(deregistered=await current().deregister(agent_id))

        @app.post("/v1/agents/filter", response_model=FilterAnswer)
        async def filter_capable(query: CapabilityQuery) -> FilterAnswer:
            kept = current().filter_capable(query.required_skills, query.preferred_skills, query.limit)
            sample, count = current().filtered_out(kept)
            return FilterAnswer(agents=kept, filtered_out=sample, filtered_out_count=count)

        @app.post("/v1/agents/reload")
        async def reload() -> dict[str, int]:
            return {"agents": await current().load_all()}

        async def on_command(command: RegisterAgent | DeregisterAgent) -> None:
            if isinstance(command, RegisterAgent):
                await current().register(command.profile, command.lease_seconds)
            else:
                await current().deregister(command.agent_id)

        ctx.subscriptions.subscribe(topics.REGISTRY_COMMANDS, on_command)

        tasks = task_actors(ActorClient(ctx.sidecar))

        async def on_award_lapsed(lapse: AwardLapsed) -> None:
            # Only the task board may publish lapses, but a notice suspends an agent only if the
            # task's own record bears it out (an unknown task: NOT_FOUND, dead-lettered).
            await current().apply_lapse(lapse, await tasks(lapse.task_id).get_task())

        # A lapse already counted changes nothing (the suspension remembers the last one), so
        # redeliveries are recognised against the stored registration.
        ctx.subscriptions.subscribe(topics.TASK_AWARD_LAPSED, on_award_lapsed, idempotent=True)
        ctx.subscriptions.subscribe(
            topics.REGISTRY_CHANGED, current().apply_change, pubsub=settings.broadcast_pubsub
        )

    async def warm_up(ctx: ServiceContext) -> None:
        await current().load_all()
        if settings.reload_seconds > 0:
            ctx.spawn_daemon(_reload_every(current(), settings.reload_seconds), name="registry reload")
        ctx.spawn_daemon(_expire_leases_and_suspensions(current()), name="registry leases")

    return ServiceModule("registry", setup=setup, warm_up=warm_up)


async def _reload_every(registry: CapabilityRegistry, seconds: float) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            await registry.load_all()
        except Exception as exc:  # the next round tries again; the notifications keep flowing meanwhile
            log.warning("periodic registry reload failed", extra={"reason": repr(exc)[:500]})


LEASE_CHECK_SECONDS = 1.0


async def _expire_leases_and_suspensions(registry: CapabilityRegistry) -> None:
    """Drop agents from the index as their leases run out, and offer suspended agents again as
    their suspensions end (checked at least every second)."""
    while True:
        await asyncio.sleep(min(LEASE_CHECK_SECONDS, registry.seconds_to_next_change()))
        registry.expire()
        registry.end_suspensions()


def create_app(settings: RegistrySettings | None = None) -> FastAPI:
    settings = settings or RegistrySettings()
    return create_service_app(settings, [registry_module(settings)])


def main() -> None:
    settings = RegistrySettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
