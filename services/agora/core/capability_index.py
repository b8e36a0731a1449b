"""Capability-first filtering (COALESCE): an inverted skill index answering `filter_capable`.

Ranking contract: agents having every required skill, ordered by the number of preferred
skills they have (more first), ties broken by `agent_id` ascending, capped at `limit`. The
tie-break makes the answer a function of the registered set alone, so two replicas that
learnt the same registrations in a different order answer identically.

Layout. Most agents live in a *base* segment whose slots are sorted by `agent_id`; each skill
maps to a bitmap (a Python int) over those slots, so intersecting required skills is a
handful of word-parallel ANDs and the lowest set bits are the smallest ids. Writes go to a
small unsorted *delta* (scanned linearly at query time) and tombstone the agent's base slot;
when the delta outgrows `delta_limit` or tombstones pile up, the base is rebuilt, so a write
costs O(n / delta_limit) amortised and a query costs O(n / 64) word operations plus the delta.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from agora.core.models import CapabilityProfile

DEFAULT_DELTA_LIMIT = 256


class CapabilityIndex:
    def __init__(self, delta_limit: int = DEFAULT_DELTA_LIMIT) -> None:
        if delta_limit < 1:
            raise ValueError("delta_limit must be at least 1")
        self._delta_limit = delta_limit
        self._profiles: dict[str, CapabilityProfile] = {}
        self._skills: dict[str, frozenset[str]] = {}
        # Base segment: slot i holds _base_ids[i]; bitmaps are over slots.
        self._base_ids: list[str] = []
        self._base_slot: dict[str, int] = {}
        self._skill_bits: dict[str, int] = {}
        self._live_bits = 0
        self._tombstones = 0
        self._delta: set[str] = set()

    def __len__(self) -> int:
        return len(self._profiles)

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._profiles

    def __iter__(self) -> Iterator[CapabilityProfile]:
        return iter(self._profiles.values())

    def get(self, agent_id: str) -> CapabilityProfile | None:
        return self._profiles.get(agent_id)

    def upsert(self, profile: CapabilityProfile) -> None:
        agent_id = profile.agent_id
        self._retire_from_base(agent_id)
        self._profiles[agent_id] = profile
        self._skills[agent_id] = frozenset(profile.skill_tags)
        self._delta.add(agent_id)
        self._compact_if_due()

    def remove(self, agent_id: str) -> bool:
        if agent_id not in self._profiles:
            return False
        self._retire_from_base(agent_id)
        self._delta.discard(agent_id)
        del self._profiles[agent_id]
        del self._skills[agent_id]
        self._compact_if_due()
        return True

    def replace_all(self, profiles: Iterable[CapabilityProfile]) -> None:
        """Swap the whole content in one rebuild (used when warming from durable state)."""
        self._profiles = {p.agent_id: p for p in profiles}
        self._skills = {agent_id: frozenset(p.skill_tags) for agent_id, p in self._profiles.items()}
        self._rebuild()

    def filter_capable(
        self, required_skills: Iterable[str], preferred_skills: Iterable[str], limit: int
    ) -> list[CapabilityProfile]:
        required = list(dict.fromkeys(required_skills))
        preferred = list(dict.fromkeys(preferred_skills))
        if limit <= 0 or not self._profiles:
            return []
        ranked = self._rank_base(required, preferred, limit) + self._rank_delta(required, preferred)
        ranked.sort()
        return [self._profiles[agent_id] for _, agent_id in ranked[:limit]]

    def _rank_base(self, required: list[str], preferred: list[str], limit: int) -> list[tuple[int, str]]:
        candidates = self._live_bits
        # Rarest skill first: the AND chain empties out as early as possible.
        for skill in sorted(required, key=lambda s: self._skill_bits.get(s, 0).bit_count()):
            candidates &= self._skill_bits.get(skill, 0)
            if not candidates:
                return []
        found: list[tuple[int, str]] = []
        for matches, bucket in self._buckets_by_preferred_matches(candidates, preferred):
            while bucket and len(found) < limit:
                lowest = bucket & -bucket
                found.append((-matches, self._base_ids[lowest.bit_length() - 1]))
                bucket ^= lowest
            if len(found) >= limit:
                break
        return found

    def _buckets_by_preferred_matches(
        self, candidates: int, preferred: list[str]
    ) -> Iterator[tuple[int, int]]:
        """Yield (match count, bitmap of candidates with exactly that count), highest count first.

        Counts are kept bit-sliced: `digits[j]` holds bit j of every candidate's count, updated
        by a ripple-carry add per preferred skill, so the whole population is counted with a few
        big-int operations instead of a loop over agents.
        """
        digits: list[int] = []
        for skill in preferred:
            carry = candidates & self._skill_bits.get(skill, 0)
            j = 0
            while carry:
                if j == len(digits):
                    digits.append(0)
                digits[j], carry = digits[j] ^ carry, digits[j] & carry
                j += 1
        remaining = candidates
        for matches in range(len(preferred), -1, -1):
            if not remaining:
                return
            if matches >> len(digits):
                continue  # no candidate reached this many matches
            bucket = remaining
            for j, digit in enumerate(digits):
                bucket &= digit if (matches >> j) & 1 else ~digit
            if bucket:
                remaining &= ~bucket
                yield matches, bucket

    def _rank_delta(self, required: list[str], preferred: list[str]) -> list[tuple[int, str]]:
        found: list[tuple[int, str]] = []
        for agent_id in self._delta:
            skills = self._skills[agent_id]
            if all(skill in skills for skill in required):
                found.append((-sum(skill in skills for skill in preferred), agent_id))
        return found

    def _retire_from_base(self, agent_id: str) -> None:
        slot = self._base_slot.pop(agent_id, None)
        if slot is not None:
            self._live_bits &= ~(1 << slot)
            self._tombstones += 1

    def _compact_if_due(self) -> None:
        if len(self._delta) > self._delta_limit or self._tombstones > max(
            self._delta_limit, len(self._base_ids) // 4
        ):
            self._rebuild()

    def _rebuild(self) -> None:
        ids = sorted(self._profiles)
        slot_bytes = (len(ids) + 7) // 8
        rows: dict[str, bytearray] = {}
        for slot, agent_id in enumerate(ids):
            byte, bit = slot >> 3, 1 << (slot & 7)
            for skill in self._skills[agent_id]:
                row = rows.get(skill)
                if row is None:
                    row = rows[skill] = bytearray(slot_bytes)
                row[byte] |= bit
        self._base_ids = ids
        self._base_slot = {agent_id: slot for slot, agent_id in enumerate(ids)}
        self._skill_bits = {skill: int.from_bytes(row, "little") for skill, row in rows.items()}
        self._live_bits = (1 << len(ids)) - 1
        self._tombstones = 0
        self._delta = set()
