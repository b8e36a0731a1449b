"""The state repository's reading of the sidecar's bulk answer, against a stand-in sidecar."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from pydantic import BaseModel

from agora.runtime.sidecar import DaprError, DaprSidecar, SidecarResponse
from agora.runtime.state import StateRepository


class Tally(BaseModel):
    value: int = 0


class BulkAnswer:
    """Answers every request with one bulk-get body."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self._body = json.dumps(items).encode()

    async def request(self, method: str, path: str, **_: Any) -> SidecarResponse:
        return SidecarResponse(200, self._body, {})


def repository(items: list[dict[str, Any]]) -> StateRepository[Tally]:
    return StateRepository(cast(DaprSidecar, BulkAnswer(items)), "agora-state", "tally", Tally)


async def test_found_and_missing_keys() -> None:
    found = await repository(
        [{"key": "tally:a", "data": {"value": 1}, "etag": "3"}, {"key": "tally:b"}]
    ).get_many(["a", "b"])
    assert list(found) == ["a"] and found["a"].value == Tally(value=1) and found["a"].etag == "3"


async def test_a_key_the_store_could_not_read_is_an_error_not_a_missing_key() -> None:
    found = {"key": "tally:a", "data": {"value": 1}, "etag": "3"}
    unreadable = repository([found, {"key": "tally:b", "error": "connection refused"}])
    with pytest.raises(DaprError, match="could not read tally:b: connection refused"):
        await unreadable.get_many(["a", "b"])
