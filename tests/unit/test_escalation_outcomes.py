"""The escalation learning records: kept for the retention, and only the most recent ones."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import cast

from agora.core.outcomes.record import OutcomeStatus, StepOutcome
from agora.escalation.outcomes import DaprOutcomeStore
from agora.runtime.state import StateRepository, Versioned
from agora.runtime.status_index import IdSet
from tests.unit.test_status_index import MemoryStore


class RecordStore:
    """`save`, `get_many` and `delete` of a state repository; remembers each write's TTL."""

    def __init__(self) -> None:
        self.values: dict[str, StepOutcome] = {}
        self.ttls: dict[str, int | None] = {}

    async def save(self, item_id: str, value: StepOutcome, *, ttl_seconds: int | None = None) -> None:
        self.values[item_id] = value
        self.ttls[item_id] = ttl_seconds

    async def get_many(self, item_ids: Iterable[str]) -> dict[str, Versioned[StepOutcome]]:
        return {i: Versioned(self.values[i], "1") for i in item_ids if i in self.values}

    async def delete(self, item_id: str) -> None:
        self.values.pop(item_id, None)


def _outcome(n: int) -> StepOutcome:
    return StepOutcome(
        outcome_id=f"escalation-{n}",
        step_id="1",
        job_id="job",
        retry_count=0,
        final_status=OutcomeStatus.SKIPPED,
        success_without_retry=False,
        timestamp=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=n),
    )


def _store(records: RecordStore, index: MemoryStore, kept: int) -> DaprOutcomeStore:
    return DaprOutcomeStore(
        cast(StateRepository[StepOutcome], records),
        cast(StateRepository[IdSet], index),
        retention_seconds=3600,
        kept=kept,
    )


async def test_only_the_most_recent_records_are_kept() -> None:
    records, index = RecordStore(), MemoryStore()
    store = _store(records, index, kept=3)
    for n in range(5):
        await store.add(_outcome(n))

    assert [o.outcome_id for o in await store.all()] == ["escalation-2", "escalation-3", "escalation-4"]
    assert sorted(records.values) == ["escalation-2", "escalation-3", "escalation-4"]
    listed = {i for ids, _ in index.values.values() for i in ids.ids}
    assert listed == set(records.values)


async def test_records_are_written_with_the_retention_and_unlisted_once_expired() -> None:
    records, index = RecordStore(), MemoryStore()
    store = _store(records, index, kept=10)
    await store.add(_outcome(1))
    await store.add(_outcome(2))
    assert records.ttls == {"escalation-1": 3600, "escalation-2": 3600}

    del records.values["escalation-1"]  # its TTL ended in the store
    assert [o.outcome_id for o in await store.all()] == ["escalation-2"]
    listed = {i for ids, _ in index.values.values() for i in ids.ids}
    assert listed == {"escalation-2"}
