"""Where the board lists a task by status, so that the listings of tasks that ended end too.

A task still under way is listed under its status (`PENDING`, `BIDDING`, `ALLOCATED`). A task
that ended is listed under its status and the period it ended in, `<STATUS>@<period start,
epoch seconds>`. A period is a sixteenth of the retention (at least a minute), and a period's
keys carry a state TTL of the retention plus two periods: they expire on their own, like the
records they list (kept for the retention by their own state TTL), and no write ever grows a
listing past the tasks of one period. The board's status listing of an ended status reads the
periods of the last retention (about twenty, in one bulk read). A listed task whose record
has expired (up to two periods more) is a hint like any other index entry: readers check the
record.

Without a retention (tasks kept for ever), an ended task is listed under its status alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from math import ceil

from agora.core.market import TERMINAL_STATUSES, AllocationStatus
from agora.core.task_lifecycle import TaskRecord

__all__ = ["PERIODS_PER_RETENTION", "TaskListings"]

PERIODS_PER_RETENTION = 16
MIN_PERIOD_SECONDS = 60
PERIOD_SEPARATOR = "@"


@dataclass(frozen=True)
class TaskListings:
    retention_seconds: int | None
    """How long a task that ended is kept (None: for ever)."""

    @property
    def period_seconds(self) -> int:
        assert self.retention_seconds is not None
        return max(MIN_PERIOD_SECONDS, ceil(self.retention_seconds / PERIODS_PER_RETENTION))

    def listed_as(self, record: TaskRecord) -> str:
        """The listing the task is in (the one its status and, once it ended, its end give)."""
        status = record.status
        if status not in TERMINAL_STATUSES or self.retention_seconds is None:
            return str(status)
        period = self.period_seconds
        return f"{status}{PERIOD_SEPARATOR}{int(ended_at(record).timestamp()) // period * period}"

    def listings_of(self, status: AllocationStatus, now: datetime) -> list[str]:
        """Every listing that may hold tasks in `status` now: for an ended status, those of
        the periods a retention back, and the next one (another replica's clock may be ahead)."""
        if status not in TERMINAL_STATUSES or self.retention_seconds is None:
            return [str(status)]
        period = self.period_seconds
        newest = int(now.timestamp()) // period + 1
        oldest = (int(now.timestamp()) - self.retention_seconds) // period - 1
        return [f"{status}{PERIOD_SEPARATOR}{start * period}" for start in range(oldest, newest + 1)]

    def ttl_seconds(self, listing: str) -> int | None:
        """The state TTL of a listing's keys: a period's outlives the records it lists."""
        if PERIOD_SEPARATOR not in listing or self.retention_seconds is None:
            return None
        return self.retention_seconds + 2 * self.period_seconds

    def retention_left(self, record: TaskRecord, now: datetime) -> int | None:
        """How much longer an ended task's record is kept (at least a second); None for a task
        under way, or without a retention."""
        if record.status not in TERMINAL_STATUSES or self.retention_seconds is None:
            return None
        return max(1, ceil(self.retention_seconds - (now - ended_at(record)).total_seconds()))


def ended_at(record: TaskRecord) -> datetime:
    """When the task reached its status (its last change: an ended task changes no more)."""
    return next(
        (change.at for change in reversed(record.history) if change.status is record.status),
        record.history[-1].at,
    )
