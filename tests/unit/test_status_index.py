"""The status index's group commit, against an in-memory stand-in for the state API."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from typing import cast

import pytest

from agora.runtime.sidecar import EtagMismatch
from agora.runtime.state import StateRepository, Versioned
from agora.runtime.status_index import IdSet, StatusIndex


class MemoryStore:
    """`get_many` and `transact` of a state repository, with etags, counting calls."""

    def __init__(self, conflicts: int = 0, broken: bool = False) -> None:
        self.values: dict[str, tuple[IdSet, str]] = {}
        self.reads = 0
        self.transactions = 0
        self._conflicts = conflicts
        self._broken = broken
        self._etags = itertools.count(1)

    async def get_many(self, keys: Iterable[str]) -> dict[str, Versioned[IdSet]]:
        self.reads += 1
        await asyncio.sleep(0)  # a real read yields; moves queue up meanwhile
        return {k: Versioned(self.values[k][0], self.values[k][1]) for k in keys if k in self.values}

    async def transact(self, values: dict[str, IdSet | None], *, etags: dict[str, str | None]) -> None:
        self.transactions += 1
        await asyncio.sleep(0)
        if self._broken:
            raise RuntimeError("state store down")
        if self._conflicts:
            self._conflicts -= 1
            # another replica wrote the first key meanwhile
            key = next(iter(values))
            other = self.values.get(key, (IdSet(), ""))[0]
            self.values[key] = (IdSet(ids=[*other.ids, "written-elsewhere"]), str(next(self._etags)))
        for key, etag in etags.items():
            stored = self.values.get(key)
            if (stored[1] if stored else None) != etag:
                raise EtagMismatch(409, "ERR_STATE_TRANSACTION", f"etag mismatch on {key}")
        for key, value in values.items():
            if value is None:
                self.values.pop(key, None)
            else:
                self.values[key] = (value, str(next(self._etags)))


def index_over(store: MemoryStore) -> StatusIndex:
    return StatusIndex(cast(StateRepository[IdSet], store), shards=4)


async def listed(index: StatusIndex, status: str) -> list[str]:
    return await index.list(status)


async def test_concurrent_moves_are_written_together() -> None:
    store = MemoryStore()
    index = index_over(store)
    await asyncio.gather(*(index.move(f"task-{i:03d}", None, "PENDING") for i in range(100)))
    assert await listed(index, "PENDING") == [f"task-{i:03d}" for i in range(100)]
    assert store.transactions <= 3, store.transactions  # not one per move


async def test_moves_of_one_item_in_one_batch_apply_in_order() -> None:
    store = MemoryStore()
    index = index_over(store)
    await asyncio.gather(
        index.move("task-1", None, "PENDING"),
        index.move("task-1", "PENDING", "ALLOCATED"),
        index.move("task-2", None, "PENDING"),
    )
    assert await listed(index, "PENDING") == ["task-2"]
    assert await listed(index, "ALLOCATED") == ["task-1"]


async def test_a_write_that_loses_a_race_is_redone_from_a_fresh_read() -> None:
    store = MemoryStore(conflicts=2)
    index = index_over(store)
    await asyncio.gather(*(index.move(f"task-{i}", None, "PENDING") for i in range(10)))
    pending = await listed(index, "PENDING")
    assert [f"task-{i}" for i in range(10)] == [i for i in pending if i.startswith("task-")]
    assert "written-elsewhere" in pending  # the other writer's entry survives
    assert store.transactions >= 3


async def test_a_failed_write_fails_every_move_in_it_and_the_next_move_tries_again() -> None:
    store = MemoryStore(broken=True)
    index = index_over(store)
    results = await asyncio.gather(
        *(index.move(f"task-{i}", None, "PENDING") for i in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)
    store._broken = False
    await index.move("task-9", None, "PENDING")
    assert await listed(index, "PENDING") == ["task-9"]


async def test_discard_and_unchanged_moves() -> None:
    store = MemoryStore()
    index = index_over(store)
    await index.move("task-1", None, "PENDING")
    writes = store.transactions
    await index.move("task-1", "PENDING", "PENDING")
    await index.move("task-1", None, "PENDING")  # already there: read, nothing to write
    assert store.transactions == writes
    await index.discard("task-1", "PENDING")
    assert await listed(index, "PENDING") == []
    assert not store.values  # an emptied shard is deleted, not kept as an empty list


@pytest.mark.parametrize("shards", [1, 16])
async def test_listing_spans_every_shard(shards: int) -> None:
    store = MemoryStore()
    index = StatusIndex(cast(StateRepository[IdSet], store), shards=shards)
    ids = [f"t{i}" for i in range(40)]
    await asyncio.gather(*(index.move(i, None, "DONE") for i in ids))
    assert await index.list("DONE") == sorted(ids)
