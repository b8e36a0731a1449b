"""An agent app's learning history (`DaprOutcomeHistory`) over a stand-in for the Dapr state API:
runs ending together are one etag-guarded write, edited as stored JSON."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, cast

from agora.core.outcomes.record import StepOutcome
from agora.runtime.sidecar import DaprSidecar, EtagMismatch, SidecarResponse
from agora.runtime.state import StateRepository
from agora.sdk._app_stores import DaprOutcomeHistory, RecentOutcomes
from agora.sdk._learning import LEARNING_KEPT, learnt

STORE = "agora-state"


class StateApi:
    """The Dapr state API in memory: reads with etags, saves guarded by them (first-write)."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[bytes, str]] = {}
        self.saves = 0
        self.before_save: list[Any] = []
        """Callables run once each before the next saves (another writer getting in first)."""
        self._etags = itertools.count(1)

    async def request(self, method: str, path: str, **kwargs: Any) -> SidecarResponse:
        await asyncio.sleep(0)
        if method == "GET":
            found = self.values.get(path.rsplit("/", 1)[1])
            if found is None:
                return SidecarResponse(204, b"", {})
            return SidecarResponse(200, found[0], {"etag": found[1]})
        assert method == "POST" and path == f"/v1.0/state/{STORE}"
        if self.before_save:
            self.before_save.pop(0)()
        for entry in kwargs["json_body"]:
            stored = self.values.get(entry["key"])
            etag = entry.get("etag")
            if (etag is not None and (stored is None or stored[1] != etag)) or (
                etag is None and entry["options"]["concurrency"] == "first-write" and stored is not None
            ):
                raise EtagMismatch(409, "ERR_STATE_SAVE", f"etag mismatch on {entry['key']}")
            self.put(entry["key"], entry["value"])
        self.saves += 1
        return SidecarResponse(204, b"", {})

    def put(self, key: str, value: Any) -> None:
        self.values[key] = (json.dumps(value).encode(), str(next(self._etags)))

    def stored(self, key: str) -> RecentOutcomes:
        return RecentOutcomes.model_validate_json(self.values[key][0])


def history(api: StateApi) -> DaprOutcomeHistory:
    sidecar = cast(DaprSidecar, api)
    return DaprOutcomeHistory(StateRepository(sidecar, STORE, "agent:learning", RecentOutcomes))


def outcome(run_id: str) -> StepOutcome:
    return learnt(run_id, succeeded=True, partial=False, aborted=False, started_at=0.0, history=[],
                  patterns_applied=[], summary="done")  # fmt: skip


async def test_runs_that_end_together_are_one_write_and_read_back_as_outcomes() -> None:
    api = StateApi()
    kept = history(api)
    await kept.record("a", outcome("t0"))  # creates the record
    await asyncio.gather(*(kept.record("a", outcome(f"t{i}")) for i in range(1, 6)))
    assert api.saves == 2
    assert [o.job_id for o in await kept.outcomes("a")] == [f"t{i}" for i in range(6)]


async def test_the_history_keeps_the_latest_runs_and_a_run_told_twice_once_as_last_told() -> None:
    api = StateApi()
    kept = history(api)
    told = [outcome(f"t{i}") for i in range(LEARNING_KEPT + 5)]
    for one in told:
        await kept.record("a", one)
    again = told[-1].model_copy(update={"retry_count": 7})
    await kept.record("a", again)
    stored = api.stored("agent:learning:a").outcomes
    assert len(stored) == LEARNING_KEPT
    assert [o.outcome_id for o in stored] == [o.outcome_id for o in told[5:]]
    assert stored[-1] == again


async def test_a_write_that_lost_the_race_is_made_again_over_what_the_other_writer_saved() -> None:
    api = StateApi()
    kept = history(api)
    first, other, mine = outcome("t1"), outcome("t2"), outcome("t3")
    await kept.record("a", first)
    # Another replica of the app adds its run between this write's read and its save.
    both = {"outcomes": [first.model_dump(mode="json"), other.model_dump(mode="json")]}
    api.before_save.append(lambda: api.put("agent:learning:a", both))
    await kept.record("a", mine)
    assert [o.job_id for o in api.stored("agent:learning:a").outcomes] == ["t1", "t2", "t3"]
