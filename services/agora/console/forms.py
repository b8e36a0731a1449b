"""The forms people post to the console, read as the API reads a body: bounded in size and in
fields, and only from the console's own pages."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from fastapi import Request

from agora.console.pages import PageError
from agora.core.limits import MAX_BODY_BYTES

__all__ = ["FORM_FIELDS_AT_MOST", "read_form"]

FORM_FIELDS_AT_MOST = 20


async def read_form(request: Request) -> dict[str, str]:
    """A urlencoded form, bounded like every API body; its first value per field. A form a
    browser posts from another site (its Origin names another host) is refused, whatever
    cookies came with it."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        raise PageError(403, "this form was sent from another site")
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        raise PageError(415, "send the form as application/x-www-form-urlencoded")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise PageError(413, f"the form is larger than the limit of {MAX_BODY_BYTES:,} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise PageError(413, f"the form is larger than the limit of {MAX_BODY_BYTES:,} bytes")
    try:
        parsed = parse_qs(
            body.decode("utf-8", errors="replace"),
            keep_blank_values=True,
            max_num_fields=FORM_FIELDS_AT_MOST,
        )
    except ValueError:
        raise PageError(400, "the form has too many fields") from None
    return {name: values[0] for name, values in parsed.items()}
