"""StateRepository against real state stores: etags, conditional writes, concurrent updates."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel

from agora.harness import LocalCluster
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprSidecar, EtagMismatch
from agora.runtime.state import StateRepository


class Tally(BaseModel):
    value: int = 0


@pytest.fixture(params=["default", "redis"])
async def repository(
    request: pytest.FixtureRequest, default_cluster: LocalCluster, apps_cluster: LocalCluster
) -> AsyncIterator[StateRepository[Tally]]:
    cluster = default_cluster if request.param == "default" else apps_cluster
    replica = cluster.replicas[0]
    sidecar = DaprSidecar(ServiceSettings(dapr_http_port=replica.endpoints.dapr_http_port))
    yield StateRepository(sidecar, "agora-state", f"test-{uuid.uuid4().hex[:8]}", Tally)
    await sidecar.aclose()


async def test_missing_key_reads_as_none(repository: StateRepository[Tally]) -> None:
    assert await repository.get("nothing") is None
    assert await repository.get_many(["nothing", "either"]) == {}


async def test_stale_etag_is_refused(repository: StateRepository[Tally]) -> None:
    await repository.save("k", Tally(value=1))
    first = await repository.get("k")
    assert first is not None and first.etag
    await repository.save("k", Tally(value=2), etag=first.etag)
    with pytest.raises(EtagMismatch):
        await repository.save("k", Tally(value=3), etag=first.etag)
    with pytest.raises(EtagMismatch):
        await repository.delete("k", etag=first.etag)
    current = await repository.get("k")
    assert current is not None and current.value == Tally(value=2)


async def test_concurrent_updates_lose_nothing(repository: StateRepository[Tally]) -> None:
    def increment(tally: Tally | None) -> Tally:
        return Tally(value=(tally.value if tally else 0) + 1)

    await repository.save("counter", Tally())
    await asyncio.gather(*(repository.update("counter", increment, attempts=50) for _ in range(20)))
    stored = await repository.get("counter")
    assert stored is not None and stored.value.value == 20


async def test_concurrent_updates_of_an_absent_key_lose_nothing(repository: StateRepository[Tally]) -> None:
    """The first writes race to create the key: one creates it, the others must retry over it."""

    def increment(tally: Tally | None) -> Tally:
        return Tally(value=(tally.value if tally else 0) + 1)

    await asyncio.gather(*(repository.update("fresh", increment, attempts=50) for _ in range(20)))
    stored = await repository.get("fresh")
    assert stored is not None and stored.value.value == 20


async def test_update_to_none_deletes(repository: StateRepository[Tally]) -> None:
    await repository.save("gone", Tally(value=1))
    await repository.update("gone", lambda _: None)
    assert await repository.get("gone") is None
    found = await repository.get_many(["gone"])
    assert found == {}
