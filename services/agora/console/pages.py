"""How the console answers with a page: its templates and their filters, the headers every page
goes out with, and the error page a refused request gets (`PageError`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from agora.console.auth import Person

__all__ = ["SECURITY_HEADERS", "PageError", "Pages", "number", "path_part", "templates", "when"]

SECURITY_HEADERS = {
    # Nothing but the console's own script and style; no framing, no referrer, no caching of
    # pages that show escalations.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class PageError(Exception):
    """A request the console answers with an error page (status and a readable sentence)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def when(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment is not None else "-"


def number(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"


def path_part(record_id: str) -> str:
    """A record id as one segment of a page's path."""
    return quote(record_id, safe="")


def templates() -> Environment:
    env = Environment(
        loader=PackageLoader("agora.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["number"] = number
    env.filters["pathpart"] = path_part
    return env


class Pages:
    """The console's templates rendered as pages: every page knows how often it asks for
    changes (`refresh_ms`) and goes out with `SECURITY_HEADERS`."""

    def __init__(self, refresh_seconds: float) -> None:
        self._templates = templates()
        self._refresh_ms = int(refresh_seconds * 1000)

    def render(self, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = self._templates.get_template(name).render(refresh_ms=self._refresh_ms, **values)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def error(self, status: int, message: str, person: Person | None = None) -> HTMLResponse:
        return self.render("error.html", status, message=message, person=person)
