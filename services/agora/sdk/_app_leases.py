"""An agent app's agents on the market: registered with a lease (renewed every third of it),
naming the app as the one that answers their bid solicitations when they bid themselves, and
re-registered with the shortest lease when the app stops, so they leave within seconds."""

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
from agora.sdk._app_steps import connect_tools

__all__ = ["RENEW_RETRY_SECONDS", "AgentLeases"]

log = logging.getLogger(__name__)

RENEW_RETRY_SECONDS = 1.0


class AgentLeases:
    """The app's agents' registrations with the registry, for the app's lifetime."""

    def __init__(self, agents: Sequence[Agent], settings: AgentAppSettings) -> None:
        self._agents = agents
        self._settings = settings

    def profiles(self) -> list[CapabilityProfile]:
        return [
            a.profile.model_copy(update={"bid_app_id": self._settings.app_id if a.bids == "self" else None})
            for a in self._agents
        ]

    async def warm_up(self, ctx: ServiceContext) -> None:
        settings = self._settings
        for agent in self._agents:  # before registering: an agent bids only once its tools are there
            await connect_tools(agent, settings.dapr_http_endpoint)
        registry = RegistryClient(ctx.sidecar, settings.registry_app_id)
        for profile in self.profiles():
            await registry.register(profile, lease_seconds=settings.agent_lease_seconds)
        log.info(
            "agents registered",
            extra={"agents": self._agent_ids(), "lease_s": settings.agent_lease_seconds},
        )
        ctx.spawn_daemon(_renew(registry, self.profiles(), settings.agent_lease_seconds), name="agent leases")

    async def stop(self, ctx: ServiceContext) -> None:
        settings = self._settings
        registry = RegistryClient(ctx.sidecar, settings.registry_app_id)
        try:
            for profile in self.profiles():
                await registry.register(profile, lease_seconds=MIN_LEASE_SECONDS)
        except Exception as exc:  # the registry stopping too (one app hosts both): leases lapse anyway
            log.warning(
                "the registry could not shorten the agents' leases; they lapse on their own",
                extra={"reason": repr(exc)[:300], "within_s": settings.agent_lease_seconds},
            )
            return
        log.info(
            "agents leave the market", extra={"agents": self._agent_ids(), "within_s": MIN_LEASE_SECONDS}
        )

    def _agent_ids(self) -> list[str]:
        return sorted(agent.agent_id for agent in self._agents)


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
