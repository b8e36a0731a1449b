"""Expected failures, told readably: the CLI's own (`CliError`: printed as `error: ...` lines,
exit 1), input that failed validation (one line per field), and an error answer from a service
or the sidecar in front of it (its code and message, never the raw body)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping

import httpx
from pydantic import ValidationError

from agora.cli.text import MAX_TEXT_CHARS, capped, dotted, one_line, shorten, shown
from agora.core.errors import ErrorBody, FieldError, error_from

__all__ = [
    "CliError",
    "describe_refusal",
    "invalid_input",
    "print_error",
    "remote_error_lines",
    "validation_lines",
]


class CliError(Exception):
    """An expected failure. `main` prints it (`error: ` before each line that is not indented)
    and exits 1."""


def validation_lines(where: str, exc: ValidationError) -> list[str]:
    """One `where: field.path: what was expected (given value)` line per validation error."""
    lines = []
    for error in exc.errors(include_url=False):
        field = dotted(error["loc"])
        given = error.get("input")
        visible = error["type"] != "missing" and not isinstance(given, Mapping)
        value = f" (given {shown(given)})" if visible else ""
        lines.append(f"{where}: {field + ': ' if field else ''}{one_line(error['msg'])}{value}")
    return lines


def invalid_input(what: str, exc: ValidationError) -> CliError:
    """The failure of input given on the command line that does not validate as `what` (the
    request is not sent): one line per field."""
    return CliError("\n".join(capped(validation_lines(what, exc), indent="  ")))


def remote_error_lines(errors: list[FieldError]) -> list[str]:
    """The field errors of an Agora 422 answer, one indented `field: message` line each."""
    lines = []
    for error in errors:
        field = dotted(error.loc[1:] if error.loc[:1] == ["body"] else error.loc)
        lines.append(f"  {field + ': ' if field else ''}{one_line(error.msg or error.type or 'invalid')}")
    return capped(lines, indent="  ")


def describe_refusal(response: httpx.Response, target: str) -> str:
    """A readable account of an error answer from `target` (an Agora service, or the Dapr
    sidecar in front of it): never the raw body."""
    status = f"{response.status_code} {response.reason_phrase}".strip()
    text = response.text.strip()
    if not text:
        return f"{target} answered {status} with an empty body"
    try:
        body = json.loads(text)
    except ValueError:
        return f"{target} answered {status}: {shorten(one_line(text), MAX_TEXT_CHARS)}"
    if not isinstance(body, dict):
        return f"{target} answered {status} (the error body gives no code or message)"
    try:  # Agora's ErrorBody: {"error": CODE, "message": ..., "details": {...}}
        answered: ErrorBody | None = ErrorBody.model_validate(body)
    except ValidationError:
        answered = None
    if answered is not None:
        head = f"{target} refused the request ({response.status_code} {answered.error})"
        refusal = error_from(answered.error, answered.message, answered.details)
        fields = remote_error_lines(refusal.field_errors)
        if fields:  # the message only sums up the same field errors on one line
            return "\n".join([f"{head}:", *fields])
        message = one_line(answered.message)
        return f"{head}: {message}" if message else head
    if isinstance(body.get("errorCode"), str):  # the Dapr sidecar: {"errorCode": ..., "message": ...}
        message = one_line(body.get("message"))
        head = (
            f"the Dapr sidecar refused the request to {target} ({response.status_code} {body['errorCode']})"
        )
        return f"{head}: {message}" if message else head
    detail = body.get("detail")  # a plain FastAPI answer
    if isinstance(detail, str):
        return f"{target} refused the request ({status}): {one_line(detail)}"
    return f"{target} answered {status} (the error body gives no code or message)"


def print_error(message: str) -> None:
    for line in message.splitlines():
        print(line if line.startswith(" ") else f"error: {line}", file=sys.stderr)
