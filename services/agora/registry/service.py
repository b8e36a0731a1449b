"""CapabilityRegistry: the durable, replicated registry of capability profiles.

Registrations (a profile and, when it has a lease, when it runs out) are stored under
`market:capability:<agent_id>` and their ids under the `market:capability-index:all:<00-15>`
keys (the in-memory and Redis stores have no query API); each replica answers `filter_capable`
from its in-memory `CapabilityIndex`, warmed by `load_all` and kept current by
`registry.changed` notifications from the other replicas.

A registration with a lease lives until the lease runs out unless it is renewed (registered
again): an agent whose runtime is gone stops being offered tasks. Every replica drops expired
agents from its index (`expire`); the state store drops the stored registration itself (TTL).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
from datetime import UTC, datetime, timedelta
from itertools import islice

from pydantic import BaseModel, ValidationError

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
LEASE_GRACE_SECONDS = 60
"""The state store keeps an expired registration this much longer than its lease (replicas
have dropped it from their index by then), so a slow renewal never races the store's TTL."""
RENEWAL_GRACE_SECONDS = 30.0
"""A replica that just started keeps every lease for at least this long: while it was down,
runtimes could not renew (their sidecars may even hold calls back for a while with an open
circuit breaker), so a lease that ran out meanwhile is no sign that its agent is gone."""


class AgentRegistration(BaseModel):
    """What the registry stores per agent."""

    profile: CapabilityProfile
    expires_at: datetime | None = None
    """When the lease runs out (None: registered until deregistered)."""

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


class CapabilityRegistry:
    def __init__(
        self,
        profiles: StateRepository[AgentRegistration],
        index: StatusIndex,
        publisher: Publisher,
        broadcast_pubsub: str,
        max_candidates: int = DEFAULT_MAX_CANDIDATES,
        renewal_grace_seconds: float = RENEWAL_GRACE_SECONDS,
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
        self._loaded_etags: dict[str, str] = {}
        """The stored version each cached registration was read from: a reload validates only
        registrations that changed since."""
        self._expiry: dict[str, datetime] = {}
        self._expiry_heap: list[tuple[datetime, str]] = []
        self._leases_kept_until = datetime.now(UTC) + timedelta(seconds=renewal_grace_seconds)

    @classmethod
    def from_context(
        cls, ctx: ServiceContext, max_candidates: int = DEFAULT_MAX_CANDIDATES
    ) -> CapabilityRegistry:
        return cls(
            ctx.repository(PROFILE_NAMESPACE, AgentRegistration),
            StatusIndex(ctx.repository(INDEX_NAMESPACE, IdSet)),
            ctx.publisher,
            ctx.settings.broadcast_pubsub,
            max_candidates,
        )

    async def register(
        self, profile: CapabilityProfile, lease_seconds: int | None = None
    ) -> CapabilityProfile:
        """Register or update a profile (with a lease: register again to renew it). The id
        goes into the index before the profile is written, so a crash in between leaves a
        dangling id (skipped on load), never an unindexed profile; a write that fails takes
        the id out again, so a refused registration leaves nothing behind."""
        with self._tracer.start_as_current_span(
            "registry.register",
            attributes={"agent_id": profile.agent_id, "agora.lease_s": lease_seconds or 0},
        ):
            now = datetime.now(UTC)
            expires_at = now + timedelta(seconds=lease_seconds) if lease_seconds else None
            registration = AgentRegistration(profile=profile, expires_at=expires_at)
            existed = self._cache.get(profile.agent_id) is not None
            await self._index.move(profile.agent_id, None, ALL)
            try:
                await self._profiles.save(
                    profile.agent_id,
                    registration,
                    ttl_seconds=lease_seconds + LEASE_GRACE_SECONDS if lease_seconds else None,
                )
            except Exception:
                if not existed:
                    await self._index.discard(profile.agent_id, ALL)
                raise
            self._install(registration)
            self._note_change(profile.agent_id)
            await self._announce(profile.agent_id, RegistryChange.REGISTERED)
            return profile

    async def deregister(self, agent_id: str) -> bool:
        with self._tracer.start_as_current_span("registry.deregister", attributes={"agent_id": agent_id}):
            existed = await self._profiles.get(agent_id) is not None
            await self._profiles.delete(agent_id)
            await self._index.discard(agent_id, ALL)
            self._uninstall(agent_id)
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
        """Reload every registration from durable state into the in-memory index. A stored
        registration unchanged since it was last read (same etag) is not parsed again; one
        that no longer validates is skipped with a warning."""
        async with self._loading:
            with self._tracer.start_as_current_span("registry.load_all") as span:
                changed: set[str] = set()
                self._changed_while_loading = changed
                now = datetime.now(UTC)
                try:
                    ids = await self._index.list(ALL)
                    stored = await self._profiles.get_many_raw(ids)
                    current: dict[str, AgentRegistration] = {}
                    etags: dict[str, str] = {}
                    parsed = invalid = 0
                    for agent_id, (raw, etag) in stored.items():
                        known = self._cache.get(agent_id)
                        if (
                            known is not None
                            and etag is not None
                            and self._loaded_etags.get(agent_id) == etag
                        ):
                            current[agent_id] = AgentRegistration(
                                profile=known, expires_at=self._expiry.get(agent_id)
                            )
                        else:
                            try:
                                current[agent_id] = AgentRegistration.model_validate(raw)
                                parsed += 1
                            except ValidationError as exc:
                                invalid += 1
                                log.warning(
                                    "stored registration does not validate; skipped",
                                    extra={"agent_id": agent_id, "errors": exc.error_count()},
                                )
                                continue
                        if etag is not None:
                            etags[agent_id] = etag
                    live = {a: r for a, r in current.items() if not self._lapsed(r, now)}
                    self._cache.replace_all(r.profile for r in live.values())
                    self._loaded_etags = etags
                    self._expiry = {}
                    self._expiry_heap = []
                    for registration in live.values():
                        self._track_expiry(registration)
                finally:
                    self._changed_while_loading = None
                for agent_id in sorted(changed):
                    await self._refresh(agent_id)
                span.set_attribute("agora.registered_agents", len(self._cache))
                span.set_attribute("agora.parsed_registrations", parsed)
            log.info(
                "registry loaded",
                extra={"agents": len(self._cache), "parsed": parsed, "invalid": invalid,
                       "dangling_ids": len(ids) - len(stored)},
            )  # fmt: skip
            return len(self._cache)

    def expire(self, now: datetime | None = None) -> list[str]:
        """Drop agents whose lease ran out from the in-memory index; their ids."""
        now = now or datetime.now(UTC)
        dropped = []
        while self._expiry_heap and self._expiry_heap[0][0] <= now:
            at, agent_id = heapq.heappop(self._expiry_heap)
            if self._expiry.get(agent_id) == at:
                self._uninstall(agent_id)
                dropped.append(agent_id)
        if dropped:
            log.info("agent leases ran out", extra={"agent_ids": dropped})
        return dropped

    def seconds_to_next_expiry(self, now: datetime | None = None) -> float:
        if not self._expiry_heap:
            return math.inf
        return max(0.0, (self._expiry_heap[0][0] - (now or datetime.now(UTC))).total_seconds())

    def _lapsed(self, registration: AgentRegistration, now: datetime) -> bool:
        return registration.expired(now) and now >= self._leases_kept_until

    def _install(self, registration: AgentRegistration) -> None:
        if self._lapsed(registration, datetime.now(UTC)):
            self._uninstall(registration.profile.agent_id)
            return
        self._cache.upsert(registration.profile)
        self._track_expiry(registration)

    def _track_expiry(self, registration: AgentRegistration) -> None:
        agent_id = registration.profile.agent_id
        if registration.expires_at is None:
            self._expiry.pop(agent_id, None)
            return
        expires_at = max(registration.expires_at, self._leases_kept_until)
        self._expiry[agent_id] = expires_at
        heapq.heappush(self._expiry_heap, (expires_at, agent_id))

    def _uninstall(self, agent_id: str) -> None:
        self._cache.remove(agent_id)
        self._expiry.pop(agent_id, None)
        self._loaded_etags.pop(agent_id, None)

    async def apply_change(self, change: RegistryChanged) -> None:
        """Bring the local index in line with the stored profile (the notification only says
        which agent changed), so replays and reordering are harmless."""
        await self._refresh(change.agent_id)
        self._note_change(change.agent_id)

    async def _refresh(self, agent_id: str) -> None:
        stored = await self._profiles.get(agent_id)
        if stored is None:
            self._uninstall(agent_id)
        else:
            self._install(stored.value)
            if stored.etag is not None and agent_id in self._cache:
                self._loaded_etags[agent_id] = stored.etag

    def _note_change(self, agent_id: str) -> None:
        if self._changed_while_loading is not None:
            self._changed_while_loading.add(agent_id)

    async def _announce(self, agent_id: str, change: RegistryChange) -> None:
        await self._publisher.publish(
            Topic.REGISTRY_CHANGED,
            RegistryChanged(agent_id=agent_id, change=change),
            pubsub=self._broadcast,
        )
