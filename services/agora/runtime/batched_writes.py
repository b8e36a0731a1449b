"""Batched writes: unconditional single-key saves that come together go as one bulk save, as
when runs handled side by side each save their own record. Each save returns once the call that
carried it did, and fails with it (a bulk save is not a transaction: the caller saves again, as
it would after a failed single save). Two saves of one key in a batch keep the later."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel

from agora.runtime.batching import MicroBatcher
from agora.runtime.state import StateRepository

__all__ = ["BatchedWrites"]

M = TypeVar("M", bound=BaseModel)


class BatchedWrites(Generic[M]):
    def __init__(self, repository: StateRepository[M]) -> None:
        self._repository = repository
        # The first save waits a turn: the other runs of a batch save theirs meanwhile.
        self._writes: MicroBatcher[tuple[str, M, int | None], None] = MicroBatcher(
            self._write, "batched writes", wait_a_turn=True
        )

    async def save(self, item_id: str, value: M, *, ttl_seconds: int | None = None) -> None:
        """Write `value` unconditionally (last write wins), with whatever else is saved now."""
        await self._writes.submit((item_id, value, ttl_seconds))

    async def _write(self, saves: list[tuple[str, M, int | None]]) -> list[None]:
        latest = {item_id: (value, ttl_seconds) for item_id, value, ttl_seconds in saves}
        await self._repository.save_many(
            {item_id: value for item_id, (value, _) in latest.items()},
            ttl_seconds={item_id: ttl for item_id, (_, ttl) in latest.items() if ttl is not None},
        )
        return [None] * len(saves)
