"""Client-facing errors and the one error body every Agora API answers with.

Every error answer, whatever raised it (a service's own rule, request validation, an unknown
route, an oversized body, an unexpected failure), has the body

    {"error": "<CODE>", "message": "<readable sentence>", "details": {...}}

Validation failures are 422 `INVALID_ARGUMENT` with `details.errors`, one entry per field:
`{"loc": [...], "msg": "...", "type": "..."}` (the offending input is not echoed back: it may
be megabytes long).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MAX_REPORTED_ERRORS = 20
"""Validation errors listed in one answer; the message says how many more there were."""


class ServiceError(Exception):
    """A typed, client-facing error: `code` is stable, `status_code` the HTTP status.

    A 4xx error is the request's fault and will fail again unchanged (permanent); a 5xx error
    may pass on a retry."""

    status_code = 400
    code = "BAD_REQUEST"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    @property
    def permanent(self) -> bool:
        return self.status_code < 500

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.details)


class NotFound(ServiceError):
    status_code = 404
    code = "NOT_FOUND"


class InvalidArgument(ServiceError):
    status_code = 422
    code = "INVALID_ARGUMENT"


class PayloadTooLarge(ServiceError):
    status_code = 413
    code = "PAYLOAD_TOO_LARGE"


def error_body(code: str, message: str, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"error": code, "message": message, "details": dict(details or {})}


def field_errors(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pydantic's errors reduced to location, message and type (no input echo), at most
    `MAX_REPORTED_ERRORS` of them."""
    reduced: list[dict[str, Any]] = []
    for error in errors:
        if len(reduced) == MAX_REPORTED_ERRORS:
            break
        loc = [str(part) for part in error.get("loc", ())]
        reduced.append({"loc": loc, "msg": str(error.get("msg", "")), "type": str(error.get("type", ""))})
    return reduced


def describe_field_errors(errors: Sequence[Mapping[str, Any]], total: int | None = None) -> str:
    """One readable sentence for a list of field errors: `loc: msg; loc: msg (and N more)`."""
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}" for e in errors]
    more = (total or len(errors)) - len(errors)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
