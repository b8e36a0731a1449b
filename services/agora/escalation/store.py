"""Escalation records in plain state keys, and parking them in batches.

A record lives under its own key (`escalation:record:<id>`), not in the `Escalation` actor's
state, so a listing reads a page of records in one bulk read. The actor still serializes the
decisions on one escalation and keeps its deadline reminder; it reads the record at the start
of each of its turns, since parking happens outside it.

Parking is a first write: a record is created only where none exists (the store refuses a
first write over an existing key), so two parks of one id, however they race, leave one
record, and the one that lost compares its request with it (the same request again answers
that record; a different one is a conflict). Parks that arrive together are written together:
one bulk read of their records, one bulk first write, one write to the listing of waiting
escalations, and one reading of the learning history for their suggestions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from agora.core.escalation import record as rules
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.listing import row_of
from agora.core.escalation.record import EscalationRecord, EscalationStatus, ParkRequest
from agora.core.outcomes.learner import OutcomeLearner
from agora.core.outcomes.record import StepOutcome
from agora.core.outcomes.suggestions import historical_suggestions
from agora.escalation.listing import EscalationListings
from agora.escalation.outcomes import query_for
from agora.runtime.batching import MicroBatcher
from agora.runtime.sidecar import DaprError
from agora.runtime.state import StateRepository, Versioned
from agora.runtime.status_index import StatusIndex

log = logging.getLogger(__name__)

RECORD_NAMESPACE = "escalation:record"


class EscalationSlot(BaseModel):
    record: EscalationRecord | None = None
    traceparent: str | None = None
    """Trace context of the parking call: the decision continues that trace, so the whole
    path (step → pause → person → continuation) is one trace even days later."""
    announced: bool = False
    """Whether the decision went out on `agora.escalation.resolved`. It is committed with the
    decision first and published after, so a failed publish is retried."""


ScheduleDeadline = Callable[[str, timedelta], Awaitable[None]]
"""Registers the deadline reminder of an escalation, due after the given time."""


@dataclass
class _Park:
    escalation_id: str
    request: ParkRequest
    traceparent: str | None
    refused: Exception | None = None
    """Why this park alone failed (its answer, whatever becomes of the rest of its batch)."""


class EscalationStore:
    def __init__(
        self,
        slots: StateRepository[EscalationSlot],
        listings: EscalationListings,
        *,
        learner: OutcomeLearner | None = None,
        schedule_deadline: ScheduleDeadline | None = None,
    ) -> None:
        self._slots = slots
        self.listings = listings
        self._learner = learner
        self._schedule_deadline = schedule_deadline
        self._parks: MicroBatcher[_Park, EscalationRecord | Exception] = MicroBatcher(
            self._park_batch, "escalation park writer"
        )

    async def read(self, escalation_id: str) -> Versioned[EscalationSlot] | None:
        return await self._slots.get(escalation_id)

    async def read_many_raw(self, escalation_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The stored JSON of each record found, not parsed into models."""
        return {i: data for i, (data, _) in (await self._slots.get_many_raw(escalation_ids)).items()}

    async def write(self, escalation_id: str, slot: EscalationSlot, etag: str | None) -> None:
        """Save `slot` over the version read with `etag` (None: only where no record exists)."""
        await self._slots.save(escalation_id, slot, etag=etag, only_if_absent=etag is None)

    async def delete(self, escalation_id: str) -> None:
        await self._slots.delete(escalation_id)

    async def park(
        self, escalation_id: str, request: ParkRequest, traceparent: str | None
    ) -> EscalationRecord:
        """Park `request` under `escalation_id` (see `rules.park` for when parking again is the
        same park), listed as waiting and with its deadline reminder."""
        answer = await self._parks.submit(_Park(escalation_id, request, traceparent))
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def _park_batch(self, batch: list[_Park]) -> list[EscalationRecord | Exception]:
        """Each park's record, or why not; a failure of the whole batch is the answer of every
        park that had not failed alone."""
        try:
            return await self._park_all(batch)
        except Exception as exc:
            return [exc if park.refused is None else park.refused for park in batch]

    async def _park_all(self, batch: list[_Park]) -> list[EscalationRecord | Exception]:
        ids = list(dict.fromkeys(p.escalation_id for p in batch))
        # The learning history (for new escalations' suggestions) is read beside their records.
        wants_history = self._learner is not None and any(_wants_suggestions(p.request) for p in batch)
        found, history = await asyncio.gather(
            self._slots.get_many(ids),
            self._learner.history() if wants_history and self._learner else _nothing(),
        )
        stored = {i: v.value for i, v in found.items()}
        created: dict[str, EscalationSlot] = {}
        parked: list[tuple[_Park, EscalationSlot]] = []
        now = datetime.now(UTC)
        for park in batch:
            existing = created.get(park.escalation_id) or stored.get(park.escalation_id)
            try:
                if existing is not None and existing.record is not None:
                    _parked(park.escalation_id, park.request, now, existing.record)
                    parked.append((park, existing))
                    continue
                request = park.request
                if history is not None and _wants_suggestions(request):
                    request = _with_suggestions(request, history)
                record = _parked(park.escalation_id, request, now, None)
            except Exception as exc:
                park.refused = exc
                continue
            slot = EscalationSlot(record=record, traceparent=park.traceparent)
            created[park.escalation_id] = slot
            parked.append((park, slot))
        if created:
            kept = await self._create(created)
            parked = [(p, kept.get(p.escalation_id, slot)) for p, slot in parked]
        settled: list[tuple[_Park, EscalationSlot]] = []
        for park, slot in parked:
            assert slot.record is not None
            if created.get(park.escalation_id) is not slot and slot is not stored.get(park.escalation_id):
                # Another park created this record first: the same park, or a conflict.
                try:
                    _parked(park.escalation_id, park.request, now, slot.record)
                except Exception as exc:
                    park.refused = exc
                    continue
            settled.append((park, slot))
        await self._list(dict((p.escalation_id, s) for p, s in settled), now)
        records = {id(park): slot.record for park, slot in settled if slot.record is not None}
        return [records[id(park)] if park.refused is None else park.refused for park in batch]

    async def _create(self, created: dict[str, EscalationSlot]) -> dict[str, EscalationSlot]:
        """First-write the new records; answers what each key holds after (ours, or the record
        another park created first)."""
        try:
            await self._slots.save_many(created, only_if_absent=True)
            return created
        except DaprError as exc:
            log.debug("a parked record existed already; reading them again", extra={"reason": str(exc)})
        found = await self._slots.get_many(list(created))
        missing = [i for i in created if i not in found]
        if missing:
            raise DaprError(500, "ERR_STATE_SAVE", f"could not save escalations {', '.join(missing)}")
        return {i: found[i].value for i in created}

    async def _list(self, slots: dict[str, EscalationSlot], now: datetime) -> None:
        """The steps after a record is saved, for new records and for parks repeated (a retry of
        one that failed after its save): each is idempotent, so a failure in between is
        repaired by the caller parking again."""
        rows = [row_of(s.record) for s in slots.values() if s.record is not None and s.record.waiting]
        steps: list[Awaitable[None]] = [self.listings(WAITING).add(rows)] if rows else []
        if self._schedule_deadline is not None:
            steps += [
                self._schedule_deadline(s.record.escalation_id, max(s.record.deadline - now, timedelta(0)))
                for s in slots.values()
                if s.record is not None and s.record.waiting and s.record.deadline is not None
            ]
        await asyncio.gather(*steps)

    async def move(self, record: EscalationRecord, previous: EscalationStatus) -> None:
        """From the listing of `previous` to that of the record's status."""
        await asyncio.gather(
            self.listings(record.status).add([row_of(record)]),
            self.listings(previous).remove(record.escalation_id, record.created_at),
        )

    async def relist(self, record: EscalationRecord) -> None:
        """List the record under its status, and under no other (idempotent: also what repairs
        a listing change that failed after the record was saved)."""
        await asyncio.gather(
            *(
                self.listings(status).add([row_of(record)])
                if status == record.status
                else self.listings(status).remove(record.escalation_id, record.created_at)
                for status in EscalationStatus
            )
        )

    async def unlist(self, record: EscalationRecord) -> None:
        """Take the record out of every listing."""
        await asyncio.gather(
            *(
                self.listings(status).remove(record.escalation_id, record.created_at)
                for status in EscalationStatus
            )
        )


WAITING = EscalationStatus.WAITING_FOR_HUMAN


def _parked(
    escalation_id: str, request: ParkRequest, now: datetime, existing: EscalationRecord | None
) -> EscalationRecord:
    context = request.context
    if (
        existing is not None
        and isinstance(context, EscalationContext)
        and not context.historical_suggestions
        and isinstance(existing.context, EscalationContext)
    ):
        # The same request again is compared with the record as first parked, which carries
        # the suggestions found then.
        context = context.model_copy(
            update={"historical_suggestions": existing.context.historical_suggestions}
        )
    return rules.park(
        escalation_id,
        request.waiting_party,
        context,
        now=now,
        who=request.who,
        why=request.why,
        deadline=request.deadline,
        default_decision=request.default_decision,
        existing=existing,
    )


async def _nothing() -> None:
    return None


def _wants_suggestions(request: ParkRequest) -> bool:
    return isinstance(request.context, EscalationContext) and not request.context.historical_suggestions


def _with_suggestions(request: ParkRequest, history: list[StepOutcome]) -> ParkRequest:
    assert isinstance(request.context, EscalationContext)
    similar = historical_suggestions(history, query_for(request.context))
    return request.model_copy(
        update={"context": request.context.model_copy(update={"historical_suggestions": similar})}
    )


ADOPTION_NAMESPACE = "escalation:adoption"
ADOPTION_DONE = "done"
ADOPTION_RETRY_SECONDS = 5.0
ADOPTED_AT_ONCE = 8


class AdoptionDone(BaseModel):
    """Written once every escalation an earlier version kept has moved (see
    `adopt_earlier_records`)."""

    adopted: int = 0


async def adopt_earlier_records(
    earlier: StatusIndex,
    store: EscalationStore,
    adopt: Callable[[str], Awaitable[None]],
    done: StateRepository[AdoptionDone],
) -> None:
    """Earlier versions kept each record in its actor's state and listed the ids in a status
    index. Once per store, at start-up, each id listed there without a record under its plain
    key is handed to `adopt` (its actor moves the record and lists it), so an upgrade loses no
    escalation from the inbox; retried until it is done, then remembered."""
    while True:
        try:
            if await done.get(ADOPTION_DONE) is not None:
                return
            ids = sorted(
                {i for status in [*EscalationStatus, None] for i in await _earlier_ids(earlier, status)}
            )
            adopted = 0
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                found = await store.read_many_raw(chunk)  # only which exist: nothing parsed
                missing = [i for i in chunk if i not in found]
                for first in range(0, len(missing), ADOPTED_AT_ONCE):
                    await asyncio.gather(*(adopt(i) for i in missing[first : first + ADOPTED_AT_ONCE]))
                adopted += len(missing)
            await done.save(ADOPTION_DONE, AdoptionDone(adopted=adopted))
            if adopted:
                log.info("escalations kept by an earlier version were adopted", extra={"adopted": adopted})
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the sidecar or the actor runtime not ready yet: try again
            log.info("adopting earlier escalations; retrying", extra={"reason": str(exc)})
            await asyncio.sleep(ADOPTION_RETRY_SECONDS)


async def _earlier_ids(earlier: StatusIndex, status: EscalationStatus | None) -> list[str]:
    return await earlier.newest_first() if status is None else await earlier.list(str(status))
