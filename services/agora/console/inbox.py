"""The inbox: the escalations that wait for a decision, the newest first, narrowed by what
waits (a task, a plan step, a debate, a session), how long it has waited and how confident the
step was; read from the escalation service once per refresh interval for every open page."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agora.core.escalation.context import EscalationContext
from agora.core.escalation.record import EscalationRecord, WaitingPartyKind

__all__ = [
    "AGE_CHOICES",
    "CONFIDENCE_CHOICES",
    "InboxFilter",
    "SharedReading",
    "age_text",
    "confidence_of",
    "inbox",
]

T = TypeVar("T")

AGE_CHOICES = {"": "any age", "5": "waiting over 5 min", "60": "over 1 hour", "1440": "over 1 day"}
CONFIDENCE_CHOICES = {"": "any confidence", "0.25": "below 0.25", "0.5": "below 0.50", "0.75": "below 0.75"}


class InboxFilter(BaseModel):
    """What the inbox shows; every field empty shows every waiting escalation."""

    model_config = ConfigDict(frozen=True)

    kind: WaitingPartyKind | None = None
    older_than_minutes: int | None = Field(default=None, ge=0, le=366 * 24 * 60)
    below_confidence: float | None = Field(default=None, ge=0.0, le=1.0)

    @classmethod
    def of_query(cls, query: Mapping[str, str]) -> InboxFilter:
        """From a page's query string; an unusable value is ignored (that filter is off)."""
        fields = {"kind": query.get("kind"), "older_than_minutes": query.get("age"),
                  "below_confidence": query.get("confidence")}  # fmt: skip
        usable = {}
        for name, value in fields.items():
            if not value:
                continue
            try:
                cls.model_validate({name: value})
            except ValidationError:
                continue
            usable[name] = value
        return cls.model_validate(usable)

    def query(self) -> dict[str, str]:
        shown = {"kind": self.kind, "age": self.older_than_minutes, "confidence": self.below_confidence}
        return {name: str(value) for name, value in shown.items() if value is not None}

    def admits(self, record: EscalationRecord, now: datetime) -> bool:
        if self.kind is not None and record.waiting_party.kind is not self.kind:
            return False
        if self.older_than_minutes is not None and now - record.created_at < timedelta(
            minutes=self.older_than_minutes
        ):
            return False
        confidence = confidence_of(record)
        return self.below_confidence is None or (
            confidence is not None and confidence < self.below_confidence
        )


def confidence_of(record: EscalationRecord) -> float | None:
    """The step's confidence (a checkpoint, asked before the step ran, has none)."""
    return record.context.confidence if isinstance(record.context, EscalationContext) else None


def inbox(records: Iterable[EscalationRecord], shown: InboxFilter, now: datetime) -> list[EscalationRecord]:
    """The waiting escalations `shown` admits, the newest first (ties by id)."""
    waiting = [r for r in records if r.waiting and shown.admits(r, now)]
    return sorted(waiting, key=lambda r: (r.created_at, r.escalation_id), reverse=True)


def age_text(since: datetime, now: datetime) -> str:
    """How long ago, in the largest unit that fits: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`."""
    seconds = max(0, int((now - since).total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


class SharedReading(Generic[T]):
    """One reading shared by every page that asks: however many inboxes are open and polling,
    the escalation service is asked at most once at a time. A reading older than
    `fresh_seconds` is answered at once while a new one is made in the background (a poll never
    waits for the service once there is a reading); with no reading yet (or after `forget`, or a
    failed reading), callers await the one under way."""

    def __init__(
        self, read: Callable[[], Awaitable[T]], fresh_seconds: float, clock: Callable[[], float]
    ) -> None:
        self._read = read
        self._fresh = fresh_seconds
        self._clock = clock
        self._value: T | None = None
        self._read_at = -math.inf
        self._pending: asyncio.Future[T] | None = None

    async def get(self) -> T:
        stale = self._clock() - self._read_at >= self._fresh
        if stale and self._pending is None:
            self._pending = asyncio.ensure_future(self._refresh())
            self._pending.add_done_callback(_retrieved)
        if self._value is not None:
            return self._value
        assert self._pending is not None
        return await asyncio.shield(self._pending)

    def forget(self) -> None:
        """The next `get` waits for a new reading (after a change made through the console)."""
        self._value = None
        self._read_at = -math.inf

    async def _refresh(self) -> T:
        try:
            started = self._clock()
            value = await self._read()
            self._value, self._read_at = value, started
            return value
        except BaseException:
            self.forget()  # the next caller waits for a reading and sees it fail, if it does
            raise
        finally:
            self._pending = None


def _retrieved(done: asyncio.Future[Any]) -> None:
    """A background reading's failure is the next waiting caller's to see, not the loop's."""
    if not done.cancelled():
        done.exception()
