"""A registry reload racing a registration must not roll the registration back: the reload
installs a snapshot read before the registration was stored."""

from __future__ import annotations

import asyncio
from typing import Any

from agora.core.models import CapabilityProfile
from agora.registry.service import CapabilityRegistry
from agora.runtime.state import Versioned


def profile(agent_id: str) -> CapabilityProfile:
    return CapabilityProfile(agent_id=agent_id, agent_name=agent_id, skill_tags=["search"])


class Profiles:
    """A state repository whose bulk read can be held mid-way, like a slow state store."""

    def __init__(self) -> None:
        self.stored: dict[str, CapabilityProfile] = {}
        self.read_started = asyncio.Event()
        self.release = asyncio.Event()

    async def get(self, item_id: str) -> Versioned[CapabilityProfile] | None:
        found = self.stored.get(item_id)
        return Versioned(found, "1") if found else None

    async def get_many(self, item_ids: Any) -> dict[str, Versioned[CapabilityProfile]]:
        snapshot = {i: Versioned(self.stored[i], "1") for i in item_ids if i in self.stored}
        self.read_started.set()
        await self.release.wait()
        return snapshot

    async def save(self, item_id: str, value: CapabilityProfile, **_: Any) -> None:
        self.stored[item_id] = value

    async def delete(self, item_id: str, **_: Any) -> None:
        self.stored.pop(item_id, None)


class Index:
    def __init__(self) -> None:
        self.ids: set[str] = set()

    async def list(self, status: str) -> list[str]:
        return sorted(self.ids)

    async def move(self, item_id: str, old: str | None, new: str) -> None:
        self.ids.add(item_id)

    async def discard(self, item_id: str, status: str) -> None:
        self.ids.discard(item_id)


class Publisher:
    async def publish(self, *_: Any, **__: Any) -> None:
        return None


async def test_a_registration_during_a_reload_survives_it() -> None:
    profiles, index = Profiles(), Index()
    registry = CapabilityRegistry(profiles, index, Publisher(), "broadcast")  # type: ignore[arg-type]
    await profiles.save("old", profile("old"))
    await index.move("old", None, "all")

    reload = asyncio.create_task(registry.load_all())
    await profiles.read_started.wait()  # the snapshot holds "old" only
    await registry.register(profile("new"))
    profiles.release.set()
    await reload

    assert sorted(p.agent_id for p in registry.list_agents()) == ["new", "old"]


async def test_a_deregistration_during_a_reload_survives_it() -> None:
    profiles, index = Profiles(), Index()
    registry = CapabilityRegistry(profiles, index, Publisher(), "broadcast")  # type: ignore[arg-type]
    for agent_id in ("stays", "leaves"):
        await profiles.save(agent_id, profile(agent_id))
        await index.move(agent_id, None, "all")

    reload = asyncio.create_task(registry.load_all())
    await profiles.read_started.wait()  # the snapshot still holds "leaves"
    await registry.deregister("leaves")
    profiles.release.set()
    await reload

    assert [p.agent_id for p in registry.list_agents()] == ["stays"]
