"""Batched writes: saves made together cost one bulk save, each with its own state TTL; a
failure reaches every saver of that batch, and the next save goes on."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from agora.runtime.batched_writes import BatchedWrites
from agora.sdk.testing import MemoryRepository


class Note(BaseModel):
    text: str


async def test_saves_made_together_are_one_bulk_save_each_with_its_own_ttl() -> None:
    store = MemoryRepository(Note)
    writes = BatchedWrites(store.typed())

    await asyncio.gather(
        writes.save("a", Note(text="first")),
        writes.save("b", Note(text="second"), ttl_seconds=60),
        writes.save("a", Note(text="first, again")),
    )

    assert store.calls == 1
    a, b = await store.get("a"), await store.get("b")
    assert a is not None and a.value.text == "first, again"  # the later save of a key wins
    assert b is not None and b.value.text == "second"
    assert store.ttls == {"b": 60}


async def test_a_failed_bulk_save_fails_every_saver_of_it_and_the_next_save_goes_on() -> None:
    store = MemoryRepository(Note)
    writes = BatchedWrites(store.typed())

    async def broken(values: object, **options: object) -> None:
        raise ConnectionError("store away")

    healthy = store.save_many
    store.save_many = broken  # type: ignore[method-assign, assignment]
    results = await asyncio.gather(
        writes.save("a", Note(text="x")), writes.save("b", Note(text="y")), return_exceptions=True
    )
    assert all(isinstance(r, ConnectionError) for r in results)
    with pytest.raises(ConnectionError):
        await writes.save("a", Note(text="x"))

    store.save_many = healthy  # type: ignore[method-assign]
    await writes.save("a", Note(text="kept"))
    found = await store.get("a")
    assert found is not None and found.value.text == "kept"
