"""The listing of waiting escalations: rows in a head and sealed segments, pages newest first,
narrowed by a filter, and parking in batches through `EscalationStore`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from pydantic import BaseModel

from agora.core.errors import AgoraError
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.listing import (
    AddRow,
    ListedRow,
    ListingDirectory,
    ListingFilter,
    RemoveRow,
    SealedSegment,
    apply,
    segments_touched,
    summarize,
)
from agora.core.escalation.record import ParkRequest, WaitingPartyKind
from agora.escalation.listing import EscalationListings, directory_key, segment_key
from agora.escalation.store import AdoptionDone, EscalationSlot, EscalationStore, adopt_earlier_records
from agora.runtime.state import StateRepository
from agora.runtime.status_index import IdSet, StatusIndex
from agora.sdk.testing import MemoryRepository
from tests.unit.test_status_index import MemoryStore

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
WAITING = "WAITING_FOR_HUMAN"
KINDS = [WaitingPartyKind.SESSION, WaitingPartyKind.TASK, WaitingPartyKind.DEBATE]


def row(i: int, *, minutes_ago: float | None = None) -> ListedRow:
    return ListedRow(
        escalation_id=f"e-{i:05d}",
        created_at=NOW - timedelta(minutes=minutes_ago if minutes_ago is not None else (10_000 - i) / 10),
        kind=KINDS[i % 3],
        confidence=(i % 100) / 100,
    )


def test_a_full_head_is_sealed_under_its_number_and_a_new_head_begins() -> None:
    written = apply(ListingDirectory(), {}, [AddRow(row(i)) for i in range(5)], capacity=5)
    assert written.directory.head_number == 1 and written.directory.head == []
    [summary] = written.directory.sealed
    assert (summary.number, summary.count, summary.lowest_confidence) == (0, 5, 0.0)
    assert [r.escalation_id for r in written.segments[0].rows] == [f"e-{i:05d}" for i in range(5)]
    assert written.directory.total == 5


def test_changes_are_idempotent_and_a_row_leaves_every_segment_whose_span_holds_it() -> None:
    start = apply(ListingDirectory(), {}, [AddRow(row(i)) for i in range(3)], capacity=10)
    again = apply(start.directory, {}, [AddRow(row(i)) for i in range(3)], capacity=10)
    assert not again.changed
    # A seal applied in part left e-00001 in the head and in segment 0 too.
    leftover = SealedSegment(rows=[row(1)])
    summary = summarize(0, leftover.rows)
    assert summary is not None
    directory = start.directory.model_copy(update={"sealed": [summary], "head_number": 1})
    removal = [RemoveRow("e-00001", row(1).created_at)]
    assert segments_touched(directory, removal) == {0}
    gone = apply(directory, {0: leftover}, removal, capacity=10)
    assert [r.escalation_id for r in gone.directory.head] == ["e-00000", "e-00002"]
    assert gone.segments[0].rows == [] and gone.directory.sealed == []


def test_a_head_about_to_fill_is_sealed_into_a_key_read_first() -> None:
    sealed = apply(ListingDirectory(), {}, [AddRow(row(i)) for i in range(3)], capacity=4)
    assert segments_touched(sealed.directory, [AddRow(row(99))], capacity=4) == {0}
    # a partly applied earlier seal wrote segment 0 with e-00050: kept beside the head's rows
    earlier = {0: SealedSegment(rows=[row(50)])}
    full = apply(sealed.directory, earlier, [AddRow(row(99))], capacity=4)
    assert full.directory.head == [] and full.directory.sealed[0].count == 5


async def listing_with(
    rows: list[ListedRow], capacity: int
) -> tuple[EscalationListings, MemoryRepository[BaseModel]]:
    repository = MemoryRepository(BaseModel)
    directory, segments = ListingDirectory(), dict[int, SealedSegment]()
    for r in rows:
        touched = segments_touched(directory, [AddRow(r)], capacity=capacity)
        written = apply(
            directory, {n: segments.get(n, SealedSegment()) for n in touched}, [AddRow(r)], capacity
        )
        directory, segments = written.directory, {**segments, **written.segments}
    repository.values[directory_key(WAITING)] = (directory.model_dump(mode="json"), "1")
    for number, segment in segments.items():
        repository.values[segment_key(WAITING, number)] = (segment.model_dump(mode="json"), "1")
    return EscalationListings(repository.typed()), repository


@pytest.mark.parametrize(
    "shown",
    [
        ListingFilter(),
        ListingFilter(kind=WaitingPartyKind.DEBATE),
        ListingFilter(below_confidence=0.05),
        ListingFilter(older_than_minutes=600),
        ListingFilter(kind=WaitingPartyKind.TASK, older_than_minutes=100, below_confidence=0.5),
    ],
)
async def test_a_page_is_the_newest_matches_whatever_the_segments(shown: ListingFilter) -> None:
    rows = [row(i) for i in range(1000)]
    listings, _ = await listing_with(rows, capacity=50)
    expected = sorted(
        (r for r in rows if shown.admits(r, NOW)), key=lambda r: (r.created_at, r.escalation_id), reverse=True
    )
    for offset in (0, 50, 400):
        page = await listings.page([WAITING], shown, offset, 50, NOW)
        assert page.total == 1000
        assert [r.escalation_id for r in page.rows[:50]] == [
            r.escalation_id for r in expected[offset : offset + 50]
        ]


async def test_a_first_page_takes_one_read() -> None:
    listings, repository = await listing_with([row(i) for i in range(1100)], capacity=200)
    repository.calls = 0
    page = await listings.page([WAITING], ListingFilter(), 0, 50, NOW)  # 100 rows in the head
    assert len(page.rows) == 60 and repository.calls == 1
    await listings.page([WAITING], ListingFilter(kind=WaitingPartyKind.SESSION), 0, 50, NOW)
    # 33 in the head: the newest sealed segment too, read with the directory as last seen
    assert repository.calls == 2


async def test_a_row_created_late_in_a_newer_segment_still_comes_first() -> None:
    rows = [row(i) for i in range(100)]
    listings, _ = await listing_with(rows, capacity=10)
    # created before the rows listed last, listed after them (a park that took longer)
    late = ListedRow(escalation_id="late", created_at=row(95).created_at, kind=WaitingPartyKind.TASK)
    await listings(WAITING).add([late])
    page = await listings.page([WAITING], ListingFilter(), 0, 6, NOW)
    assert [r.escalation_id for r in page.rows[:6]] == [
        "e-00099",
        "e-00098",
        "e-00097",
        "e-00096",
        "late",
        "e-00095",
    ]
    assert page.total == 101
    await listings(WAITING).remove("e-00003", row(3).created_at)  # from a sealed segment
    assert (await listings.page([WAITING], ListingFilter(), 0, 200, NOW)).total == 100


async def test_a_page_of_several_listings_merges_them_newest_first() -> None:
    listings = EscalationListings(MemoryRepository(BaseModel).typed())
    await listings(WAITING).add([row(i) for i in range(0, 300, 2)])
    await listings("RESOLVED").add([row(i) for i in range(1, 300, 2)])
    page = await listings.page([WAITING, "RESOLVED"], ListingFilter(), 0, 50, NOW)
    assert [r.escalation_id for r in page.rows[:50]] == [f"e-{i:05d}" for i in range(299, 249, -1)]
    assert page.total == 300


def park_request(i: int, *, prompt: str = "Migrate the orders table") -> ParkRequest:
    context = EscalationContext(
        job_id=f"job-{i}",
        step=1,
        validation_results=[],
        confidence=0.3,
        retry_count=0,
        error_history=[],
        prompt_used=prompt,
        output_summary="Not sure the migration is safe",
    )
    return ParkRequest.model_validate(
        {"waiting_party": {"kind": "session", "id": f"s-{i}"}, "context": context}
    )


def store_over() -> tuple[EscalationStore, MemoryRepository[EscalationSlot]]:
    slots = MemoryRepository(EscalationSlot)
    return EscalationStore(slots.typed(), EscalationListings(MemoryRepository(BaseModel).typed())), slots


async def test_parks_that_arrive_together_are_written_together_and_listed() -> None:
    store, slots = store_over()
    records = await asyncio.gather(*(store.park(f"e-{i}", park_request(i), None) for i in range(100)))
    assert {r.escalation_id for r in records} == {f"e-{i}" for i in range(100)}
    assert slots.calls <= 6, slots.calls  # not one read and one write per park
    page = await store.listings.page([WAITING], ListingFilter(), 0, 200, datetime.now(UTC))
    assert page.total == 100 and len(page.rows) == 100


async def test_parking_again_answers_the_record_and_a_different_park_is_a_conflict() -> None:
    store, _ = store_over()
    first = await store.park("e-1", park_request(1), "00-trace")
    assert await store.park("e-1", park_request(1), None) == first
    with pytest.raises(AgoraError, match="already parked"):
        await store.park("e-1", park_request(1, prompt="something else"), None)
    # two different parks of one id at once: one record, the other told of the conflict
    results = await asyncio.gather(
        store.park("e-2", park_request(2), None),
        store.park("e-2", park_request(2, prompt="other"), None),
        return_exceptions=True,
    )
    assert sum(isinstance(r, AgoraError) for r in results) == 1
    page = await store.listings.page([WAITING], ListingFilter(), 0, 10, datetime.now(UTC))
    assert sorted(r.escalation_id for r in page.rows) == ["e-1", "e-2"]


async def test_a_park_refused_alone_keeps_its_reason_when_the_rest_of_its_batch_fails() -> None:
    listed = MemoryRepository(BaseModel)
    store = EscalationStore(MemoryRepository(EscalationSlot).typed(), EscalationListings(listed.typed()))
    await store.park("e-1", park_request(1), None)

    async def listing_away(keys: object) -> dict[str, object]:
        raise ConnectionError("listing store away")

    listed.get_many_raw = listing_away  # type: ignore[method-assign, assignment]
    conflicting, new = await asyncio.gather(
        store.park("e-1", park_request(1, prompt="something else"), None),
        store.park("e-2", park_request(2), None),
        return_exceptions=True,
    )
    assert isinstance(conflicting, AgoraError) and "already parked" in str(conflicting)
    assert isinstance(new, ConnectionError)


async def test_a_record_another_replica_created_first_wins_and_is_compared() -> None:
    store, slots = store_over()
    other, _ = store_over()
    theirs = await other.park("e-1", park_request(1), None)
    slots.values["e-1"] = other._slots.values["e-1"]  # type: ignore[attr-defined]
    assert await store.park("e-1", park_request(1), None) == theirs


async def test_records_an_earlier_version_kept_are_adopted_once() -> None:
    store, _ = store_over()
    await store.park("e-kept", park_request(1), None)
    earlier = StatusIndex(cast(StateRepository[IdSet], MemoryStore()), shards=4)
    for escalation_id in ("e-kept", "e-old-1", "e-old-2"):
        await earlier.add(escalation_id, "WAITING_FOR_HUMAN", NOW)
    await earlier.move("e-old-3", None, "RESOLVED")  # listed before the creation listing existed
    adopted: list[str] = []

    async def adopt(escalation_id: str) -> None:
        adopted.append(escalation_id)

    done = MemoryRepository(AdoptionDone)
    await adopt_earlier_records(earlier, store, adopt, done.typed())
    assert sorted(adopted) == ["e-old-1", "e-old-2", "e-old-3"]
    await adopt_earlier_records(earlier, store, adopt, done.typed())
    assert len(adopted) == 3  # remembered: not again


async def test_two_replicas_adding_and_removing_at_once_lose_no_change() -> None:
    repository = MemoryRepository(BaseModel)
    ours, theirs = EscalationListings(repository.typed()), EscalationListings(repository.typed())
    rows = [row(i) for i in range(600)]
    await asyncio.gather(
        *(ours(WAITING).add([r]) for r in rows[0::2]), *(theirs(WAITING).add([r]) for r in rows[1::2])
    )
    await asyncio.gather(
        *(ours(WAITING).remove(r.escalation_id, r.created_at) for r in rows[0:100]),
        *(theirs(WAITING).remove(r.escalation_id, r.created_at) for r in rows[100:200]),
    )
    page = await ours.page([WAITING], ListingFilter(), 0, 500, NOW)
    assert page.total == 400
    assert sorted(r.escalation_id for r in page.rows) == sorted(r.escalation_id for r in rows[200:])
