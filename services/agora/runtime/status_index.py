"""Ids grouped by status in plain state keys: the listing a state store without a query API
cannot give. Each status's ids are spread over `shards` keys, so no single value grows with the
whole collection.

Moves are group-committed: every move waits for the write that contains it, and the index
writes all moves queued since its last write together, as one bulk read of the keys they touch
and one state transaction guarded by those keys' etags. An idle index writes a move at once (two
sidecar calls); under load, a hundred concurrent status changes still cost two calls, not four
each. A write that loses an etag race to another replica is redone from a fresh read; the
operations are set additions and removals, so redoing them is safe. A shard is never deleted,
only emptied: a key deleted and created again starts its etags afresh, so a writer holding one
from before could overwrite the new value. A shard that does not exist yet is first created
empty by a write the store refuses over an existing key.

The index is maintained after the owning record is saved. A failure in between leaves it stale
for that id until the owner is asked for the same change again (a redelivery, a caller's
retry): owners redo the index step then, since it is idempotent. Readers treat the index as a
hint and check the record itself.

Besides the statuses, an owner may keep a listing of every item ordered by creation (`add`,
`newest_first`), for listings that show every status newest first without reading every record
to sort them: it is the index's pseudo-status `all`, whose entries are `<creation time>|<id>`.
The time is fixed-width UTC and `|` never appears in an id (`ID_PATTERN`), so sorting the
entries sorts the items by creation.
"""

from __future__ import annotations

import asyncio
import logging
import random
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel

from agora.runtime.batching import group_commit
from agora.runtime.sidecar import DaprError
from agora.runtime.state import ConcurrencyConflict, StateRepository, Versioned

log = logging.getLogger(__name__)

DEFAULT_SHARDS = 16
WRITE_ATTEMPTS = 10
EVERY_STATUS = "all"
"""The pseudo-status under which `add` lists every item by creation: an owner that uses `add`
has no status of that name (the states of plans and debates and the statuses of escalations are
upper case)."""
CREATION_SEPARATOR = "|"


def creation_entry(item_id: str, created_at: datetime) -> str:
    """`item_id`'s entry in the creation-ordered listing: its creation time as a fixed-width UTC
    string (a time without a zone is taken as UTC), then the id."""
    utc = created_at.replace(tzinfo=UTC) if created_at.tzinfo is None else created_at.astimezone(UTC)
    stamp = utc.isoformat(timespec="microseconds").removesuffix("+00:00")  # years padded to four digits
    return f"{stamp}Z{CREATION_SEPARATOR}{item_id}"


def id_of_entry(entry: str) -> str:
    return entry.partition(CREATION_SEPARATOR)[2]


class IdSet(BaseModel):
    ids: list[str] = []


@dataclass(frozen=True)
class _Move:
    item_id: str
    old: str | None
    new: str | None


class StatusIndex:
    def __init__(
        self,
        repository: StateRepository[IdSet],
        shards: int = DEFAULT_SHARDS,
        ttl_seconds: Callable[[str], int | None] | None = None,
    ) -> None:
        self._repository = repository
        self._shards = shards
        self._ttl_seconds = ttl_seconds or (lambda status: None)
        """The state TTL of a status's keys, renewed by every write (None: kept), for listings
        that end on their own, such as those of one period."""
        self._moves = group_commit(self._write, "status index writer")

    def _key(self, status: str, item_id: str) -> str:
        return f"{status}:{zlib.crc32(item_id.encode()) % self._shards:02d}"

    async def move(self, item_id: str, old: str | None, new: str) -> None:
        if old != new:
            await self._commit(_Move(item_id, old, new))

    async def change(self, moves: Iterable[tuple[str, str | None, str | None]]) -> None:
        """Several moves, `(item, old status, new status)` with None for none, in one write."""
        batch = [_Move(item_id, old, new) for item_id, old, new in moves if old != new]
        if batch:
            await self._commit(*batch)

    async def add(self, item_id: str, status: str, created_at: datetime) -> None:
        """List a new item under its status and in the creation-ordered listing, in one write.
        Idempotent, so an owner that is not sure it listed the item may add it again."""
        await self._commit(
            _Move(item_id, None, status),
            _Move(creation_entry(item_id, created_at), None, EVERY_STATUS),
        )

    async def discard(self, item_id: str, status: str, created_at: datetime | None = None) -> None:
        """Take an item out of its status's listing and, given its creation time, out of the
        creation-ordered listing too."""
        moves = [_Move(item_id, status, None)]
        if created_at is not None:
            moves.append(_Move(creation_entry(item_id, created_at), EVERY_STATUS, None))
        await self._commit(*moves)

    async def newest_first(self) -> list[str]:
        """Every item added with `add` and not discarded since, the newest first."""
        return [id_of_entry(entry) for entry in reversed(await self.list(EVERY_STATUS))]

    async def newest_first_in(self, status: str) -> list[str]:
        """The items in `status`, the newest first; items in it that the creation-ordered
        listing lacks (listed before it existed) follow, by id."""
        in_status, by_creation = await asyncio.gather(self.list(status), self.newest_first())
        members = set(in_status)
        ordered = [item_id for item_id in by_creation if item_id in members]
        placed = set(ordered)
        return ordered + [item_id for item_id in in_status if item_id not in placed]

    async def list_all(self, statuses: Iterable[str]) -> list[str]:
        """The items listed under any of `statuses`, in one bulk read."""
        keys = [f"{status}:{shard:02d}" for status in statuses for shard in range(self._shards)]
        found = await self._repository.get_many(keys)
        return sorted({item_id for shard in found.values() for item_id in shard.value.ids})

    async def list(self, status: str) -> list[str]:
        return await self.list_all([status])

    async def _commit(self, *moves: _Move) -> None:
        await self._moves.submit_all(moves)

    async def _write(self, batch: Sequence[_Move]) -> None:
        keys = sorted(
            {self._key(status, m.item_id) for m in batch for status in (m.old, m.new) if status is not None}
        )
        for attempt in range(WRITE_ATTEMPTS):
            current = await self._repository.get_many(keys)
            changed = _apply(batch, {key: found.value.ids for key, found in current.items()}, self._key)
            if not changed:
                return
            absent = [key for key in changed if key not in current]
            if absent:
                # A shard is created empty by a write the store refuses over an existing key,
                # then changed like any other, guarded by its etag: a transaction cannot create
                # one safely (Redis applies an unguarded write there even over a key another
                # replica just created). A creation that lost that race changes nothing.
                await asyncio.gather(*(self._create(key) for key in absent))
                continue
            try:
                await self._repository.transact(
                    {key: IdSet(ids=ids) for key, ids in changed.items()},
                    etags={key: _etag(key, current[key]) for key in changed},
                    ttl_seconds=self._ttls(changed),
                )
                return
            except DaprError as exc:
                # Another replica wrote one of these keys since the read: read again and redo
                # the whole batch (Redis may have applied the rest of the transaction; the
                # moves are set additions and removals, so redoing them is safe).
                log.debug("status index write conflicted; retrying", extra={"reason": str(exc)})
            await asyncio.sleep(random.uniform(0, 0.01 * 2**attempt))
        raise ConcurrencyConflict(f"status index: gave up after {WRITE_ATTEMPTS} conflicting writes")

    def _ttls(self, keys: Iterable[str]) -> dict[str, int]:
        ttls = {key: self._ttl_seconds(_status_of(key)) for key in keys}
        return {key: ttl for key, ttl in ttls.items() if ttl is not None}

    async def _create(self, key: str) -> None:
        try:
            await self._repository.save(
                key, IdSet(), only_if_absent=True, ttl_seconds=self._ttl_seconds(_status_of(key))
            )
        except DaprError as exc:
            log.debug("status index shard not created; reading it again", extra={"reason": str(exc)})


def _status_of(key: str) -> str:
    return key.rpartition(":")[0]


def _apply(
    batch: Sequence[_Move], ids_by_key: dict[str, list[str]], key_of: Callable[[str, str], str]
) -> dict[str, list[str]]:
    """The keys whose id lists the batch changes, with their new lists (moves in order)."""
    members: dict[str, dict[str, None]] = {}
    for move in batch:
        for status, present in ((move.old, False), (move.new, True)):
            if status is None:
                continue
            key = key_of(status, move.item_id)
            ids = members.setdefault(key, dict.fromkeys(ids_by_key.get(key, [])))
            if present:
                ids[move.item_id] = None
            else:
                ids.pop(move.item_id, None)
    return {key: list(ids) for key, ids in members.items() if list(ids) != ids_by_key.get(key, [])}


def _etag(key: str, found: Versioned[IdSet]) -> str:
    if not found.etag:
        raise DaprError(500, "ERR_STATE_ETAG", f"the state store gave no etag for {key}; the index needs one")
    return found.etag
