"""The listings of escalations: the waiting ones (what the inbox pages through), those of each
decided status, and every escalation kept; each newest first, narrowed by what waits, how long
it has waited and how confident the step was.

A row per escalation (its id, creation time, kind of waiting party and confidence) sits in a
segment. The newest segment, the head, lives inside the listing's directory; when it fills it
is sealed into a key of its own and the directory keeps its summary (count, time span, kinds,
lowest confidence). A first page therefore reads the directory alone in the common case, a
deeper or narrower one only the sealed segments whose summary may hold a match, and the page's
records are then read in one bulk read. A segment number is never reused, and every record
remembers the number it was listed under in each listing, so taking a row out reads just that
segment.

Rows are a hint, not the truth: the page's records are read and checked, so a decided
escalation whose row has not been taken out of the waiting listing yet is left out of the
page, never shown as waiting. Everything here is pure: `agora.escalation.listing` keeps it in
the state store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from agora.core.escalation.context import EscalationContext
from agora.core.escalation.record import EscalationRecord, WaitingPartyKind

__all__ = [
    "HEAD_CAPACITY",
    "MAX_AGE_MINUTES",
    "PAGE_SLACK",
    "AddRow",
    "ListedRow",
    "ListingDirectory",
    "ListingFilter",
    "RemoveRow",
    "SealedSegment",
    "SegmentSummary",
    "Written",
    "apply",
    "confidence_of",
    "enough",
    "newest_first",
    "row_of",
    "segments_to_read",
    "segments_touched",
    "summarize",
]

HEAD_CAPACITY = 200
"""Rows the head holds before it is sealed: a directory stays a few tens of KB, and a page of 50
usually comes from the head alone."""
PAGE_SLACK = 10
"""Rows read beyond a page, so a page still fills when a few of its rows are stale (decided
since they were listed)."""
MAX_AGE_MINUTES = 366 * 24 * 60


class ListingFilter(BaseModel):
    """Which waiting escalations a listing shows; every field empty shows them all."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: WaitingPartyKind | None = Field(
        default=None, description="Only those a party of this kind waits on."
    )
    older_than_minutes: int | None = Field(
        default=None, ge=0, le=MAX_AGE_MINUTES, description="Only those waiting at least this long."
    )
    below_confidence: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Only steps whose confidence is below this."
    )

    def admits(self, row: ListedRow, now: datetime) -> bool:
        if self.kind is not None and row.kind is not self.kind:
            return False
        if self.older_than_minutes is not None and row.created_at > self.created_by(now):
            return False
        return self.below_confidence is None or (
            row.confidence is not None and row.confidence < self.below_confidence
        )

    def admits_record(self, record: EscalationRecord, now: datetime) -> bool:
        return self.admits(row_of(record), now)

    def created_by(self, now: datetime) -> datetime:
        """The latest creation time `older_than_minutes` admits."""
        return now - timedelta(minutes=self.older_than_minutes or 0)


class ListedRow(BaseModel):
    """One waiting escalation as the listing keeps it: what ordering and filtering need."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    escalation_id: str
    created_at: AwareDatetime
    kind: WaitingPartyKind
    confidence: float | None = None


def confidence_of(record: EscalationRecord) -> float | None:
    """The step's confidence (a checkpoint, asked before the step ran, has none)."""
    return record.context.confidence if isinstance(record.context, EscalationContext) else None


def row_of(record: EscalationRecord) -> ListedRow:
    return ListedRow(
        escalation_id=record.escalation_id,
        created_at=record.created_at,
        kind=record.waiting_party.kind,
        confidence=confidence_of(record),
    )


def newest_first(rows: Iterable[ListedRow]) -> list[ListedRow]:
    """Rows by creation, the newest first (ties by id), each id once."""
    unique = {row.escalation_id: row for row in rows}
    return sorted(unique.values(), key=lambda r: (r.created_at, r.escalation_id), reverse=True)


class SegmentSummary(BaseModel):
    """What the directory keeps of a sealed segment, to skip those that cannot hold a match."""

    model_config = ConfigDict(frozen=True)

    number: int = Field(ge=0)
    count: int = Field(ge=1)
    newest: AwareDatetime
    oldest: AwareDatetime
    kinds: list[WaitingPartyKind]
    lowest_confidence: float | None = None

    def may_hold(self, shown: ListingFilter, now: datetime) -> bool:
        if shown.kind is not None and shown.kind not in self.kinds:
            return False
        if shown.older_than_minutes is not None and self.oldest > shown.created_by(now):
            return False
        return shown.below_confidence is None or (
            self.lowest_confidence is not None and self.lowest_confidence < shown.below_confidence
        )


def summarize(number: int, rows: Sequence[ListedRow]) -> SegmentSummary | None:
    if not rows:
        return None
    confidences = [r.confidence for r in rows if r.confidence is not None]
    return SegmentSummary(
        number=number,
        count=len(rows),
        newest=max(r.created_at for r in rows),
        oldest=min(r.created_at for r in rows),
        kinds=sorted({r.kind for r in rows}),
        lowest_confidence=min(confidences) if confidences else None,
    )


class SealedSegment(BaseModel):
    rows: list[ListedRow] = []


class ListingDirectory(BaseModel):
    """The listing's one always-read key: the head's rows and the sealed segments' summaries."""

    head_number: int = Field(default=0, ge=0)
    head: list[ListedRow] = []
    sealed: list[SegmentSummary] = []

    @property
    def total(self) -> int:
        return len(self.head) + sum(s.count for s in self.sealed)


@dataclass(frozen=True)
class AddRow:
    """List `row` (in the head)."""

    row: ListedRow


@dataclass(frozen=True)
class RemoveRow:
    """Take the escalation created at `created_at` out: of the head, and of every sealed segment
    whose time span holds that time (a segment's span is that of its own rows, so the row is in
    one of them if it is anywhere)."""

    escalation_id: str
    created_at: datetime


@dataclass
class Written:
    """What a batch changes: the new directory and the sealed segments it rewrote (each
    whole), or nothing (`changed` False) when every change was already made."""

    directory: ListingDirectory
    segments: dict[int, SealedSegment] = field(default_factory=dict)
    changed: bool = False


def segments_touched(
    directory: ListingDirectory, changes: Iterable[AddRow | RemoveRow], capacity: int = HEAD_CAPACITY
) -> set[int]:
    """The sealed segments a batch may change: those that may hold a row it takes out, and the
    key the head is sealed into if the batch may fill it (a partly applied seal may have
    written that key already)."""
    touched = set()
    added = 0
    for change in changes:
        if isinstance(change, AddRow):
            added += 1
        else:
            touched |= {s.number for s in directory.sealed if s.oldest <= change.created_at <= s.newest}
    if len(directory.head) + added >= capacity:
        touched.add(directory.head_number)
    return touched


def apply(
    directory: ListingDirectory,
    segments: dict[int, SealedSegment],
    changes: Sequence[AddRow | RemoveRow],
    capacity: int = HEAD_CAPACITY,
) -> Written:
    """The directory and sealed segments after `changes`, in order (`segments`: those
    `segments_touched` names, as read). Idempotent: a row already listed is not listed twice,
    one not listed is not missed, so a batch redone after a write that was applied in part (a
    store that applies a transaction's other keys when one key's etag does not match)
    converges."""
    head_number = directory.head_number
    head = {r.escalation_id: r for r in directory.head}
    sealed = {n: {r.escalation_id: r for r in segment.rows} for n, segment in segments.items()}
    spans = [(s.number, s.oldest, s.newest) for s in directory.sealed]
    touched: set[int] = set()
    for change in changes:
        if isinstance(change, AddRow):
            head[change.row.escalation_id] = change.row
            continue
        head.pop(change.escalation_id, None)
        for number, oldest, newest in spans:
            rows = sealed.get(number, {})
            if oldest <= change.created_at <= newest and change.escalation_id in rows:
                rows.pop(change.escalation_id)
                touched.add(number)
    if len(head) >= capacity:
        # Sealed into the key of its number, with whatever a partly applied seal put there.
        sealed.setdefault(head_number, {}).update(head)
        touched.add(head_number)
        head, head_number = {}, head_number + 1
    summaries = {s.number: s for s in directory.sealed}
    for number in touched:
        summary = summarize(number, list(sealed[number].values()))
        if summary is None:
            summaries.pop(number, None)
        else:
            summaries[number] = summary
    updated = ListingDirectory(
        head_number=head_number,
        head=sorted(head.values(), key=lambda r: (r.created_at, r.escalation_id)),
        sealed=[summaries[n] for n in sorted(summaries)],
    )
    rewritten = {
        n: SealedSegment(rows=sorted(sealed[n].values(), key=lambda r: (r.created_at, r.escalation_id)))
        for n in touched
    }
    rewritten = {n: s for n, s in rewritten.items() if s != segments.get(n, SealedSegment())}
    return Written(updated, rewritten, changed=updated != directory or bool(rewritten))


def segments_to_read(
    directories: dict[str, ListingDirectory], shown: ListingFilter, now: datetime
) -> list[tuple[str, SegmentSummary]]:
    """The sealed segments of the listings `directories` (by name) that may hold a match, the
    newest rows first."""
    maybe = [(name, s) for name, d in directories.items() for s in d.sealed if s.may_hold(shown, now)]
    return sorted(maybe, key=lambda found: (found[1].newest, found[1].number), reverse=True)


def enough(found: Sequence[ListedRow], wanted: int, next_segment: SegmentSummary | None) -> bool:
    """Whether `found` (the matches so far, newest first) already has the `wanted` newest ones:
    it has that many, and no segment left to read holds a newer row than the last of them."""
    if next_segment is None:
        return True
    if len(found) < wanted:
        return False
    return next_segment.newest < found[wanted - 1].created_at
