"""Batched reads: single-key reads that come together go as one bulk read, as when deliveries
handled side by side each ask for one record. Nothing is kept once a read returns, so the next read
sees what changed since."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel

from agora.runtime.batching import MicroBatcher
from agora.runtime.state import StateRepository, Versioned

__all__ = ["BatchedReads"]

M = TypeVar("M", bound=BaseModel)


class BatchedReads(Generic[M]):
    def __init__(self, repository: StateRepository[M]) -> None:
        self._repository = repository
        # The first read waits a turn: the other entries of a delivery ask theirs meanwhile.
        self._reads: MicroBatcher[str, Versioned[M] | None] = MicroBatcher(
            self._read, "batched reads", wait_a_turn=True
        )

    async def get(self, item_id: str) -> Versioned[M] | None:
        """The item as `StateRepository.get` answers it, read with whatever else is asked now."""
        return await self._reads.submit(item_id)

    async def _read(self, item_ids: list[str]) -> list[Versioned[M] | None]:
        found = await self._repository.get_many(list(dict.fromkeys(item_ids)))
        return [found.get(item_id) for item_id in item_ids]
