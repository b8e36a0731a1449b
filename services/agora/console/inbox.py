"""The inbox: the escalations that wait for a decision, the newest first, narrowed by what
waits (a task, a plan step, a debate, a session), how long it has waited and how confident the
step was; each page read from the escalation service (which narrows its listing) once per
refresh interval for every open page that shows it."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import Field, ValidationError

from agora.core.escalation.listing import ListingFilter

__all__ = [
    "AGE_CHOICES",
    "CONFIDENCE_CHOICES",
    "INBOX_PAGE_SIZE",
    "InboxFilter",
    "SharedReading",
    "SharedReadings",
    "age_text",
]

T = TypeVar("T")

AGE_CHOICES = {"": "any age", "5": "waiting over 5 min", "60": "over 1 hour", "1440": "over 1 day"}
CONFIDENCE_CHOICES = {"": "any confidence", "0.25": "below 0.25", "0.5": "below 0.50", "0.75": "below 0.75"}


INBOX_PAGE_SIZE = 50
MAX_INBOX_PAGE = 1000
"""Pages of the inbox a person can walk back to (50,000 escalations)."""


class InboxFilter(ListingFilter):
    """What the inbox shows (the escalation service narrows its listing by it), and which page
    of that; every field empty shows every waiting escalation, the newest first."""

    page: int = Field(default=0, ge=0, le=MAX_INBOX_PAGE, exclude=True)

    @classmethod
    def of_query(cls, query: Mapping[str, str]) -> InboxFilter:
        """From a page's query string; an unusable value is ignored (that filter is off)."""
        fields = {"kind": query.get("kind"), "older_than_minutes": query.get("age"),
                  "below_confidence": query.get("confidence"), "page": query.get("page")}  # fmt: skip
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

    @property
    def listing(self) -> ListingFilter:
        return ListingFilter.model_validate(self.model_dump())

    def query(self, page: int | None = None) -> dict[str, str]:
        """The query string of this filter, at `page` (default: this one; the first is left out)."""
        shown = {"kind": self.kind, "age": self.older_than_minutes, "confidence": self.below_confidence,
                 "page": (self.page if page is None else page) or None}  # fmt: skip
        return {name: str(value) for name, value in shown.items() if value is not None}


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


K = TypeVar("K")


class SharedReadings(Generic[K, T]):
    """A `SharedReading` per key (a filter and page of the inbox), the `kept` most recently used."""

    def __init__(
        self,
        read: Callable[[K], Awaitable[T]],
        fresh_seconds: float,
        clock: Callable[[], float],
        kept: int = 256,
    ) -> None:
        self._read = read
        self._fresh = fresh_seconds
        self._clock = clock
        self._kept = kept
        self._readings: dict[K, SharedReading[T]] = {}

    async def get(self, key: K) -> T:
        reading = self._readings.pop(key, None)
        if reading is None:
            reading = SharedReading(lambda: self._read(key), self._fresh, self._clock)
        self._readings[key] = reading  # the most recently used last
        while len(self._readings) > self._kept:
            del self._readings[next(iter(self._readings))]
        return await reading.get()

    def forget(self) -> None:
        """Every next `get` waits for a new reading (after a change made through the console)."""
        for reading in self._readings.values():
            reading.forget()
