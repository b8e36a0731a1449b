"""Batched reads: single-key reads that come together go as one bulk read, as when deliveries
handled side by side each ask for one record. Nothing is kept once a read returns, so the next read
sees what changed since."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

from pydantic import BaseModel

from agora.runtime.state import StateRepository, Versioned

__all__ = ["BatchedReads"]

M = TypeVar("M", bound=BaseModel)


class BatchedReads(Generic[M]):
    def __init__(self, repository: StateRepository[M]) -> None:
        self._repository = repository
        self._queued: dict[str, list[asyncio.Future[Versioned[M] | None]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def get(self, item_id: str) -> Versioned[M] | None:
        """The item as `StateRepository.get` answers it, read with whatever else is asked now."""
        answer: asyncio.Future[Versioned[M] | None] = asyncio.get_running_loop().create_future()
        self._queued.setdefault(item_id, []).append(answer)
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read_queued(), name="batched reads")
        return await asyncio.shield(answer)

    async def _read_queued(self) -> None:
        await asyncio.sleep(0)  # the other entries of a delivery ask theirs meanwhile
        while self._queued:
            batch, self._queued = self._queued, {}
            try:
                found = await self._repository.get_many(list(batch))
            except Exception as exc:
                for answers in batch.values():
                    for answer in answers:
                        if not answer.done():
                            answer.set_exception(exc)
                continue
            for item_id, answers in batch.items():
                for answer in answers:
                    if not answer.done():
                        answer.set_result(found.get(item_id))
