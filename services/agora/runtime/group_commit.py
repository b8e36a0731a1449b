"""Group commit: whatever is submitted while a write is under way is written together by the
next one, so a hundred concurrent changes cost a write or two rather than a hundred.

Each submitter waits for the write that contains its items and sees that write's failure. A
submitter that gives up (cancelled) does not cancel the write its items are part of.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["GroupCommit", "GroupCommits"]

K = TypeVar("K")
T = TypeVar("T")


@dataclass
class _Submitted(Generic[T]):
    item: T
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class GroupCommit(Generic[T]):
    def __init__(self, write: Callable[[list[T]], Awaitable[None]], name: str) -> None:
        self._write = write
        self._name = name
        self._queued: list[_Submitted[T]] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, *items: T) -> None:
        """Queue `items` and wait until the write that contains them is done."""
        submitted = [_Submitted(item) for item in items]
        self._queued.extend(submitted)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued(), name=self._name)
        await asyncio.shield(asyncio.gather(*(s.done for s in submitted)))

    async def _write_queued(self) -> None:
        while self._queued:
            batch, self._queued = self._queued, []
            try:
                await self._write([s.item for s in batch])
            except Exception as exc:
                for s in batch:
                    if not s.done.done():
                        s.done.set_exception(exc)
            else:
                for s in batch:
                    if not s.done.done():
                        s.done.set_result(None)


class GroupCommits(Generic[K, T]):
    """A group commit per key (an agent's record, say): items submitted for one key while its
    write is under way are written together by its next one; keys never wait for each other."""

    def __init__(self, write: Callable[[K, list[T]], Awaitable[None]], name: str) -> None:
        self._write = write
        self._name = name
        self._by_key: dict[K, GroupCommit[T]] = {}

    async def submit(self, key: K, *items: T) -> None:
        commits = self._by_key.get(key)
        if commits is None:
            commits = self._by_key[key] = GroupCommit(
                lambda batch: self._write(key, batch), f"{self._name} {key}"
            )
        await commits.submit(*items)
