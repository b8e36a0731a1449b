"""Batched reads: single reads asked together cost one bulk read; a failure reaches every asker."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from agora.runtime.batched_reads import BatchedReads
from agora.sdk.testing import MemoryRepository


class Note(BaseModel):
    text: str


async def test_reads_asked_together_are_one_bulk_read_and_each_gets_its_own_answer() -> None:
    store = MemoryRepository(Note)
    await store.save("a", Note(text="first"))
    await store.save("b", Note(text="second"))
    before = store.calls
    reads = BatchedReads(store.typed())

    a, b, missing, a_again = await asyncio.gather(
        reads.get("a"), reads.get("b"), reads.get("x"), reads.get("a")
    )

    assert store.calls - before == 1
    assert a is not None and a.value.text == "first" and a_again == a
    assert b is not None and b.value.text == "second"
    assert missing is None


async def test_a_failed_read_fails_every_asker_and_the_next_read_goes_on() -> None:
    store = MemoryRepository(Note)
    reads = BatchedReads(store.typed())

    async def broken(item_ids: object) -> dict[str, object]:
        raise ConnectionError("store away")

    healthy = store.get_many
    store.get_many = broken  # type: ignore[method-assign, assignment]
    results = await asyncio.gather(reads.get("a"), reads.get("b"), return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)

    store.get_many = healthy  # type: ignore[method-assign]
    assert await reads.get("a") is None
    with pytest.raises(ConnectionError):
        store.get_many = broken  # type: ignore[method-assign, assignment]
        await reads.get("a")
