"""The status index's group commit, against an in-memory stand-in for the state API."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import cast

import pytest

from agora.runtime.sidecar import DaprError, EtagMismatch
from agora.runtime.state import StateRepository, Versioned
from agora.runtime.status_index import IdSet, StatusIndex, creation_entry, id_of_entry


class MemoryStore:
    """`get_many` and `transact` of a state repository, with etags, counting calls."""

    def __init__(self, conflicts: int = 0, broken: bool = False) -> None:
        self.values: dict[str, tuple[IdSet, str]] = {}
        self.reads = 0
        self.transactions = 0
        self._conflicts = conflicts
        self._broken = broken
        self._etags = itertools.count(1)
        self.ttls: dict[str, int | None] = {}
        """The state TTL each key was last written with."""

    async def get_many(self, keys: Iterable[str]) -> dict[str, Versioned[IdSet]]:
        self.reads += 1
        await asyncio.sleep(0)  # a real read yields; moves queue up meanwhile
        return {k: Versioned(self.values[k][0], self.values[k][1]) for k in keys if k in self.values}

    async def save(
        self, key: str, value: IdSet, *, only_if_absent: bool = False, ttl_seconds: int | None = None
    ) -> None:
        await asyncio.sleep(0)
        if self._broken:
            raise RuntimeError("state store down")
        if only_if_absent and key in self.values:
            raise DaprError(500, "ERR_STATE_SAVE", f"failed to set key {key}")
        self.values[key] = (value, str(next(self._etags)))
        self.ttls[key] = ttl_seconds

    async def transact(
        self, values: dict[str, IdSet], *, etags: dict[str, str], ttl_seconds: Mapping[str, int] | None = None
    ) -> None:
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
        assert set(etags) == set(values), "every key of a transaction is guarded by its etag"
        for key, etag in etags.items():
            stored = self.values.get(key)
            if (stored[1] if stored else None) != etag:
                raise EtagMismatch(409, "ERR_STATE_TRANSACTION", f"etag mismatch on {key}")
        for key, value in values.items():
            self.values[key] = (value, str(next(self._etags)))
            self.ttls[key] = (ttl_seconds or {}).get(key)


def index_over(store: MemoryStore) -> StatusIndex:
    return StatusIndex(cast(StateRepository[IdSet], store), shards=4)


async def listed(index: StatusIndex, status: str) -> list[str]:
    return await index.list(status)


async def test_a_status_s_keys_carry_its_state_ttl_on_every_write_and_statuses_list_together() -> None:
    store = MemoryStore()
    ttls = {"DONE@0": 600}
    index = StatusIndex(cast(StateRepository[IdSet], store), shards=4, ttl_seconds=ttls.get)

    await index.change([("t1", None, "RUNNING"), ("t2", None, "DONE@0")])
    await index.change([("t1", "RUNNING", "DONE@0")])

    done = {key: ttl for key, ttl in store.ttls.items() if key.startswith("DONE@0:")}
    assert done and all(ttl == 600 for ttl in done.values())
    assert all(ttl is None for key, ttl in store.ttls.items() if key.startswith("RUNNING:"))
    assert await index.list_all(["DONE@0", "DONE@60", "RUNNING"]) == ["t1", "t2"]


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
    # An emptied shard is kept: deleted and created again, its etags would start afresh.
    assert [value.ids for value, _ in store.values.values()] == [[]]


@pytest.mark.parametrize("shards", [1, 16])
async def test_listing_spans_every_shard(shards: int) -> None:
    store = MemoryStore()
    index = StatusIndex(cast(StateRepository[IdSet], store), shards=shards)
    ids = [f"t{i}" for i in range(40)]
    await asyncio.gather(*(index.move(i, None, "DONE") for i in ids))
    assert await index.list("DONE") == sorted(ids)


T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


async def test_a_new_item_is_listed_by_status_and_by_creation_in_one_write() -> None:
    store = MemoryStore()
    index = index_over(store)
    await index.add("plan-b", "RUNNING", T0)
    assert store.transactions == 1  # the status listing and the creation listing together
    await asyncio.gather(
        index.add("plan-c", "PLANNING", T0 + timedelta(seconds=2)),
        index.add("plan-a", "RUNNING", T0 + timedelta(seconds=1)),
    )
    assert await index.newest_first() == ["plan-c", "plan-a", "plan-b"]
    assert await listed(index, "RUNNING") == ["plan-a", "plan-b"]
    assert await listed(index, "PLANNING") == ["plan-c"]


async def test_a_status_change_leaves_the_creation_order_alone() -> None:
    store = MemoryStore()
    index = index_over(store)
    for minute, item_id in enumerate(["e-1", "e-2", "e-3"]):
        await index.add(item_id, "WAITING_FOR_HUMAN", T0 + timedelta(minutes=minute))
    await index.move("e-1", "WAITING_FOR_HUMAN", "RESOLVED")
    assert await index.newest_first() == ["e-3", "e-2", "e-1"]
    assert await listed(index, "RESOLVED") == ["e-1"]


async def test_adding_again_writes_nothing_and_discarding_with_the_creation_time_unlists_it() -> None:
    store = MemoryStore()
    index = index_over(store)
    await index.add("e-1", "RESOLVED", T0)
    await index.add("e-2", "RESOLVED", T0 + timedelta(hours=1))
    writes = store.transactions
    await index.add("e-1", "RESOLVED", T0)  # an owner redoing its index step
    assert store.transactions == writes
    await index.discard("e-1", "RESOLVED", T0)
    assert await index.newest_first() == ["e-2"]
    assert await listed(index, "RESOLVED") == ["e-2"]
    await index.discard("e-2", "RESOLVED", T0 + timedelta(hours=1))
    assert await index.newest_first() == [] and await listed(index, "RESOLVED") == []


async def test_an_item_listed_before_the_creation_listing_existed_is_listed_by_status_only() -> None:
    store = MemoryStore()
    index = index_over(store)
    await index.move("old-plan", None, "COMPLETED")
    await index.add("new-plan", "COMPLETED", T0)
    assert await listed(index, "COMPLETED") == ["new-plan", "old-plan"]
    assert await index.newest_first() == ["new-plan"]
    await index.discard("old-plan", "COMPLETED", T0)  # not in the creation listing: nothing to take out
    assert await listed(index, "COMPLETED") == ["new-plan"]


def test_creation_entries_sort_as_their_times_whatever_the_time_zone() -> None:
    paris = timezone(timedelta(hours=2))
    times = [
        datetime(2030, 1, 1, 13, 30, tzinfo=paris),  # 11:30 UTC
        datetime(2030, 1, 1, 12, 0),  # no zone: taken as UTC
        datetime(2030, 1, 1, 11, 59, 59, 999_999, tzinfo=UTC),
        datetime(2030, 1, 1, 12, 0, 0, 1, tzinfo=UTC),
        datetime(999, 12, 31, 23, 59, tzinfo=UTC),
        datetime(2029, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5))),  # 04:00 UTC on Jan 1
    ]
    entries = [creation_entry(f"id-{n}", moment) for n, moment in enumerate(times)]
    assert len({len(entry) for entry in entries}) == 1  # fixed width: text order is time order
    utc = [m.replace(tzinfo=UTC) if m.tzinfo is None else m for m in times]
    assert [id_of_entry(e) for e in sorted(entries)] == [
        f"id-{n}" for n, _ in sorted(enumerate(utc), key=lambda pair: pair[1])
    ]
    assert entries[0] == "2030-01-01T11:30:00.000000Z|id-0"
    assert id_of_entry(creation_entry("task:1.a-b", T0)) == "task:1.a-b"


async def test_a_status_is_listed_the_newest_first_and_items_older_than_that_listing_follow() -> None:
    store = MemoryStore()
    index = index_over(store)
    for minute, item_id in enumerate(["e-b", "e-c", "e-a", "e-d"]):
        await index.add(item_id, "WAITING_FOR_HUMAN", T0 + timedelta(minutes=minute))
    await index.move("e-a", "WAITING_FOR_HUMAN", "RESOLVED")
    await index.move("e-0", None, "WAITING_FOR_HUMAN")  # listed by status only
    assert await index.newest_first_in("WAITING_FOR_HUMAN") == ["e-d", "e-c", "e-b", "e-0"]
    assert await index.newest_first_in("RESOLVED") == ["e-a"]


async def test_a_shard_another_writer_creates_first_is_changed_not_overwritten() -> None:
    store = MemoryStore()
    index = index_over(store)
    shard = index._key("PENDING", "task-1")
    reads = store.get_many

    async def created_meanwhile(keys: Iterable[str]) -> dict[str, Versioned[IdSet]]:
        found = await reads(keys)
        if shard not in store.values:  # another replica creates the shard after this read
            store.values[shard] = (IdSet(ids=["theirs"]), "77")
        return found

    store.get_many = created_meanwhile  # type: ignore[method-assign]
    await index.move("task-1", None, "PENDING")
    assert await listed(index, "PENDING") == ["task-1", "theirs"]


async def test_a_shard_that_cannot_be_read_is_not_taken_for_a_missing_one() -> None:
    store = MemoryStore()
    index = index_over(store)
    await index.move("task-1", None, "PENDING")

    async def unreadable(keys: Iterable[str]) -> dict[str, Versioned[IdSet]]:
        raise DaprError(500, "ERR_STATE_GET", "could not read a shard: connection refused")

    reads = store.get_many
    store.get_many = unreadable  # type: ignore[method-assign]
    with pytest.raises(DaprError):
        await index.move("task-2", None, "PENDING")
    store.get_many = reads  # type: ignore[method-assign]
    await index.move("task-2", None, "PENDING")
    assert await listed(index, "PENDING") == ["task-1", "task-2"]
