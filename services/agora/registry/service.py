"""CapabilityRegistry: the durable, replicated registry of capability profiles.

Profiles are stored under `market:capability:<agent_id>` and their ids under the
`market:capability-index:all:<00-15>` keys (the in-memory and Redis stores have no query API); each
replica answers `filter_capable` from its in-memory `CapabilityIndex`, warmed by `load_all`
and kept current by `registry.changed` notifications from the other replicas.
"""

from __future__ import annotations

import asyncio
import logging
from itertools import islice

from agora.core.capability_index import CapabilityIndex
from agora.core.messages import RegistryChange, RegistryChanged, Topic
from agora.core.models import CapabilityProfile
from agora.runtime.pubsub import Publisher
from agora.runtime.service import ServiceContext
from agora.runtime.state import StateRepository
from agora.runtime.status_index import IdSet, StatusIndex
from agora.runtime.tracing import tracer

log = logging.getLogger(__name__)

PROFILE_NAMESPACE = "market:capability"
INDEX_NAMESPACE = "market:capability-index"
ALL = "all"
DEFAULT_MAX_CANDIDATES = 5


class CapabilityRegistry:
    def __init__(
        self,
        profiles: StateRepository[CapabilityProfile],
        index: StatusIndex,
        publisher: Publisher,
        broadcast_pubsub: str,
        max_candidates: int = DEFAULT_MAX_CANDIDATES,
    ) -> None:
        if max_candidates < 1:
            raise ValueError("max_candidates must be at least 1")
        self._profiles = profiles
        self._index = index
        self._publisher = publisher
        self._broadcast = broadcast_pubsub
        self.max_candidates = max_candidates
        self._cache = CapabilityIndex()
        self._tracer = tracer("agora.registry")
        self._loading = asyncio.Lock()
        self._changed_while_loading: set[str] | None = None
        """Agents changed while `load_all` reads its snapshot: re-read after it is installed,
        so a change racing a reload is not rolled back to the older snapshot."""

    @classmethod
    def from_context(
        cls, ctx: ServiceContext, max_candidates: int = DEFAULT_MAX_CANDIDATES
    ) -> CapabilityRegistry:
        return cls(
            ctx.repository(PROFILE_NAMESPACE, CapabilityProfile),
            StatusIndex(ctx.repository(INDEX_NAMESPACE, IdSet)),
            ctx.publisher,
            ctx.settings.broadcast_pubsub,
            max_candidates,
        )

    async def register(self, profile: CapabilityProfile) -> CapabilityProfile:
        """Register or update a profile. The id goes into the index before the profile is
        written, so a crash in between leaves a dangling id (skipped on load), never an
        unindexed profile."""
        with self._tracer.start_as_current_span(
            "registry.register", attributes={"agent_id": profile.agent_id}
        ):
            await self._index.move(profile.agent_id, None, ALL)
            await self._profiles.save(profile.agent_id, profile)
            self._cache.upsert(profile)
            self._note_change(profile.agent_id)
            await self._announce(profile.agent_id, RegistryChange.REGISTERED)
            return profile

    async def deregister(self, agent_id: str) -> bool:
        with self._tracer.start_as_current_span("registry.deregister", attributes={"agent_id": agent_id}):
            existed = await self._profiles.get(agent_id) is not None
            await self._profiles.delete(agent_id)
            await self._index.discard(agent_id, ALL)
            self._cache.remove(agent_id)
            self._note_change(agent_id)
            await self._announce(agent_id, RegistryChange.DEREGISTERED)
            return existed

    def filter_capable(
        self, required_skills: list[str], preferred_skills: list[str], limit: int | None = None
    ) -> list[CapabilityProfile]:
        """Agents having every required skill, most preferred matches first, ties by agent_id,
        at most `limit` (default `max_candidates`)."""
        cap = limit or self.max_candidates
        with self._tracer.start_as_current_span(
            "registry.filter_capable",
            attributes={
                "agora.required_skills": required_skills,
                "agora.preferred_skills": preferred_skills,
                "agora.registered_agents": len(self._cache),
            },
        ) as span:
            found = self._cache.filter_capable(required_skills, preferred_skills, cap)
            span.set_attribute("agora.num_candidates", len(found))
            return found

    def filtered_out(self, kept: list[CapabilityProfile], limit: int = 100) -> tuple[list[str], int]:
        """Registered agents a filter did not keep: up to `limit` of their ids, and how many."""
        kept_ids = {p.agent_id for p in kept}
        sample = list(islice((p.agent_id for p in self._cache if p.agent_id not in kept_ids), limit))
        return sample, len(self._cache) - len(kept_ids)

    def list_agents(self) -> list[CapabilityProfile]:
        return sorted(self._cache, key=lambda p: p.agent_id)

    def get(self, agent_id: str) -> CapabilityProfile | None:
        return self._cache.get(agent_id)

    async def load_all(self) -> int:
        """Reload every profile from durable state into the in-memory index."""
        async with self._loading:
            with self._tracer.start_as_current_span("registry.load_all") as span:
                changed: set[str] = set()
                self._changed_while_loading = changed
                try:
                    ids = await self._index.list(ALL)
                    found = await self._profiles.get_many(ids)
                    self._cache.replace_all(v.value for v in found.values())
                finally:
                    self._changed_while_loading = None
                for agent_id in sorted(changed):
                    await self._refresh(agent_id)
                span.set_attribute("agora.registered_agents", len(self._cache))
            log.info(
                "registry loaded", extra={"agents": len(self._cache), "dangling_ids": len(ids) - len(found)}
            )
            return len(self._cache)

    async def apply_change(self, change: RegistryChanged) -> None:
        """Bring the local index in line with the stored profile (the notification only says
        which agent changed), so replays and reordering are harmless."""
        await self._refresh(change.agent_id)
        self._note_change(change.agent_id)

    async def _refresh(self, agent_id: str) -> None:
        stored = await self._profiles.get(agent_id)
        if stored is None:
            self._cache.remove(agent_id)
        else:
            self._cache.upsert(stored.value)

    def _note_change(self, agent_id: str) -> None:
        if self._changed_while_loading is not None:
            self._changed_while_loading.add(agent_id)

    async def _announce(self, agent_id: str, change: RegistryChange) -> None:
        await self._publisher.publish(
            Topic.REGISTRY_CHANGED,
            RegistryChanged(agent_id=agent_id, change=change),
            pubsub=self._broadcast,
        )
