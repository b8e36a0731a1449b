"""Group commits: what is submitted while a write is under way goes in the next write, per key."""

from __future__ import annotations

import asyncio

import pytest

from agora.runtime.group_commit import GroupCommit, GroupCommits


async def test_items_submitted_during_a_write_are_written_together_by_the_next() -> None:
    writes: list[list[int]] = []
    first_started = asyncio.Event()
    release = asyncio.Event()

    async def write(batch: list[int]) -> None:
        writes.append(batch)
        first_started.set()
        await release.wait()

    commits: GroupCommit[int] = GroupCommit(write, "test")
    first = asyncio.ensure_future(commits.submit(1))
    await first_started.wait()
    rest = [asyncio.ensure_future(commits.submit(n)) for n in (2, 3, 4)]
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, *rest)

    assert writes == [[1], [2, 3, 4]]


async def test_a_failed_write_fails_the_submitters_of_its_items_only() -> None:
    async def write(batch: list[int]) -> None:
        if 2 in batch:
            raise ConnectionError("store away")

    commits: GroupCommit[int] = GroupCommit(write, "test")
    with pytest.raises(ConnectionError):
        await commits.submit(2)
    await commits.submit(3)  # the next write goes on


async def test_keys_are_written_apart_and_never_wait_for_each_other() -> None:
    writes: list[tuple[str, list[int]]] = []
    held = asyncio.Event()

    async def write(key: str, batch: list[int]) -> None:
        writes.append((key, batch))
        if key == "slow":
            await held.wait()

    commits: GroupCommits[str, int] = GroupCommits(write, "test")
    slow = asyncio.ensure_future(commits.submit("slow", 1))
    await asyncio.sleep(0)
    await asyncio.gather(commits.submit("a", 1), commits.submit("a", 2), commits.submit("b", 3))
    assert not slow.done()
    held.set()
    await slow

    assert ("slow", [1]) in writes and ("b", [3]) in writes
    assert sorted(item for key, batch in writes if key == "a" for item in batch) == [1, 2]
