"""The records of workflow runs as people list them: by state (by id), or every state newest
first from the creation-ordered listing, reading only the page's records."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import cast

from agora.core.plans.record import PlanRecord, PlanState, new_record
from agora.core.plans.request import PlanRequest
from agora.runtime.state import StateRepository, Versioned
from agora.runtime.status_index import IdSet, StatusIndex
from agora.runtime.workflows import RunRecords
from tests.unit.test_status_index import MemoryStore

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


class PlanStore:
    """`get`, `save` and `get_many` of a state repository; remembers which ids each bulk read asked for."""

    def __init__(self) -> None:
        self.values: dict[str, PlanRecord] = {}
        self.bulk_reads: list[list[str]] = []

    async def get(self, item_id: str) -> Versioned[PlanRecord] | None:
        return Versioned(self.values[item_id], "1") if item_id in self.values else None

    async def save(self, item_id: str, value: PlanRecord) -> None:
        self.values[item_id] = value

    async def get_many(self, item_ids: Iterable[str]) -> dict[str, Versioned[PlanRecord]]:
        asked = list(item_ids)
        self.bulk_reads.append(asked)
        return {i: Versioned(self.values[i], "1") for i in asked if i in self.values}


def records_over(store: PlanStore, index: StatusIndex) -> RunRecords[PlanRecord]:
    return RunRecords(
        cast(StateRepository[PlanRecord], store),
        index,
        lambda record: str(record.state),
        lambda record: record.created_at,
    )


async def started(records: RunRecords[PlanRecord], plan_id: str, minutes: int, *states: PlanState) -> None:
    """A plan created `minutes` after T0, saved as its run would save it, through `states`."""
    record = new_record(PlanRequest(plan_id=plan_id, task="t"), T0 + timedelta(minutes=minutes))
    previous: str | None = None
    await records.save(plan_id, record, previous)
    for state in states:
        previous, record = str(record.state), record.model_copy(update={"state": state})
        await records.save(plan_id, record, previous)


async def test_with_no_state_every_run_is_listed_newest_first() -> None:
    store, index = PlanStore(), StatusIndex(cast(StateRepository[IdSet], MemoryStore()), shards=4)
    records = records_over(store, index)
    await started(records, "b-done", 0, PlanState.RUNNING, PlanState.COMPLETED)
    await started(records, "c-failed", 1, PlanState.FAILED)
    await started(records, "a-running", 2, PlanState.RUNNING)
    await started(records, "d-planning", 3)

    total, page = await records.page(None, limit=2, offset=0)
    assert total == 4
    assert [r.plan_id for r in page] == ["d-planning", "a-running"]
    total, page = await records.page(None, limit=2, offset=2)
    assert [(r.plan_id, r.state) for r in page] == [("c-failed", "FAILED"), ("b-done", "COMPLETED")]
    assert store.bulk_reads[-1] == ["c-failed", "b-done"]  # only the page's records are read


async def test_a_state_narrows_the_listing_to_its_runs_by_id() -> None:
    store, index = PlanStore(), StatusIndex(cast(StateRepository[IdSet], MemoryStore()), shards=4)
    records = records_over(store, index)
    await started(records, "z-running", 0, PlanState.RUNNING)
    await started(records, "y-done", 1, PlanState.COMPLETED)
    await started(records, "x-running", 2, PlanState.RUNNING)

    total, page = await records.page(str(PlanState.RUNNING), limit=50, offset=0)
    assert total == 2 and [r.plan_id for r in page] == ["x-running", "z-running"]
    total, page = await records.page(str(PlanState.ABORTED), limit=50, offset=0)
    assert total == 0 and page == []


async def test_a_listed_run_without_a_record_is_left_out_of_the_page() -> None:
    store, index = PlanStore(), StatusIndex(cast(StateRepository[IdSet], MemoryStore()), shards=4)
    records = records_over(store, index)
    await started(records, "kept", 0, PlanState.COMPLETED)
    await started(records, "gone", 1, PlanState.COMPLETED)
    del store.values["gone"]  # the index is a hint: the record is the truth

    total, page = await records.page(None, limit=50, offset=0)
    assert total == 2 and [r.plan_id for r in page] == ["kept"]
