"""A state repository in memory, with etags and first writes as the Dapr state API has them."""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel

from agora.runtime.sidecar import DaprError
from agora.runtime.state import StateRepository, Versioned

M = TypeVar("M", bound=BaseModel)


class MemoryRepository(Generic[M]):
    def __init__(self, model: type[M]) -> None:
        self.model = model
        self.values: dict[str, tuple[Any, str]] = {}
        self.calls = 0
        self.ttls: dict[str, int] = {}
        """The state TTL each key was last written with."""
        self._etags = itertools.count(1)

    def typed(self) -> StateRepository[M]:
        return cast(StateRepository[M], self)

    async def _call(self) -> None:
        self.calls += 1
        await asyncio.sleep(0)  # a real call yields; other work queues up meanwhile

    async def get(self, item_id: str) -> Versioned[M] | None:
        await self._call()
        found = self.values.get(item_id)
        return Versioned(self.model.model_validate(found[0]), found[1]) if found else None

    async def get_many(self, item_ids: Iterable[str]) -> dict[str, Versioned[M]]:
        raw = await self.get_many_raw(item_ids)
        return {i: Versioned(self.model.model_validate(data), etag) for i, (data, etag) in raw.items()}

    async def get_many_raw(self, item_ids: Iterable[str]) -> dict[str, tuple[Any, str | None]]:
        await self._call()
        # copies, as a store answers: a caller may change what it read
        return {i: copy.deepcopy(self.values[i]) for i in item_ids if i in self.values}

    def _expire(self, ttl_seconds: Mapping[str, int]) -> None:
        """Note each key's state TTL as the store would set it (the fake never expires a key)."""
        self.ttls.update(ttl_seconds)

    def _put(self, item_id: str, value: BaseModel, etag: str | None, only_if_absent: bool) -> None:
        stored = self.values.get(item_id)
        if only_if_absent and etag is None and stored is not None:
            raise DaprError(409, "ERR_STATE_SAVE", f"failed to set key {item_id}: it exists")
        if etag is not None and (stored is None or stored[1] != etag):
            raise DaprError(409, "ERR_STATE_SAVE", f"etag mismatch on {item_id}")
        self.values[item_id] = (value.model_dump(mode="json"), str(next(self._etags)))

    async def save(
        self,
        item_id: str,
        value: M,
        *,
        etag: str | None = None,
        only_if_absent: bool = False,
        ttl_seconds: int | None = None,
    ) -> None:
        await self._call()
        self._put(item_id, value, etag, only_if_absent)
        self._expire({item_id: ttl_seconds} if ttl_seconds is not None else {})

    async def save_many(
        self,
        values: dict[str, M],
        *,
        only_if_absent: bool = False,
        ttl_seconds: Mapping[str, int] | None = None,
    ) -> None:
        await self._call()
        self._expire(ttl_seconds or {})
        refused = []
        for item_id, value in values.items():
            try:
                self._put(item_id, value, None, only_if_absent)
            except DaprError:
                refused.append(item_id)
        if refused:
            raise DaprError(409, "ERR_STATE_SAVE", f"failed to set keys {refused}")

    async def transact(
        self, values: dict[str, M], *, etags: dict[str, str], ttl_seconds: Mapping[str, int] | None = None
    ) -> None:
        await self.transact_json(
            {key: value.model_dump(mode="json") for key, value in values.items()},
            etags=etags,
            ttl_seconds=ttl_seconds,
        )

    async def transact_json(
        self, values: dict[str, Any], *, etags: dict[str, str], ttl_seconds: Mapping[str, int] | None = None
    ) -> None:
        await self._call()
        self._expire(ttl_seconds or {})
        assert set(etags) == set(values), "every key of a transaction is guarded by its etag"
        for key, etag in etags.items():
            stored = self.values.get(key)
            if stored is None or stored[1] != etag:
                raise DaprError(409, "ERR_STATE_TRANSACTION", f"etag mismatch on {key}")
        for key, value in values.items():
            # stored as a copy, as a store would: the caller's value may be changed after
            self.values[key] = (copy.deepcopy(value), str(next(self._etags)))

    async def delete(self, item_id: str, *, etag: str | None = None) -> None:
        await self._call()
        self.values.pop(item_id, None)
