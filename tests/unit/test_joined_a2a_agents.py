"""The A2A agents a person joins to a running agent app, as its replicas share them: the list in
the store is what each replica serves after its next renewal, an agent taken off it leaves the
market (its lease cut to the shortest) but stays among the app's agents for its runs under way,
and the app's own agents are not the API's to replace."""

from __future__ import annotations

from typing import Any, cast

import pytest

from agora.core.contracts import A2AAgentJoin, A2AAgentJoined, A2AAgentsJoined
from agora.core.errors import Conflict
from agora.core.messages import MIN_LEASE_SECONDS
from agora.core.models import CapabilityProfile
from agora.runtime.clients import RegistryClient
from agora.sdk import A2AAgent
from agora.sdk._agent import Agent
from agora.sdk._app_a2a_joined import JOINED_KEY, JoinedA2AAgents
from agora.sdk._app_leases import AgentLeases
from agora.sdk._app_settings import AgentAppSettings
from agora.sdk.testing import MemoryRepository

CARD = "http://127.0.0.1:9100"


class Registry:
    """What the registry was asked: each registration's agent and lease."""

    def __init__(self) -> None:
        self.leases: list[tuple[str, int]] = []

    async def register(self, profile: CapabilityProfile, lease_seconds: int) -> None:
        self.leases.append((profile.agent_id, lease_seconds))


equipped: list[Agent] = []
"""Agents given the app's stores and services (the app's `equip`), in order."""


class Offered(A2AAgent):
    """An A2A agent whose card reads as its provisional profile (no network in a unit test)."""

    async def offer(self, dapr_http_endpoint: str) -> CapabilityProfile | None:
        return self.profile


def replica(
    store: MemoryRepository[A2AAgentsJoined], own: list[Agent]
) -> tuple[JoinedA2AAgents, AgentLeases]:
    agents = {agent.agent_id: agent for agent in own}
    joined = JoinedA2AAgents(store.typed(), agents, "http://127.0.0.1:3500", equipped.append)
    leases = AgentLeases(agents, AgentAppSettings(app_id="agents", agent_lease_seconds=60), joined)
    return joined, leases


async def test_each_replica_serves_the_stored_list_and_one_taken_off_leaves_with_the_shortest_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("agora.sdk._app_a2a_joined.A2AAgent", Offered)
    store = MemoryRepository(A2AAgentsJoined)
    other, other_leases = replica(store, [])
    registry = Registry()
    entry = A2AAgentJoined(agent_id="poet", card_url=CARD, price_per_step_usd=0.01)
    await store.save(
        JOINED_KEY, A2AAgentsJoined(agents=[entry])
    )  # as the replica that took the request wrote it

    equipped.clear()
    await other_leases.register(cast(RegistryClient, registry))
    assert registry.leases == [("poet", 60)] and other.serves("poet")
    assert [agent.agent_id for agent in equipped] == ["poet"], "given the app's stores as its own agents are"
    assert (await other.listed()).agents == [entry]

    await store.save(JOINED_KEY, A2AAgentsJoined())  # taken off by the other replica
    await other_leases.register(cast(RegistryClient, registry))
    assert registry.leases[-1] == ("poet", MIN_LEASE_SECONDS) and not other.serves("poet")
    await other_leases.register(cast(RegistryClient, registry))
    assert registry.leases[-1] == ("poet", MIN_LEASE_SECONDS), "cut once, not registered again"
    assert len(registry.leases) == 2
    assert "poet" in cast(Any, other_leases)._agents, "kept for a run of it under way"


async def test_the_app_s_own_agents_are_not_the_api_s_to_replace() -> None:
    store = MemoryRepository(A2AAgentsJoined)
    joined, _ = replica(store, [A2AAgent("poet", CARD)])
    with pytest.raises(Conflict, match="one of this app's own agents"):
        await joined.join("poet", A2AAgentJoin(card_url=CARD))
