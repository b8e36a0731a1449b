"""An agent app's agents on the market: registered with a lease (renewed every third of it),
naming the app as the one that answers their bid solicitations when they bid themselves, and
re-registered with the shortest lease when the app stops, so they leave within seconds. An
agent that cannot be offered at a renewal (an A2A agent whose card is gone) is not renewed: its
lease lapses, and it is registered again at a later renewal when it can be."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from agora.core.messages import MIN_LEASE_SECONDS
from agora.core.models import CapabilityProfile
from agora.runtime.clients import RegistryClient
from agora.runtime.service import ServiceContext
from agora.sdk._agent import Agent
from agora.sdk._app_settings import AgentAppSettings

__all__ = ["RENEW_RETRY_SECONDS", "AgentLeases"]

log = logging.getLogger(__name__)

RENEW_RETRY_SECONDS = 1.0


class AgentLeases:
    """The app's agents' registrations with the registry, for the app's lifetime."""

    def __init__(self, agents: Sequence[Agent], settings: AgentAppSettings) -> None:
        self._agents = agents
        self._settings = settings
        self._registered: dict[str, CapabilityProfile] = {}

    async def offered(self) -> list[CapabilityProfile]:
        """Each agent's profile as it can be offered now (those that cannot are left out),
        naming this app for the bids of the agents that bid themselves."""
        profiles: list[CapabilityProfile] = []
        for agent in self._agents:
            profile = await agent.offer(self._settings.dapr_http_endpoint)
            if profile is not None:
                bid_app_id = self._settings.app_id if agent.bids == "self" else None
                profiles.append(profile.model_copy(update={"bid_app_id": bid_app_id}))
        return profiles

    async def register(self, registry: RegistryClient) -> None:
        for profile in await self.offered():
            await registry.register(profile, lease_seconds=self._settings.agent_lease_seconds)
            self._registered[profile.agent_id] = profile

    async def warm_up(self, ctx: ServiceContext) -> None:
        settings = self._settings
        registry = RegistryClient(ctx.sidecar, settings.registry_app_id)
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
