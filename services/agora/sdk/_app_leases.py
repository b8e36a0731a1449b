"""An agent app's agents on the market: registered with a lease (renewed every third of it),
naming the app as the one that answers their bid solicitations when they bid themselves, and
re-registered with the shortest lease when the app stops, so they leave within seconds. An
agent that cannot be offered at a renewal (an A2A agent whose card is gone) is not renewed: its
lease lapses, and it is registered again at a later renewal when it can be. The A2A agents a person
joined to the app through its API are read again at each renewal too (`JoinedA2AAgents`): one
taken off leaves the market as a stopping app's agents do."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from agora.core.messages import MIN_LEASE_SECONDS
from agora.core.models import CapabilityProfile
from agora.runtime.clients import RegistryClient
from agora.runtime.service import ServiceContext
from agora.sdk._agent import Agent
from agora.sdk._app_a2a_joined import JoinedA2AAgents
from agora.sdk._app_settings import AgentAppSettings

__all__ = ["RENEW_RETRY_SECONDS", "AgentLeases"]

log = logging.getLogger(__name__)

RENEW_RETRY_SECONDS = 1.0


class AgentLeases:
    """The app's agents' registrations with the registry, for the app's lifetime."""

    def __init__(
        self, agents: dict[str, Agent], settings: AgentAppSettings, joined: JoinedA2AAgents | None = None
    ) -> None:
        self._agents = agents
        """Every agent the app serves, by id (the A2A agents joined through its API among them)."""
        self._settings = settings
        self.joined = joined
        """The A2A agents joined through the app's API (set when the app is wired to its sidecar)."""
        self._registered: dict[str, CapabilityProfile] = {}
        self._registry: RegistryClient | None = None

    def _on_market(self) -> list[Agent]:
        joined = self.joined
        return [agent for agent in self._agents.values() if joined is None or joined.serves(agent.agent_id)]

    async def offered(self, agents: Sequence[Agent] | None = None) -> list[CapabilityProfile]:
        """Each agent's profile as it can be offered now (those that cannot are left out),
        naming this app for the bids of the agents that bid themselves."""
        profiles: list[CapabilityProfile] = []
        for agent in self._on_market() if agents is None else agents:
            profile = await agent.offer(self._settings.dapr_http_endpoint)
            if profile is not None:
                bid_app_id = self._settings.app_id if agent.bids == "self" else None
                profiles.append(profile.model_copy(update={"bid_app_id": bid_app_id}))
        return profiles

    async def register(self, registry: RegistryClient, agents: Sequence[Agent] | None = None) -> None:
        """Register (renew) the agents on the market from this app, or only `agents`; those that
        left it since are cut to the shortest lease."""
        if self.joined is not None and agents is None:
            await self.joined.sync()
            for agent_id in sorted(self.joined.left):
                await self._cut_lease(registry, agent_id)
        for profile in await self.offered(agents):
            await registry.register(profile, lease_seconds=self._settings.agent_lease_seconds)
            self._registered[profile.agent_id] = profile

    async def register_now(self, agent_id: str) -> None:
        """Register one agent at once (one a person just joined), or cut its lease now (one that
        left); the renewals keep it so."""
        if self._registry is None:
            return  # not warm yet: warm-up registers it
        agent = self._agents.get(agent_id)
        if self.joined is not None and agent_id in self.joined.left:
            await self._cut_lease(self._registry, agent_id)
        elif agent is not None:
            await self.register(self._registry, [agent])

    async def _cut_lease(self, registry: RegistryClient, agent_id: str) -> None:
        """A joined agent taken off the list leaves the market: its lease cut to the shortest."""
        assert self.joined is not None
        left = self._registered.pop(agent_id, None)
        if left is not None:
            await registry.register(left, lease_seconds=MIN_LEASE_SECONDS)
        self.joined.left.discard(agent_id)

    async def warm_up(self, ctx: ServiceContext) -> None:
        settings = self._settings
        registry = self._registry = RegistryClient(ctx.sidecar, settings.registry_app_id)
        await self.register(registry)
        log.info(
            "agents registered",
            extra={"agents": sorted(self._registered), "lease_s": settings.agent_lease_seconds},
        )
        ctx.spawn_daemon(self._renew(registry), name="agent leases")

    async def stop(self, ctx: ServiceContext) -> None:
        settings = self._settings
        registry = RegistryClient(ctx.sidecar, settings.registry_app_id)
        try:
            for profile in self._registered.values():
                await registry.register(profile, lease_seconds=MIN_LEASE_SECONDS)
        except Exception as exc:  # the registry stopping too (one app hosts both): leases lapse anyway
            log.warning(
                "the registry could not shorten the agents' leases; they lapse on their own",
                extra={"reason": repr(exc)[:300], "within_s": settings.agent_lease_seconds},
            )
            return
        log.info(
            "agents leave the market",
            extra={"agents": sorted(self._registered), "within_s": MIN_LEASE_SECONDS},
        )

    async def _renew(self, registry: RegistryClient) -> None:
        interval = self._settings.agent_lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            try:
                await self.register(registry)
            except Exception as exc:  # the registry restarting: try again soon
                log.warning("renewing the agents' leases failed; retrying", extra={"reason": repr(exc)[:300]})
                await asyncio.sleep(RENEW_RETRY_SECONDS)
