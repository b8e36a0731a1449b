"""Where the board lists a task: by status while under way; by status and the period it ended in
once it ended, so those listings expire with the records they list."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agora.core.market import AllocationStatus, TaskSpec
from agora.core.task_lifecycle import StatusChange, TaskRecord
from agora.taskboard.listings import TaskListings

WEEK = 7 * 24 * 3600


def ended(status: AllocationStatus, at: datetime) -> TaskRecord:
    spec = TaskSpec(task_id="t1", description="d", required_skills=["s"])
    return TaskRecord(spec=spec, status=status, history=[StatusChange(status=status, at=at)])


def test_a_task_under_way_is_listed_under_its_status_and_an_ended_one_under_its_period() -> None:
    listings = TaskListings(WEEK)
    at = datetime(2026, 11, 27, 6, 30, tzinfo=UTC)
    assert listings.period_seconds == WEEK // 16
    assert listings.listed_as(ended(AllocationStatus.ALLOCATED, at)) == "ALLOCATED"
    period = int(at.timestamp()) // listings.period_seconds * listings.period_seconds
    assert listings.listed_as(ended(AllocationStatus.FAILED, at)) == f"FAILED@{period}"
    assert listings.ttl_seconds(f"FAILED@{period}") == WEEK + 2 * listings.period_seconds
    assert listings.ttl_seconds("ALLOCATED") is None


def test_the_listings_of_an_ended_status_span_the_retention_and_no_more() -> None:
    listings = TaskListings(WEEK)
    now = datetime(2026, 11, 27, 6, 30, tzinfo=UTC)
    names = listings.listings_of(AllocationStatus.COMPLETED, now)
    assert len(names) <= 20
    for age in (timedelta(0), timedelta(seconds=WEEK - 1), timedelta(seconds=-60)):
        assert listings.listed_as(ended(AllocationStatus.COMPLETED, now - age)) in names
    assert listings.listed_as(ended(AllocationStatus.COMPLETED, now - timedelta(days=30))) not in names
    assert listings.listings_of(AllocationStatus.PENDING, now) == ["PENDING"]


def test_a_short_retention_has_minute_periods_and_none_lists_by_status_alone() -> None:
    assert TaskListings(120).period_seconds == 60
    at = datetime(2026, 11, 27, 6, 30, tzinfo=UTC)
    kept = TaskListings(None)
    assert kept.listed_as(ended(AllocationStatus.COMPLETED, at)) == "COMPLETED"
    assert kept.listings_of(AllocationStatus.COMPLETED, at) == ["COMPLETED"]
    assert kept.retention_left(ended(AllocationStatus.COMPLETED, at), at) is None


def test_the_retention_left_counts_from_the_task_s_end() -> None:
    listings = TaskListings(3600)
    at = datetime(2026, 11, 27, 6, 0, tzinfo=UTC)
    record = ended(AllocationStatus.COMPLETED, at)
    assert listings.retention_left(record, at + timedelta(minutes=10)) == 3000
    assert listings.retention_left(record, at + timedelta(hours=2)) == 1  # past it: gone at once
    assert listings.retention_left(ended(AllocationStatus.ALLOCATED, at), at) is None
