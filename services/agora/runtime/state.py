"""Typed state repository over the Dapr state API, with etag-based optimistic concurrency."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from opentelemetry.trace import SpanKind

from agora.runtime.sidecar import DaprError, DaprSidecar, EtagMismatch, SidecarResponse
from agora.runtime.tracing import tracer

M = TypeVar("M", bound=Any)


@dataclass(frozen=True)
class Versioned(Generic[M]):
    value: M
    etag: str | None


class ConcurrencyConflict(Exception):
    """An optimistic update kept losing the race and gave up."""


class StateRepository(Generic[M]):
    """Values of one pydantic model stored under `<namespace>:<id>` keys of one state store.

    `save(..., etag=e)` succeeds only if the stored etag is still `e` (first-write-wins);
    without an etag the write is unconditional. `update` wraps the read-modify-write loop.
    """

    def __init__(self, sidecar: DaprSidecar, store: str, namespace: str, model: type[M]) -> None:
        self._sidecar = sidecar
        self._store = store
        self._namespace = namespace
        self._model = model
        self._tracer = tracer("agora.state")

    def key(self, item_id: str) -> str:
        return f"{self._namespace}:{item_id}"

    def _span(self, operation: str, item_id: str | None = None) -> Any:
        attributes = {
            "db.system.name": "dapr",
            "db.operation.name": operation,
            "db.namespace": self._store,
            "db.collection.name": self._namespace,
        }
        if item_id is not None:
            attributes["agora.state.key"] = self.key(item_id)
        return self._tracer.start_as_current_span(
            f"{operation} {self._namespace}", kind=SpanKind.CLIENT, attributes=attributes
        )

    async def get(self, item_id: str) -> Versioned[M] | None:
        found = await self._read(item_id)
        if found is None:
            return None
        return Versioned(self._model.model_validate_json(found.content), found.headers.get("etag"))

    async def get_json(self, item_id: str) -> Versioned[Any] | None:
        """The stored JSON data of one item, with its etag, not parsed into the model."""
        found = await self._read(item_id)
        return Versioned(found.json(), found.headers.get("etag")) if found is not None else None

    async def _read(self, item_id: str) -> SidecarResponse | None:
        """The sidecar's answer for one item; None when the store has no such key."""
        with self._span("get", item_id):
            response = await self._sidecar.request(
                "GET", f"/v1.0/state/{self._store}/{self.key(item_id)}", params={"consistency": "strong"}
            )
        return None if response.status_code == 204 or not response.content else response

    async def get_many(self, item_ids: Iterable[str]) -> dict[str, Versioned[M]]:
        raw = await self.get_many_raw(item_ids)
        return {i: Versioned(self._model.model_validate(data), etag) for i, (data, etag) in raw.items()}

    async def get_many_raw(self, item_ids: Iterable[str]) -> dict[str, tuple[Any, str | None]]:
        """The stored JSON of each id found, with its etag, not validated yet: a caller that
        already holds a version can skip parsing what did not change."""
        ids = list(item_ids)
        if not ids:
            return {}
        with self._span("get_bulk"):
            response = await self._sidecar.request(
                "POST",
                f"/v1.0/state/{self._store}/bulk",
                json_body={"keys": [self.key(i) for i in ids], "parallelism": 16},
            )
        by_key = {self.key(i): i for i in ids}
        found: dict[str, tuple[Any, str | None]] = {}
        for item in response.json():
            if item.get("error"):
                # A key the store could not read (e.g. while it restarts) is not a missing key:
                # a caller that took it for one would create it afresh over what it holds.
                raise DaprError(500, "ERR_STATE_GET", f"could not read {item['key']}: {item['error']}")
            if item.get("data") is None:
                continue
            found[by_key[item["key"]]] = (item["data"], item.get("etag"))
        return found

    async def save(
        self,
        item_id: str,
        value: M,
        *,
        etag: str | None = None,
        only_if_absent: bool = False,
        ttl_seconds: int | None = None,
    ) -> None:
        """Write `value`. With `etag`, only over that exact version; with `only_if_absent`, only
        if the key does not exist (first-write without an etag; stores that cannot tell treat it
        as a plain write); otherwise unconditionally (last-write-wins)."""
        data = value.model_dump(mode="json")
        await self.save_json(item_id, data, etag=etag, only_if_absent=only_if_absent, ttl_seconds=ttl_seconds)

    async def save_json(
        self,
        item_id: str,
        data: Any,
        *,
        etag: str | None = None,
        only_if_absent: bool = False,
        ttl_seconds: int | None = None,
    ) -> None:
        """`save` with the value already as JSON data."""
        guarded = etag is not None or only_if_absent
        entry: dict[str, Any] = {
            "key": self.key(item_id),
            "value": data,
            "options": {"concurrency": "first-write" if guarded else "last-write", "consistency": "strong"},
        }
        if etag is not None:
            entry["etag"] = etag
        if ttl_seconds is not None:
            entry["metadata"] = {"ttlInSeconds": str(ttl_seconds)}
        with self._span("save", item_id):
            await self._sidecar.request("POST", f"/v1.0/state/{self._store}", json_body=[entry])

    async def save_many(
        self,
        values: dict[str, M],
        *,
        only_if_absent: bool = False,
        ttl_seconds: Mapping[str, int] | None = None,
    ) -> None:
        """Write several items in one call, each as `save` would; with `only_if_absent`, each
        only where its key does not exist; `ttl_seconds` gives the items that expire their
        state TTL. Not a transaction: when one is refused, the others may have been written (the
        call fails; read them again to know)."""
        concurrency = "first-write" if only_if_absent else "last-write"
        ttls = ttl_seconds or {}
        entries = [
            {
                "key": self.key(item_id),
                "value": value.model_dump(mode="json"),
                "options": {"concurrency": concurrency, "consistency": "strong"},
                **({"metadata": {"ttlInSeconds": str(ttls[item_id])}} if item_id in ttls else {}),
            }
            for item_id, value in values.items()
        ]
        if not entries:
            return
        with self._span("save_bulk"):
            await self._sidecar.request("POST", f"/v1.0/state/{self._store}", json_body=entries)

    async def transact(
        self, values: dict[str, M], *, etags: dict[str, str], ttl_seconds: Mapping[str, int] | None = None
    ) -> None:
        """Write several existing items in one state transaction, each guarded by the etag it
        was read with; `ttl_seconds` gives the items that expire their state TTL. Only existing
        items: inside a transaction, Redis does not refuse a write without an etag over a key
        that exists, so an item is created first with `save(..., only_if_absent=True)`, which
        it does refuse."""
        await self.transact_json(
            {i: v.model_dump(mode="json") for i, v in values.items()}, etags=etags, ttl_seconds=ttl_seconds
        )

    async def transact_json(
        self, values: dict[str, Any], *, etags: dict[str, str], ttl_seconds: Mapping[str, int] | None = None
    ) -> None:
        """`transact` with values already as JSON data (what `get_many_raw` answers, changed):
        for a caller that edits a large stored value in place rather than parse and dump it."""
        ttls = ttl_seconds or {}
        operations: list[dict[str, Any]] = [
            {
                "operation": "upsert",
                "request": {
                    "key": self.key(item_id),
                    "etag": etags[item_id],
                    "value": value,
                    "options": {"concurrency": "first-write", "consistency": "strong"},
                    **({"metadata": {"ttlInSeconds": str(ttls[item_id])}} if item_id in ttls else {}),
                },
            }
            for item_id, value in values.items()
        ]
        if not operations:
            return
        with self._span("transaction"):
            await self._sidecar.request(
                "POST", f"/v1.0/state/{self._store}/transaction", json_body={"operations": operations}
            )

    async def delete(self, item_id: str, *, etag: str | None = None) -> None:
        headers = {"if-match": etag} if etag else None
        with self._span("delete", item_id):
            await self._sidecar.request(
                "DELETE",
                f"/v1.0/state/{self._store}/{self.key(item_id)}",
                headers=headers,
                params={"concurrency": "first-write" if etag else "last-write", "consistency": "strong"},
            )

    async def update(
        self,
        item_id: str,
        change: Callable[[M | None], M | None],
        *,
        attempts: int = 10,
        ttl_seconds: Callable[[M], int | None] | None = None,
    ) -> M | None:
        """Read, apply `change`, write back guarded by the etag; retry on conflict with jittered
        backoff. `change` returning None deletes the item. `ttl_seconds` gives the state TTL of
        the value written (a rewrite without one would drop the item's TTL)."""

        async def write(value: M, etag: str | None, absent: bool) -> None:
            ttl = ttl_seconds(value) if ttl_seconds else None
            await self.save(item_id, value, etag=etag, only_if_absent=absent, ttl_seconds=ttl)

        return await self._updated(item_id, self.get, change, write, attempts)

    async def update_json(
        self, item_id: str, change: Callable[[Any | None], Any | None], *, attempts: int = 10
    ) -> Any | None:
        """`update` on the stored JSON data, not parsed into the model: for a caller that edits
        a large value in place (its `change` keeps the data valid for the model)."""

        async def write(data: Any, etag: str | None, absent: bool) -> None:
            await self.save_json(item_id, data, etag=etag, only_if_absent=absent)

        return await self._updated(item_id, self.get_json, change, write, attempts)

    async def _updated(
        self,
        item_id: str,
        read: Callable[[str], Awaitable[Versioned[Any] | None]],
        change: Callable[[Any | None], Any | None],
        write: Callable[[Any, str | None, bool], Awaitable[None]],
        attempts: int,
    ) -> Any | None:
        for attempt in range(attempts):
            current = await read(item_id)
            new_value = change(current.value if current else None)
            if current is not None and new_value == current.value:
                return new_value
            etag = current.etag if current else None
            try:
                if new_value is None:
                    if current is not None:
                        await self.delete(item_id, etag=etag)
                else:
                    await write(new_value, etag, current is None)
                return new_value
            except EtagMismatch:
                pass
            except DaprError:
                # Redis refuses a create (first-write, no etag) that lost the race to another
                # writer with a plain save error, not an etag conflict: if the key exists now,
                # that is what happened, and the next attempt updates it.
                if current is not None or await read(item_id) is None:
                    raise
            await asyncio.sleep(random.uniform(0, 0.01 * 2**attempt))
        raise ConcurrencyConflict(f"{self.key(item_id)}: gave up after {attempts} conflicting writes")
