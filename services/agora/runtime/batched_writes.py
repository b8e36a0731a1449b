"""Batched writes: unconditional single-key saves that come together go as one bulk save, as
when runs handled side by side each save their own record. Each save returns once the call that
carried it did, and fails with it (a bulk save is not a transaction: the caller saves again, as
it would after a failed single save). Two saves of one key in a batch keep the later."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from agora.runtime.state import StateRepository

__all__ = ["BatchedWrites"]

M = TypeVar("M", bound=BaseModel)


@dataclass
class _Queued(Generic[M]):
    value: M
    ttl_seconds: int | None
    answers: list[asyncio.Future[None]]


class BatchedWrites(Generic[M]):
    def __init__(self, repository: StateRepository[M]) -> None:
        self._repository = repository
        self._queued: dict[str, _Queued[M]] = {}
        self._writer: asyncio.Task[None] | None = None

    async def save(self, item_id: str, value: M, *, ttl_seconds: int | None = None) -> None:
        """Write `value` unconditionally (last write wins), with whatever else is saved now."""
        answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        earlier = self._queued.get(item_id)
        answers = [*(earlier.answers if earlier else []), answer]
        self._queued[item_id] = _Queued(value, ttl_seconds, answers)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued(), name="batched writes")
        await asyncio.shield(answer)

    async def _write_queued(self) -> None:
        await asyncio.sleep(0)  # the other runs of a batch save theirs meanwhile
        while self._queued:
            batch, self._queued = self._queued, {}
            failure: BaseException | None = None
            try:
                await self._repository.save_many(
                    {item_id: queued.value for item_id, queued in batch.items()},
                    ttl_seconds={
                        item_id: queued.ttl_seconds
                        for item_id, queued in batch.items()
                        if queued.ttl_seconds is not None
                    },
                )
            except Exception as exc:
                failure = exc
            for queued in batch.values():
                for answer in queued.answers:
                    if answer.done():
                        continue
                    if failure is None:
                        answer.set_result(None)
                    else:
                        answer.set_exception(failure)
