"""Text for people: values shortened to fit a line, blanks made visible, long lists capped,
times in UTC."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "MAX_ERROR_LINES",
    "MAX_TEXT_CHARS",
    "MAX_VALUE_CHARS",
    "capped",
    "dotted",
    "moment",
    "one_line",
    "shorten",
    "shown",
]

MAX_ERROR_LINES = 20
MAX_VALUE_CHARS = 80
MAX_TEXT_CHARS = 200


def one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown(value: Any) -> str:
    """A value as the user wrote it, shortened (repr keeps it on one line and shows blanks)."""
    return shorten(repr(value), MAX_VALUE_CHARS)


def capped(lines: list[str], indent: str = "") -> list[str]:
    if len(lines) <= MAX_ERROR_LINES:
        return lines
    return [*lines[:MAX_ERROR_LINES], f"{indent}... and {len(lines) - MAX_ERROR_LINES} more"]


def dotted(loc: Iterable[Any]) -> str:
    return ".".join(str(part) for part in loc)


def moment(when: datetime) -> str:
    """A point in time for people: UTC, to the second (`2030-01-01 09:30:00 UTC`)."""
    utc = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return utc.strftime("%Y-%m-%d %H:%M:%S UTC")
