"""Agora's one error model: one hierarchy of typed errors, one code per meaning, one table from
code to HTTP status (`error_table`), and one body every error answer has (`ErrorBody`).

Every error answer, whatever raised it (a domain rule, request validation, an unknown route, an
oversized body, an unexpected failure), from any API, actor method or service-invocation reply:

    {"error": "<CODE>", "message": "<readable sentence>", "details": {...}}

Validation failures are 422 `INVALID_ARGUMENT` with `details.errors`, one entry per field:
`{"loc": [...], "msg": "...", "type": "..."}` (the offending input is not echoed back: it may
be megabytes long).

An error raised on one side of Dapr (in an actor, behind service invocation) is raised again
as the same type on the other side (`error_from`): each error type states its code and status
once, here or beside the rule that raises it, and every app maps errors the same way.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, Field, JsonValue

__all__ = [
    "MAX_REPORTED_ERRORS",
    "AgoraError",
    "BadRequest",
    "BudgetExceeded",
    "ConflictingRequest",
    "ConflictingTask",
    "CrewMemberFailed",
    "ErrorBody",
    "FieldError",
    "Forbidden",
    "IllegalTransition",
    "Internal",
    "InvalidArgument",
    "InvalidOutcome",
    "MarketAllocationFailed",
    "MaxIterationsExceeded",
    "MethodNotAllowed",
    "NoStateFound",
    "NotFound",
    "PayloadTooLarge",
    "Unauthorized",
    "UnsupportedMediaType",
    "conflict_between",
    "describe_field_errors",
    "error_for_status",
    "error_from",
    "error_table",
    "field_errors",
]

MAX_REPORTED_ERRORS = 20
"""Validation errors listed in one answer; the message says how many more there were."""


class FieldError(BaseModel):
    """One field a request got wrong: where, what is wrong, and the kind of problem."""

    loc: list[str] = Field(max_length=32)
    msg: str = Field(max_length=2_048)
    type: str = Field(max_length=200)


class ErrorBody(BaseModel):
    """The body of every error answer: its code (see the error table in
    docs/architecture.md), a readable sentence, and details (for invalid input,
    `errors`: one `FieldError` per field)."""

    error: str = Field(max_length=100, description="The error's code, e.g. NOT_FOUND or INVALID_ARGUMENT.")
    message: str = Field(max_length=8_192)
    details: dict[str, JsonValue] = Field(default_factory=dict)


class AgoraError(Exception):
    """Something Agora refused or could not do. Subclasses state their `code` (stable, one
    per meaning) and `http_status` (how an API answers it); the docstring is the meaning."""

    code: ClassVar[str] = "INTERNAL"
    http_status: ClassVar[int] = 500
    permanent: ClassVar[bool] = True
    """The same request fails the same way every time, so a message that raised it is
    dead-lettered at once instead of being retried (a retry may pass: False)."""

    def __init__(self, message: str, **details: JsonValue) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, JsonValue] = dict(details)

    @classmethod
    def from_message(cls, message: str, details: Mapping[str, JsonValue] | None = None) -> AgoraError:
        """The error as it arrives from the other side of Dapr: its message and details. Types
        whose constructor needs more (their extra state stays on the side that raised them)
        override this."""
        return cls(message, **dict(details or {}))

    def body(self) -> ErrorBody:
        return ErrorBody(error=self.code, message=self.message, details=self.details)

    @property
    def field_errors(self) -> list[FieldError]:
        """The fields an invalid request got wrong (`details.errors`), if any."""
        listed = self.details.get("errors")
        return [FieldError.model_validate(e) for e in listed] if isinstance(listed, list) else []


# -- errors of the HTTP edge, one per status an API answers -------------------------------------


class BadRequest(AgoraError):
    """The request could not be read (a broken body, an unreadable stream)."""

    code = "BAD_REQUEST"
    http_status = 400


class Unauthorized(AgoraError):
    """The request needs credentials it did not carry (e.g. the API token to decide)."""

    code = "UNAUTHORIZED"
    http_status = 401


class Forbidden(AgoraError):
    """The caller may not do this (an access-control policy refused it)."""

    code = "FORBIDDEN"
    http_status = 403


class NotFound(AgoraError):
    """The addressed record does not exist (a task, plan, debate, escalation, agent, session),
    or no route answers the path."""

    code = "NOT_FOUND"
    http_status = 404


class MethodNotAllowed(AgoraError):
    """The path exists but does not answer this HTTP method."""

    code = "METHOD_NOT_ALLOWED"
    http_status = 405


class Conflict(AgoraError):
    """The request conflicts with the current state (a generic conflict; domain conflicts have
    their own codes)."""

    code = "CONFLICT"
    http_status = 409


class PayloadTooLarge(AgoraError):
    """The request body is larger than the limit (1 MiB on the public `/v1/` routes)."""

    code = "PAYLOAD_TOO_LARGE"
    http_status = 413


class UnsupportedMediaType(AgoraError):
    """The request body is not of a type the route reads (JSON)."""

    code = "UNSUPPORTED_MEDIA_TYPE"
    http_status = 415


class InvalidArgument(AgoraError):
    """The request, message or actor argument failed validation; `details.errors` names each
    field."""

    code = "INVALID_ARGUMENT"
    http_status = 422


class Internal(AgoraError):
    """The service failed to handle the request; the cause is in its log (never in the answer)."""

    code = "INTERNAL"
    http_status = 500
    permanent = False


class Unavailable(AgoraError):
    """A part the request needs did not answer in time (a sidecar, an actor busy or stuck, a
    store away); the request changed nothing it did not say, and may be sent again."""

    code = "UNAVAILABLE"
    http_status = 503
    permanent = False


# -- domain errors shared by several services ---------------------------------------------------


class IllegalTransition(AgoraError):
    """A task was asked to move to a status its lifecycle does not allow from where it is."""

    code = "ILLEGAL_TRANSITION"
    http_status = 409


class ConflictingTask(AgoraError):
    """A task id was posted again with a different specification."""

    code = "CONFLICTING_TASK"
    http_status = 409


class InvalidOutcome(AgoraError):
    """An outcome that does not fit the task (wrong agent, task not allocated...)."""

    code = "INVALID_OUTCOME"
    http_status = 422


class ConflictingRequest(AgoraError):
    """An id already names a run (a plan, a debate) that was asked for with a different request;
    the same request again is accepted as a repeat."""

    code = "CONFLICTING_REQUEST"
    http_status = 409


class BudgetExceeded(AgoraError):
    """A run's spending reached its budget (a task's `budget_usd`, an agent's session budget):
    the call that would pass it is not made, or the run stops after the call that did."""

    code = "BUDGET_EXCEEDED"
    http_status = 402


class BidTooLate(AgoraError):
    """An agent's estimate did not finish within the bid solicitation's deadline (the market
    has used its own estimate meanwhile)."""

    code = "BID_TOO_LATE"
    http_status = 504
    permanent = False


class BidNotMade(AgoraError):
    """An agent's model gave no valid estimate of the task within its attempts (the market uses
    its own estimate, marked with this reason)."""

    code = "BID_NOT_MADE"
    http_status = 502


class MaxIterationsExceeded(AgoraError):
    """An agent's loop reached its iteration limit (`RunnerConfig.max_iterations`) without a
    final answer."""

    code = "MAX_ITERATIONS_EXCEEDED"
    http_status = 422


class CrewMemberFailed(AgoraError):
    """A member of a crew raised, failed or paused for a person, so the crew could not finish;
    the message names the member and why."""

    code = "CREW_MEMBER_FAILED"
    http_status = 502


class MarketAllocationFailed(AgoraError):
    """The market found no agent for a task a crew put on it (the task was rejected)."""

    code = "MARKET_ALLOCATION_FAILED"
    http_status = 422


class NoStateFound(NotFound):
    """An agent's run was asked to resume, but no saved state of that agent's session exists."""

    code = "NO_STATE_FOUND"


def conflict_between(kind: str, run_id: str, earlier: BaseModel, later: BaseModel) -> ConflictingRequest:
    """The refusal of `later` under an id `earlier` already holds, naming the fields that differ."""
    fields = type(earlier).model_fields
    differing = [name for name in fields if getattr(earlier, name) != getattr(later, name, None)]
    return ConflictingRequest(
        f"{kind} {run_id} already exists with a different request (differs in: {', '.join(differing)}); "
        "the same request again is a repeat, another request needs another id"
    )


# -- the table ------------------------------------------------------------------------------------

DOMAIN_ERROR_MODULES = (
    "agora.core.task_lifecycle",
    "agora.core.graphs",
    "agora.core.escalation.record",
    "agora.core.escalation.digest",
    "agora.core.planning",
    "agora.core.uncertainty.aborts",
    "agora.core.suspension",
    "agora.core.debate.config",
    "agora.core.debate.gate",
)
"""The core modules that keep errors beside their rules: loaded by the table, so every process
knows every code whatever it imported."""


def _subclasses(root: type[AgoraError]) -> Iterable[type[AgoraError]]:
    yield root
    for sub in root.__subclasses__():
        yield from _subclasses(sub)


@functools.cache
def error_table() -> Mapping[str, type[AgoraError]]:
    """Every error type by its code (each code once). Built once per process: every error type
    lives in this module or in `DOMAIN_ERROR_MODULES`, which it loads, and `error_from` reads it
    on every error answer."""
    for module in DOMAIN_ERROR_MODULES:
        importlib.import_module(module)
    table: dict[str, type[AgoraError]] = {}
    for error_type in _subclasses(AgoraError):
        if error_type is AgoraError:
            continue
        known = table.setdefault(error_type.code, error_type)
        if known is not error_type:
            reused = f"{error_type.__qualname__} reuses code {error_type.code} of {known.__qualname__}"
            raise TypeError(reused)
    return table


EDGE_ERRORS: tuple[type[AgoraError], ...] = (
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    PayloadTooLarge,
    UnsupportedMediaType,
    InvalidArgument,
    Internal,
    Unavailable,
)


def error_for_status(status: int, message: str) -> AgoraError:
    """The edge's error for an HTTP status the web framework answered (an unknown route, a
    wrong method...): the generic error of that status."""
    for error_type in EDGE_ERRORS:
        if error_type.http_status == status:
            return error_type(message)
    return (Internal if status >= 500 else BadRequest)(message)


def error_from(code: str, message: str, details: Mapping[str, JsonValue] | None = None) -> AgoraError:
    """The typed error for `code`, as the other side of Dapr raised it (an unknown code, from a
    newer peer: `Internal`, naming it)."""
    error_type = error_table().get(code)
    if error_type is None:
        return Internal(f"{code}: {message}", **dict(details or {}))
    return error_type.from_message(message, details)


# -- validation errors as field errors --------------------------------------------------------------


def field_errors(errors: Iterable[Mapping[str, Any]]) -> list[JsonValue]:
    """Pydantic's errors reduced to location, message and type (no input echo), at most
    `MAX_REPORTED_ERRORS` of them, as `FieldError`s in JSON."""
    reduced: list[JsonValue] = []
    for error in errors:
        if len(reduced) == MAX_REPORTED_ERRORS:
            break
        field = FieldError(
            loc=[str(part) for part in error.get("loc", ())][:32],
            msg=str(error.get("msg", ""))[:2_048],
            type=str(error.get("type", ""))[:200],
        )
        reduced.append(field.model_dump(mode="json"))
    return reduced


def describe_field_errors(errors: Sequence[JsonValue], total: int | None = None) -> str:
    """One readable sentence for a list of field errors: `loc: msg; loc: msg (and N more)`."""
    fields = [FieldError.model_validate(e) for e in errors]
    parts = [f"{'.'.join(f.loc) or '(body)'}: {f.msg}" for f in fields]
    more = (total or len(errors)) - len(errors)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


# -- the documented table ---------------------------------------------------------------------------

TABLE_START = "<!-- error table: generated by `python -m agora.core.errors`; do not edit -->"
TABLE_END = "<!-- end of error table -->"


def error_table_markdown() -> str:
    """The error table as docs/architecture.md shows it: code, HTTP status, meaning."""
    rows = ["| code | HTTP | meaning |", "|---|---|---|"]
    for code, error_type in sorted(error_table().items(), key=lambda item: (item[1].http_status, item[0])):
        meaning = " ".join((error_type.__doc__ or "").split()).replace("|", "\\|")
        rows.append(f"| `{code}` | {error_type.http_status} | {meaning} |")
    return "\n".join(rows)


def with_error_table(document: str) -> str:
    """`document` with its error table (between the markers) as the code defines it."""
    head, found, rest = document.partition(TABLE_START)
    _, ended, tail = rest.partition(TABLE_END)
    if not found or not ended:
        raise ValueError("the document has no error table markers")
    return f"{head}{TABLE_START}\n{error_table_markdown()}\n{TABLE_END}{tail}"


if __name__ == "__main__":
    from pathlib import Path

    # Run as a script this file is `__main__`, a second copy of the hierarchy: the domain
    # modules subclass the importable one.
    from agora.core import errors

    architecture = Path(__file__).resolve().parents[3] / "docs" / "architecture.md"
    architecture.write_text(errors.with_error_table(architecture.read_text()))
    print(f"wrote the error table to {architecture}")
