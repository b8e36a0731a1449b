"""CapabilityRegistry: the durable, replicated registry of capability profiles.

Registrations (a profile, when its lease runs out, and its latest suspension) are stored under
`market:capability:<agent_id>` and their ids under the `market:capability-index:all:<00-15>`
keys (the in-memory and Redis stores have no query API); each replica answers `filter_capable`
from its in-memory `CapabilityIndex`, warmed by `load_all` and kept current by
`registry.changed` notifications from the other replicas.

Every registration has a lease (`DEFAULT_LEASE_SECONDS` unless the registration names one) and
lives until the lease runs out unless it is renewed (registered again): an agent whose runtime
is gone stops being offered tasks. Every replica drops expired agents from its index
(`expire`); the state store drops the stored registration itself (TTL).

An agent whose runtime let an award lapse is suspended from bidding for a backoff period
(`agora.core.suspension`): it stays listed, but `filter_capable` leaves it out until the
suspension ends (`end_suspensions`, on every replica). The suspension is stored on the
registration, so renewing the lease does not lift it.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
from datetime import UTC, datetime, timedelta
from itertools import chain, islice

from pydantic import BaseModel, ValidationError

from agora.core import topics
from agora.core.capability_index import CapabilityIndex
from agora.core.contracts import RegisteredAgent
from agora.core.limits import MAX_CANDIDATES, MAX_ITEMS
from agora.core.messages import DEFAULT_LEASE_SECONDS, AwardLapsed, RegistryChange, RegistryChanged
from agora.core.models import CapabilityProfile
from agora.core.suspension import Suspension, UnverifiedLapse, after_lapse
from agora.core.task_lifecycle import TaskRecord
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
    """When the lease runs out. Every registration made now has one; None is only read from a
    registration stored before leases were required (it lasts until deregistered)."""
    suspension: Suspension | None = None
    """The agent's latest suspension from bidding, kept after it ends to count further lapses."""

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def suspended(self, now: datetime) -> bool:
        return self.suspension is not None and self.suspension.in_effect(now)

    def listing(self, now: datetime) -> RegisteredAgent:
        """How the registry's API shows it: the profile, the lease and a suspension in effect."""
        suspension = self.suspension if self.suspended(now) else None
        return RegisteredAgent(
            **self.profile.model_dump(),
            lease_expires_at=self.expires_at,
            suspended_until=suspension.until if suspension else None,
            suspension_reason=suspension.reason if suspension else None,
        )

    def ttl_seconds(self, now: datetime) -> int | None:
        """The state TTL to store it with: the rest of its lease plus `LEASE_GRACE_SECONDS`."""
        if self.expires_at is None:
            return None
        return max(1, math.ceil((self.expires_at - now).total_seconds())) + LEASE_GRACE_SECONDS


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
        if not 1 <= max_candidates <= MAX_CANDIDATES:
            raise ValueError(f"max_candidates must be between 1 and {MAX_CANDIDATES}")
        self._profiles = profiles
        self._index = index
        self._publisher = publisher
        self._broadcast = broadcast_pubsub
        self.max_candidates = max_candidates
        self._registrations: dict[str, AgentRegistration] = {}
        """Every registration this replica lists (lease not run out), suspended ones too."""
        self._cache = CapabilityIndex()
        """The listed agents that may bid: all but the suspended ones."""
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
        self._suspension_heap: list[tuple[datetime, str]] = []
        """When each suspension ends (entries of replaced suspensions are skipped when popped)."""
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
        self, profile: CapabilityProfile, lease_seconds: int = DEFAULT_LEASE_SECONDS
    ) -> RegisteredAgent:
        """Register or update a profile for `lease_seconds` (register again to renew). A
        suspension the stored registration carries stays as it is. The id goes into the index
        before the profile is written, so a crash in between leaves a dangling id (skipped on
        load), never an unindexed profile; a write that fails takes the id out again, so a
        refused registration leaves nothing behind."""
        with self._tracer.start_as_current_span(
            "registry.register",
            attributes={"agent_id": profile.agent_id, "agora.lease_s": lease_seconds},
        ):
            now = datetime.now(UTC)
            expires_at = now + timedelta(seconds=lease_seconds)

            def renewed(stored: AgentRegistration | None) -> AgentRegistration:
                suspension = stored.suspension if stored is not None else None
                return AgentRegistration(profile=profile, expires_at=expires_at, suspension=suspension)

            existed = profile.agent_id in self._registrations
            await self._index.move(profile.agent_id, None, ALL)
            try:
                registration = await self._profiles.update(
                    profile.agent_id, renewed, ttl_seconds=lambda r: r.ttl_seconds(now)
                )
            except Exception:
                if not existed:
                    await self._index.discard(profile.agent_id, ALL)
                raise
            assert registration is not None
            self._install(registration)
            self._note_change(profile.agent_id)
            await self._announce(profile.agent_id, RegistryChange.REGISTERED)
            return registration.listing(now)

    async def deregister(self, agent_id: str) -> bool:
        with self._tracer.start_as_current_span("registry.deregister", attributes={"agent_id": agent_id}):
            existed = await self._profiles.get(agent_id) is not None
            await self._profiles.delete(agent_id)
            await self._index.discard(agent_id, ALL)
            self._uninstall(agent_id)
            self._note_change(agent_id)
            await self._announce(agent_id, RegistryChange.DEREGISTERED)
            return existed

    async def apply_lapse(self, lapse: AwardLapsed, record: TaskRecord) -> AgentRegistration | None:
        """Suspend the agent whose award lapsed, once the task's record (the task board's, the
        source of truth) bears the lapse out; `UnverifiedLapse` otherwise, a permanent error, so
        the notice is dead-lettered with the reason. The suspension is stored and announced, so
        every replica keeps the agent out of its filter. A notice about an agent no longer
        registered changes nothing (None); a repeated notice changes nothing either."""
        with self._tracer.start_as_current_span(
            "registry.apply_lapse", attributes={"agent_id": lapse.agent_id, "task_id": lapse.task_id}
        ) as span:
            disagreement = lapse.disagreement_with(record)
            if disagreement is not None:
                raise UnverifiedLapse(f"lapse refused: {disagreement}")
            lapsed_at = lapse.lapsed_at
            counted: list[Suspension] = []

            def suspended(stored: AgentRegistration | None) -> AgentRegistration | None:
                if stored is None:
                    return None
                suspension = after_lapse(stored.suspension, lapse.task_id, lapse.awarded_at, lapsed_at)
                if suspension is not stored.suspension:
                    counted.append(suspension)
                return stored.model_copy(update={"suspension": suspension})

            now = datetime.now(UTC)
            registration = await self._profiles.update(
                lapse.agent_id, suspended, ttl_seconds=lambda r: r.ttl_seconds(now)
            )
            if registration is None:
                log.info(
                    "an award lapsed for an agent no longer registered",
                    extra={"agent_id": lapse.agent_id, "task_id": lapse.task_id},
                )
                return None
            suspension = registration.suspension
            assert suspension is not None
            span.set_attribute("agora.suspended_until", suspension.until.isoformat())
            if counted:
                log.warning(
                    "agent suspended from bidding",
                    extra={"agent_id": lapse.agent_id, "task_id": lapse.task_id,
                           "until": suspension.until.isoformat(), "lapses": suspension.lapses},
                )  # fmt: skip
            # Announced even when the lapse was counted before: that earlier handling may have
            # stopped between its write and its announcement.
            self._install(registration)
            self._note_change(lapse.agent_id)
            await self._announce(lapse.agent_id, RegistryChange.SUSPENDED)
            return registration

    def filter_capable(
        self, required_skills: list[str], preferred_skills: list[str], limit: int | None = None
    ) -> list[CapabilityProfile]:
        """Agents having every required skill, most preferred matches first, ties by agent_id,
        at most `limit` (default `max_candidates`); suspended agents are left out."""
        cap = limit or self.max_candidates
        with self._tracer.start_as_current_span(
            "registry.filter_capable",
            attributes={
                "agora.required_skills": required_skills,
                "agora.preferred_skills": preferred_skills,
                "agora.registered_agents": len(self._registrations),
            },
        ) as span:
            found = self._cache.filter_capable(required_skills, preferred_skills, cap)
            span.set_attribute("agora.num_candidates", len(found))
            return found

    def filtered_out(self, kept: list[CapabilityProfile], limit: int = MAX_ITEMS) -> tuple[list[str], int]:
        """Registered agents a filter did not keep (suspended ones first): up to `limit` of
        their ids, and how many."""
        kept_ids = {p.agent_id for p in kept}
        suspended = (a for a in self._registrations if a not in self._cache)
        others = (p.agent_id for p in self._cache if p.agent_id not in kept_ids)
        sample = list(islice(chain(suspended, others), limit))
        return sample, len(self._registrations) - len(kept_ids)

    def list_agents(self) -> list[RegisteredAgent]:
        now = datetime.now(UTC)
        return [self._registrations[a].listing(now) for a in sorted(self._registrations)]

    def get(self, agent_id: str) -> RegisteredAgent | None:
        registration = self._registrations.get(agent_id)
        return registration.listing(datetime.now(UTC)) if registration is not None else None

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
                        known = self._registrations.get(agent_id)
                        if (
                            known is not None
                            and etag is not None
                            and self._loaded_etags.get(agent_id) == etag
                        ):
                            current[agent_id] = known
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
                    self._registrations = live
                    self._cache.replace_all(r.profile for r in live.values() if not r.suspended(now))
                    self._loaded_etags = etags
                    self._expiry = {}
                    self._expiry_heap = []
                    self._suspension_heap = []
                    for registration in live.values():
                        self._track_expiry(registration)
                        self._track_suspension(registration, now)
                finally:
                    self._changed_while_loading = None
                for agent_id in sorted(changed):
                    await self._refresh(agent_id)
                span.set_attribute("agora.registered_agents", len(self._registrations))
                span.set_attribute("agora.parsed_registrations", parsed)
            log.info(
                "registry loaded",
                extra={"agents": len(self._registrations),
                       "suspended": len(self._registrations) - len(self._cache),
                       "parsed": parsed, "invalid": invalid, "dangling_ids": len(ids) - len(stored)},
            )  # fmt: skip
            return len(self._registrations)

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

    def end_suspensions(self, now: datetime | None = None) -> list[str]:
        """Offer agents whose suspension ended for tasks again; their ids."""
        now = now or datetime.now(UTC)
        readmitted = []
        while self._suspension_heap and self._suspension_heap[0][0] <= now:
            at, agent_id = heapq.heappop(self._suspension_heap)
            registration = self._registrations.get(agent_id)
            if (
                registration is not None
                and registration.suspension is not None
                and registration.suspension.until == at
                and agent_id not in self._cache
            ):
                self._cache.upsert(registration.profile)
                readmitted.append(agent_id)
        if readmitted:
            log.info("agent suspensions ended", extra={"agent_ids": readmitted})
        return readmitted

    def seconds_to_next_change(self, now: datetime | None = None) -> float:
        """Until the next lease runs out or suspension ends (inf: none pending)."""
        now = now or datetime.now(UTC)
        due = [heap[0][0] for heap in (self._expiry_heap, self._suspension_heap) if heap]
        if not due:
            return math.inf
        return max(0.0, (min(due) - now).total_seconds())

    def _lapsed(self, registration: AgentRegistration, now: datetime) -> bool:
        return registration.expired(now) and now >= self._leases_kept_until

    def _install(self, registration: AgentRegistration) -> None:
        now = datetime.now(UTC)
        agent_id = registration.profile.agent_id
        if self._lapsed(registration, now):
            self._uninstall(agent_id)
            return
        self._registrations[agent_id] = registration
        if registration.suspended(now):
            self._cache.remove(agent_id)
            self._track_suspension(registration, now)
        else:
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

    def _track_suspension(self, registration: AgentRegistration, now: datetime) -> None:
        suspension = registration.suspension
        if suspension is not None and suspension.in_effect(now):
            heapq.heappush(self._suspension_heap, (suspension.until, registration.profile.agent_id))

    def _uninstall(self, agent_id: str) -> None:
        self._registrations.pop(agent_id, None)
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
            if stored.etag is not None and agent_id in self._registrations:
                self._loaded_etags[agent_id] = stored.etag

    def _note_change(self, agent_id: str) -> None:
        if self._changed_while_loading is not None:
            self._changed_while_loading.add(agent_id)

    async def _announce(self, agent_id: str, change: RegistryChange) -> None:
        await self._publisher.publish(
            topics.REGISTRY_CHANGED,
            RegistryChanged(agent_id=agent_id, change=change),
            pubsub=self._broadcast,
        )
