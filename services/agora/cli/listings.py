"""Listings for people: a page's query, the line under a page saying how many there are in all
and which of them it shows, and the creation time column."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import urlencode

__all__ = ["created", "listing_summary", "page_query"]


def page_query(path: str, limit: int, offset: int, **narrowed: str | None) -> str:
    """A listing's path with its query: the filters given (a filter left out lists everything)."""
    given = {name: value for name, value in narrowed.items() if value is not None}
    return f"{path}?{urlencode({**given, 'limit': limit, 'offset': offset})}"


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def listing_summary(
    noun: str, narrowed_to: str | None, shown: int, total: int, offset: int, limit: int
) -> str:
    """The line under a listing: that it is empty, or how many there are in all and which of
    them the page holds (a page may show fewer rows than it covers: a listed item whose record
    is gone, or whose state changed meanwhile, is left out)."""
    where = f" in {narrowed_to}" if narrowed_to else ""
    if total == 0:
        return f"no {noun}s{where}"
    if shown == 0 and offset >= total:
        return f"(no {noun}s{where} from offset {offset}; {total} in all)"
    last = min(offset + limit, total)
    if offset == 0 and last == total:
        return f"({_counted(total, noun)}{where})"
    more = f"; --offset {last} for more" if last < total else ""
    return f"({offset + 1}-{last} of {total} {noun}s{where}{more})"


def created(moment: datetime) -> str:
    """When a record was created, for a listing's column (UTC, to the minute)."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%d %H:%M")
