"""The registry's in-memory index against its stored registrations: a reload racing a
registration must not roll it back, a reload parses only what changed, every registration has a
lease and leases run out, and a registration the store refused leaves nothing behind."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from agora.core.messages import DEFAULT_LEASE_SECONDS
from agora.core.models import CapabilityProfile
from agora.registry.service import LEASE_GRACE_SECONDS, AgentRegistration, CapabilityRegistry
from agora.runtime.state import Versioned
from agora.sdk.testing import RecordingPublisher


def profile(agent_id: str) -> CapabilityProfile:
    return CapabilityProfile(agent_id=agent_id, agent_name=agent_id, skill_tags=["search"])


class Profiles:
    """A state repository whose bulk read can be held mid-way, like a slow state store; every
    save gets a new etag, as in a real store."""

    def __init__(self, *, hold: bool = True) -> None:
        self.stored: dict[str, tuple[dict[str, Any], str]] = {}
        self.read_started = asyncio.Event()
        self.release = asyncio.Event()
        if not hold:
            self.release.set()
        self.fail_saves = False
        self.ttls: dict[str, int | None] = {}
        self._version = 0

    async def get(self, item_id: str) -> Versioned[AgentRegistration] | None:
        found = self.stored.get(item_id)
        return Versioned(AgentRegistration.model_validate(found[0]), found[1]) if found else None

    async def get_many_raw(self, item_ids: Any) -> dict[str, tuple[Any, str | None]]:
        snapshot: dict[str, tuple[Any, str | None]] = {
            i: self.stored[i] for i in item_ids if i in self.stored
        }
        self.read_started.set()
        await self.release.wait()
        return snapshot

    async def save(self, item_id: str, value: AgentRegistration, **options: Any) -> None:
        if self.fail_saves:
            raise RuntimeError("state store unavailable")
        self._version += 1
        self.stored[item_id] = (value.model_dump(mode="json"), str(self._version))
        self.ttls[item_id] = options.get("ttl_seconds")

    async def update(
        self,
        item_id: str,
        change: Callable[[AgentRegistration | None], AgentRegistration | None],
        *,
        ttl_seconds: Callable[[AgentRegistration], int | None] | None = None,
    ) -> AgentRegistration | None:
        found = await self.get(item_id)
        changed = change(found.value if found else None)
        if changed is None or (found is not None and changed == found.value):
            return changed
        await self.save(item_id, changed, ttl_seconds=ttl_seconds(changed) if ttl_seconds else None)
        return changed

    async def delete(self, item_id: str, **_: Any) -> None:
        self.stored.pop(item_id, None)


def registration(agent_id: str) -> AgentRegistration:
    return AgentRegistration(profile=profile(agent_id))


class Index:
    def __init__(self) -> None:
        self.ids: set[str] = set()

    async def list(self, status: str) -> list[str]:
        return sorted(self.ids)

    async def move(self, item_id: str, old: str | None, new: str) -> None:
        self.ids.add(item_id)

    async def discard(self, item_id: str, status: str) -> None:
        self.ids.discard(item_id)


async def test_a_registration_during_a_reload_survives_it() -> None:
    profiles, index = Profiles(), Index()
    registry = CapabilityRegistry(profiles, index, RecordingPublisher(), "broadcast")  # type: ignore[arg-type]
    await profiles.save("old", registration("old"))
    await index.move("old", None, "all")

    reload = asyncio.create_task(registry.load_all())
    await profiles.read_started.wait()  # the snapshot holds "old" only
    await registry.register(profile("new"))
    profiles.release.set()
    await reload

    assert sorted(p.agent_id for p in registry.list_agents()) == ["new", "old"]


async def test_a_deregistration_during_a_reload_survives_it() -> None:
    profiles, index = Profiles(), Index()
    registry = CapabilityRegistry(profiles, index, RecordingPublisher(), "broadcast")  # type: ignore[arg-type]
    for agent_id in ("stays", "leaves"):
        await profiles.save(agent_id, registration(agent_id))
        await index.move(agent_id, None, "all")

    reload = asyncio.create_task(registry.load_all())
    await profiles.read_started.wait()  # the snapshot still holds "leaves"
    await registry.deregister("leaves")
    profiles.release.set()
    await reload

    assert [p.agent_id for p in registry.list_agents()] == ["stays"]


async def test_a_reload_parses_only_registrations_that_changed(monkeypatch: Any) -> None:
    profiles, index = Profiles(hold=False), Index()
    registry = CapabilityRegistry(profiles, index, RecordingPublisher(), "broadcast")  # type: ignore[arg-type]
    for agent_id in ("a", "b", "c"):
        await profiles.save(agent_id, registration(agent_id))
        await index.move(agent_id, None, "all")
    await registry.load_all()
    parsed: list[Any] = []
    original = AgentRegistration.model_validate

    def counting(value: Any, **kwargs: Any) -> AgentRegistration:
        parsed.append(value)
        return original(value, **kwargs)

    monkeypatch.setattr(AgentRegistration, "model_validate", counting)
    await registry.load_all()
    assert parsed == []  # nothing changed: nothing parsed again
    await profiles.save("b", AgentRegistration(profile=profile("b").model_copy(update={"agent_name": "B"})))
    await registry.load_all()
    changed = registry.get("b")
    assert len(parsed) == 1 and changed is not None and changed.agent_name == "B"


async def test_a_stored_registration_that_no_longer_validates_is_skipped() -> None:
    profiles, index = Profiles(hold=False), Index()
    registry = CapabilityRegistry(profiles, index, RecordingPublisher(), "broadcast")  # type: ignore[arg-type]
    await profiles.save("good", registration("good"))
    tags = [f"s{i}" for i in range(200_000)]
    profiles.stored["huge"] = (
        {"profile": {"agent_id": "huge", "agent_name": "huge", "skill_tags": tags}},
        "9",
    )
    for agent_id in ("good", "huge"):
        await index.move(agent_id, None, "all")
    started = asyncio.get_running_loop().time()
    assert await registry.load_all() == 1
    assert asyncio.get_running_loop().time() - started < 5  # linear, not quadratic, in the tag count
    assert [p.agent_id for p in registry.list_agents()] == ["good"]


async def test_an_agent_whose_lease_runs_out_is_no_longer_offered() -> None:
    profiles, index = Profiles(hold=False), Index()
    registry = CapabilityRegistry(profiles, index, RecordingPublisher(), "broadcast", renewal_grace_seconds=0)  # type: ignore[arg-type]
    await registry.register(profile("leased"), lease_seconds=30)
    await registry.register(profile("default-lease"))
    assert {p.agent_id for p in registry.filter_capable(["search"], [])} == {"leased", "default-lease"}
    later = datetime.now(UTC) + timedelta(seconds=31)
    assert registry.seconds_to_next_change() <= 30
    assert registry.expire(later) == ["leased"]
    assert [p.agent_id for p in registry.filter_capable(["search"], [])] == ["default-lease"]
    assert registry.expire(datetime.now(UTC) + timedelta(seconds=DEFAULT_LEASE_SECONDS + 1)) == [
        "default-lease"
    ]


async def test_every_registration_has_a_lease_and_a_store_ttl_to_match() -> None:
    profiles, index = Profiles(hold=False), Index()
    registry = CapabilityRegistry(profiles, index, RecordingPublisher(), "broadcast")  # type: ignore[arg-type]
    before = datetime.now(UTC)
    answer = await registry.register(profile("agent"))
    assert answer.lease_expires_at is not None
    lease = (answer.lease_expires_at - before).total_seconds()
    assert DEFAULT_LEASE_SECONDS <= lease < DEFAULT_LEASE_SECONDS + 5
    assert profiles.ttls["agent"] == DEFAULT_LEASE_SECONDS + LEASE_GRACE_SECONDS
    listed = registry.get("agent")
    assert listed is not None and listed.lease_expires_at == answer.lease_expires_at


async def test_a_registration_stored_without_a_lease_still_loads() -> None:
    profiles, index = Profiles(hold=False), Index()
    await profiles.save("old-timer", registration("old-timer"))  # stored before leases were required
    await index.move("old-timer", None, "all")
    registry = CapabilityRegistry(profiles, index, RecordingPublisher(), "broadcast")  # type: ignore[arg-type]
    assert await registry.load_all() == 1
    listed = registry.get("old-timer")
    assert listed is not None and listed.lease_expires_at is None
    await registry.register(profile("old-timer"))  # registered again: leased from now on
    renewed = registry.get("old-timer")
    assert renewed is not None and renewed.lease_expires_at is not None


async def test_a_replica_that_just_started_gives_runtimes_time_to_renew() -> None:
    profiles, index = Profiles(hold=False), Index()
    lapsed = AgentRegistration(profile=profile("late"), expires_at=datetime.now(UTC) - timedelta(seconds=5))
    await profiles.save("late", lapsed)
    await index.move("late", None, "all")
    registry = CapabilityRegistry(
        profiles,  # type: ignore[arg-type]
        index,  # type: ignore[arg-type]
        RecordingPublisher(),  # type: ignore[arg-type]
        "broadcast",
        renewal_grace_seconds=30,
    )
    await registry.load_all()
    assert registry.get("late") is not None and registry.expire() == []
    assert registry.expire(datetime.now(UTC) + timedelta(seconds=31)) == ["late"]


async def test_a_renewed_lease_outlives_the_first_one() -> None:
    profiles, index = Profiles(hold=False), Index()
    registry = CapabilityRegistry(profiles, index, RecordingPublisher(), "broadcast")  # type: ignore[arg-type]
    await registry.register(profile("agent"), lease_seconds=10)
    await registry.register(profile("agent"), lease_seconds=60)
    assert registry.expire(datetime.now(UTC) + timedelta(seconds=30)) == []
    assert registry.get("agent") is not None


async def test_a_registration_the_store_refused_leaves_nothing_behind() -> None:
    profiles, index = Profiles(hold=False), Index()
    registry = CapabilityRegistry(profiles, index, RecordingPublisher(), "broadcast")  # type: ignore[arg-type]
    profiles.fail_saves = True
    with contextlib.suppress(RuntimeError):
        await registry.register(profile("refused"))
    assert index.ids == set() and registry.get("refused") is None
