"""The market's outcome count: `N` of the UCB bonus `sqrt(2 ln max(2, N) / max(1, n_i))`, the
outcomes applied across every agent, which no single `Reputation` actor knows.

Each actor notes its agent's total after it applies outcomes (`note`). The totals live in plain
state keys, spread over `shards` keys by agent id so no value grows with the whole market; `N`
is their sum (`total`, one bulk read). A note carries the agent's whole total and the stored
value is the larger of the two, so a note repeated (a retried call) or late (overtaken by a
newer one) changes nothing, and a note lost to a failure is made good by the agent's next one;
until then `N` runs short by the outcomes not noted.

Notes are group-committed, as the status index's moves are: every note waits for the write
that contains it, and the notes queued since the last write go together, one bulk read of the
shards they touch and one state transaction guarded by those shards' etags. A write that loses
an etag race to another replica is redone from a fresh read (taking the larger total is safe to
redo). A shard that does not exist yet is first created empty by a write the store refuses over
an existing key.
"""

from __future__ import annotations

import asyncio
import logging
import random
import zlib
from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from agora.runtime.batching import group_commit
from agora.runtime.sidecar import DaprError
from agora.runtime.state import ConcurrencyConflict, StateRepository, Versioned

log = logging.getLogger(__name__)

NAMESPACE = "reputation:outcomes"
DEFAULT_SHARDS = 16
WRITE_ATTEMPTS = 10


class AgentTotals(BaseModel):
    """One shard: the outcomes applied to each of its agents."""

    totals: dict[str, int] = Field(default_factory=dict)


class MarketOutcomes:
    """Every agent's outcome total, and their sum `N`."""

    def __init__(self, repository: StateRepository[AgentTotals], shards: int = DEFAULT_SHARDS) -> None:
        if shards < 1:
            raise ValueError("at least one shard")
        self._repository = repository
        self._shards = shards
        self._notes = group_commit(self._write, "market outcome count writer")

    def _shard(self, agent_id: str) -> str:
        return f"{zlib.crc32(agent_id.encode()) % self._shards:02d}"

    async def note(self, agent_id: str, total: int) -> None:
        """Record that `agent_id` has had `total` outcomes applied (kept only if larger)."""
        if total < 0:
            raise ValueError(f"an outcome total is zero or more, not {total}")
        await self._notes.submit((agent_id, total))

    async def total(self) -> int:
        """`N`: the outcomes noted across every agent."""
        found = await self._repository.get_many(f"{shard:02d}" for shard in range(self._shards))
        return sum(sum(shard.value.totals.values()) for shard in found.values())

    async def _write(self, batch: Sequence[tuple[str, int]]) -> None:
        keys = sorted({self._shard(agent_id) for agent_id, _ in batch})
        for attempt in range(WRITE_ATTEMPTS):
            current = await self._repository.get_many(keys)
            absent = [key for key in keys if key not in current]
            if absent:
                await asyncio.gather(*(self._create(key) for key in absent))
                continue
            changed = _merged(batch, current, self._shard)
            if not changed:
                return
            try:
                await self._repository.transact(
                    {key: AgentTotals(totals=totals) for key, totals in changed.items()},
                    etags={key: _etag(key, current[key]) for key in changed},
                )
                return
            except DaprError as exc:
                log.debug("outcome count write conflicted; retrying", extra={"reason": str(exc)})
            await asyncio.sleep(random.uniform(0, 0.01 * 2**attempt))
        raise ConcurrencyConflict(f"market outcome count: gave up after {WRITE_ATTEMPTS} conflicting writes")

    async def _create(self, key: str) -> None:
        try:
            await self._repository.save(key, AgentTotals(), only_if_absent=True)
        except DaprError as exc:  # another writer created it meanwhile
            log.debug("outcome count shard not created; reading it again", extra={"reason": str(exc)})


def _merged(
    batch: Sequence[tuple[str, int]],
    current: dict[str, Versioned[AgentTotals]],
    shard_of: Callable[[str], str],
) -> dict[str, dict[str, int]]:
    """The shards whose totals the batch raises, with their new totals."""
    changed: dict[str, dict[str, int]] = {}
    for agent_id, total in batch:
        key = shard_of(agent_id)
        totals = changed.get(key) or current[key].value.totals
        if total > totals.get(agent_id, 0):
            changed[key] = {**totals, agent_id: total}
    return changed


def _etag(key: str, found: Versioned[AgentTotals]) -> str:
    if found.etag is None:
        raise ConcurrencyConflict(f"the state store gave no etag for outcome count shard {key}")
    return found.etag
