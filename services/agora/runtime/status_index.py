"""Ids grouped by status in plain state keys: the listing a state store without a query API
cannot give. Each status's ids are spread over `shards` keys, so concurrent status changes
rarely contend for one etag and no single value grows with the whole collection.

The index is maintained after the owning record is saved. A failure in between leaves it stale
for that id until the owner is asked for the same change again (a redelivery, a caller's
retry): owners redo the index step then, since it is idempotent. Readers treat the index as a
hint and check the record itself.
"""

from __future__ import annotations

import zlib

from pydantic import BaseModel

from agora.runtime.state import StateRepository

DEFAULT_SHARDS = 16


class IdSet(BaseModel):
    ids: list[str] = []


class StatusIndex:
    def __init__(self, repository: StateRepository[IdSet], shards: int = DEFAULT_SHARDS) -> None:
        self._repository = repository
        self._shards = shards

    def _key(self, status: str, item_id: str) -> str:
        return f"{status}:{zlib.crc32(item_id.encode()) % self._shards:02d}"

    async def move(self, item_id: str, old: str | None, new: str) -> None:
        if old == new:
            return
        if old is not None:
            await self.discard(item_id, old)
        await self._repository.update(self._key(new, item_id), lambda ids: _with(ids, item_id))

    async def discard(self, item_id: str, status: str) -> None:
        await self._repository.update(self._key(status, item_id), lambda ids: _without(ids, item_id))

    async def list(self, status: str) -> list[str]:
        keys = [f"{status}:{shard:02d}" for shard in range(self._shards)]
        found = await self._repository.get_many(keys)
        return sorted(item_id for shard in found.values() for item_id in shard.value.ids)


def _with(ids: IdSet | None, item_id: str) -> IdSet:
    current = ids or IdSet()
    return current if item_id in current.ids else IdSet(ids=[*current.ids, item_id])


def _without(ids: IdSet | None, item_id: str) -> IdSet | None:
    return None if ids is None else IdSet(ids=[i for i in ids.ids if i != item_id])
