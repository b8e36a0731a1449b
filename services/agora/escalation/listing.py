"""The listings of escalations (`agora.core.escalation.listing`) kept in the state store: one
per status. A page of several statuses (every escalation kept) merges their listings.

Changes are group-committed: every change waits for the write that contains it, and a listing
writes all changes queued since its last write together: one read of its directory, one read
of the sealed segments the changes may touch (only when some row leaves a sealed segment, or
the head fills), and one state transaction guarded by those keys' etags. A write that loses an
etag race to another replica is redone from a fresh read (the changes are idempotent). A key
that does not exist yet is first created empty by a write the store refuses over an existing
key, as the status index does.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from agora.core.escalation.listing import (
    HEAD_CAPACITY,
    PAGE_SLACK,
    AddRow,
    ListedRow,
    ListingDirectory,
    ListingFilter,
    RemoveRow,
    SealedSegment,
    apply,
    enough,
    newest_first,
    segments_to_read,
    segments_touched,
)
from agora.runtime.batching import group_commit
from agora.runtime.sidecar import DaprError
from agora.runtime.state import ConcurrencyConflict, StateRepository

log = logging.getLogger(__name__)

LISTING_NAMESPACE = "escalation:listing"
WRITE_ATTEMPTS = 10
SEGMENTS_READ_AT_ONCE = 8


def directory_key(name: str) -> str:
    return f"{name}:directory"


def segment_key(name: str, number: int) -> str:
    return f"{name}:segment:{number}"


@dataclass(frozen=True)
class ListingPage:
    rows: list[ListedRow]
    """The newest matches from the page's offset on, a few more than asked (`PAGE_SLACK`)."""
    total: int
    """How many escalations the listings hold, whatever the filter."""


class EscalationListings:
    """The listing of each status, by name, and pages over several of them."""

    def __init__(self, repository: StateRepository[BaseModel]) -> None:
        self._repository = repository
        self._listings: dict[str, EscalationListing] = {}
        self._last_parsed: dict[str, tuple[str, ListingDirectory]] = {}

    def _last(self, name: str) -> ListingDirectory | None:
        last = self._last_parsed.get(directory_key(name))
        return last[1] if last is not None else None

    def _parsed(self, key: str, found: tuple[Any, str | None] | None) -> ListingDirectory:
        """`found` (a directory as read, with its etag) parsed; the directory read last under
        `key` is parsed once: an inbox polled while nothing changes reads the same version."""
        if found is None:
            return ListingDirectory()
        data, etag = found
        last = self._last_parsed.get(key)
        if etag is not None and last is not None and last[0] == etag:
            return last[1]
        directory = ListingDirectory.model_validate(data)
        if etag is not None:
            self._last_parsed[key] = (etag, directory)
        return directory

    def __call__(self, name: str) -> EscalationListing:
        if name not in self._listings:
            self._listings[name] = EscalationListing(self._repository, name)
        return self._listings[name]

    async def page(
        self, names: Sequence[str], shown: ListingFilter, offset: int, limit: int, now: datetime
    ) -> ListingPage:
        """The newest rows of the listings `names` that `shown` admits, from `offset` on: their
        directories first (one read), then only the sealed segments whose summary may hold a
        match, until no unread one can hold a newer row than the page's last."""
        # The newest sealed segment of each listing (as last seen) is read with the directories:
        # a page the head cannot fill then needs no second read.
        guessed = [
            segment_key(n, last.head_number - 1)
            for n in names
            if (last := self._last(n)) and last.head_number
        ]
        raw = await self._repository.get_many_raw([*(directory_key(n) for n in names), *guessed])
        directories = {n: self._parsed(directory_key(n), raw.get(directory_key(n))) for n in names}
        wanted = offset + limit + PAGE_SLACK
        found = newest_first(r for d in directories.values() for r in d.head if shown.admits(r, now))
        pending = segments_to_read(directories, shown, now)
        at_once = 1
        while not enough(found, wanted, pending[0][1] if pending else None):
            # One segment first (usually enough), then twice as many at each read.
            batch, pending = pending[:at_once], pending[at_once:]
            at_once = min(at_once * 2, SEGMENTS_READ_AT_ONCE)
            keys = [segment_key(n, s.number) for n, s in batch]
            unread = [key for key in keys if key not in raw]
            if unread:
                raw.update(await self._repository.get_many_raw(unread))
            rows = [r for key in keys if key in raw for r in SealedSegment.model_validate(raw[key][0]).rows]
            found = newest_first([*found, *(r for r in rows if shown.admits(r, now))])
        return ListingPage(found[offset:wanted], sum(d.total for d in directories.values()))


class EscalationListing:
    """One status's listing, written in groups of changes."""

    def __init__(self, repository: StateRepository[BaseModel], name: str) -> None:
        self._repository = repository
        self.name = name
        self._changes = group_commit(self._write, f"{name} listing writer")

    async def add(self, rows: Sequence[ListedRow]) -> None:
        await self._commit([AddRow(row) for row in rows])

    async def remove(self, escalation_id: str, created_at: datetime) -> None:
        await self._commit([RemoveRow(escalation_id, created_at)])

    async def _commit(self, changes: list[AddRow | RemoveRow]) -> None:
        await self._changes.submit_all(changes)

    async def _write(self, changes: Sequence[AddRow | RemoveRow]) -> None:
        directory_at = directory_key(self.name)
        for attempt in range(WRITE_ATTEMPTS):
            current = await self._repository.get_many_raw([directory_at])
            if directory_at not in current:
                await self._create(directory_at, ListingDirectory())
                continue
            try:
                if await self._add_to_head(changes, directory_at, *current[directory_at]):
                    return
            except DaprError as exc:
                log.debug("listing write conflicted; retrying", extra={"reason": str(exc)})
                await asyncio.sleep(random.uniform(0, 0.01 * 2**attempt))
                continue
            directory = _directory_of(current[directory_at])
            touched = segments_touched(directory, changes)
            if touched:
                current.update(
                    await self._repository.get_many_raw(segment_key(self.name, n) for n in touched)
                )
            segments = {
                n: SealedSegment.model_validate(current[segment_key(self.name, n)][0])
                for n in touched
                if segment_key(self.name, n) in current
            }
            written = apply(directory, segments, changes)
            if not written.changed:
                return
            values: dict[str, BaseModel] = {directory_at: written.directory}
            values.update({segment_key(self.name, n): s for n, s in written.segments.items()})
            absent = [key for key in values if key not in current]
            if absent:
                # Created empty first by a write the store refuses over an existing key; a
                # transaction cannot create one safely (see `StatusIndex`).
                await asyncio.gather(*(self._create(key, SealedSegment()) for key in absent))
                continue
            try:
                await self._repository.transact(
                    values, etags={key: _etag(key, current[key][1]) for key in values}
                )
                return
            except DaprError as exc:
                log.debug("listing write conflicted; retrying", extra={"reason": str(exc)})
            await asyncio.sleep(random.uniform(0, 0.01 * 2**attempt))
        raise ConcurrencyConflict(f"{self.name} listing: gave up after {WRITE_ATTEMPTS} conflicting writes")

    async def _add_to_head(
        self, changes: Sequence[AddRow | RemoveRow], key: str, directory: dict[str, Any], etag: str | None
    ) -> bool:
        """The common batch (parks: rows added, and the head does not fill) written without
        parsing the directory: the new rows are appended to its head as stored. False when the
        batch needs the whole of `apply` (a row taken out, or a head to seal); raises a
        conflict to redo from a fresh read like any write."""
        head = directory.get("head", [])
        if any(isinstance(c, RemoveRow) for c in changes) or len(head) + len(changes) >= HEAD_CAPACITY:
            return False
        listed = {row["escalation_id"] for row in head}
        fresh: dict[str, dict[str, Any]] = {}
        for change in changes:
            assert isinstance(change, AddRow)
            if change.row.escalation_id not in listed:
                fresh[change.row.escalation_id] = change.row.model_dump(mode="json")
        if fresh:
            directory["head"] = [*head, *fresh.values()]
            await self._repository.transact_json({key: directory}, etags={key: _etag(key, etag)})
        return True

    async def _create(self, key: str, empty: BaseModel) -> None:
        try:
            await self._repository.save(key, empty, only_if_absent=True)
        except DaprError as exc:
            log.debug("listing key not created; reading it again", extra={"reason": str(exc)})


def _directory_of(found: tuple[Any, str | None] | None) -> ListingDirectory:
    return ListingDirectory.model_validate(found[0]) if found is not None else ListingDirectory()


def _etag(key: str, etag: str | None) -> str:
    if not etag:
        raise DaprError(
            500, "ERR_STATE_ETAG", f"the state store gave no etag for {key}; the listing needs one"
        )
    return etag
