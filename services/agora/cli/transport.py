"""Talking to the running system through its sidecar: a contract model sent, with the
sidecar's token, to a service (service invocation) or a topic (publish), and the service's
answer read as its contract model; a failure to reach it, a refusal or an answer that is not
the model becomes a readable `CliError`."""

from __future__ import annotations

import argparse
import re
from typing import TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from agora.cli.problems import CliError, describe_refusal, validation_lines
from agora.cli.sidecar import Sidecar, sidecar_for, token_header
from agora.cli.text import MAX_TEXT_CHARS, capped, one_line, shorten
from agora.harness.system import app_id_hosting

__all__ = ["REQUEST_TIMEOUT_S", "invoke", "send"]

REQUEST_TIMEOUT_S = 30.0

Answer = TypeVar("Answer", bound=BaseModel)


def send(
    sidecar: Sidecar,
    method: str,
    url: str,
    target: str,
    body: BaseModel | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """`body` (as JSON) to `url` through the sidecar; the answer unless it is a refusal."""
    where = sidecar.where
    sent = body.model_dump(mode="json") if body is not None else None
    try:
        response = httpx.request(
            method, url, json=sent, timeout=REQUEST_TIMEOUT_S, headers={**token_header(), **(headers or {})}
        )
    except httpx.ConnectError as exc:
        reason = re.sub(r"^\[Errno -?\d+\]\s*", "", str(exc)).lower() or "cannot connect"
        raise CliError(
            f"no Dapr sidecar answers at {where} ({reason}): start Agora with `make run`, "
            "or pass --dapr-http-port"
        ) from None
    except httpx.TimeoutException:
        raise CliError(
            f"{target} did not answer within {REQUEST_TIMEOUT_S:.0f} s (through the sidecar at {where})"
        ) from None
    except httpx.HTTPError as exc:
        failure = shorten(one_line(exc) or type(exc).__name__, MAX_TEXT_CHARS)
        raise CliError(f"talking to {target} through the sidecar at {where} failed: {failure}") from None
    if response.status_code >= 400:
        raise CliError(describe_refusal(response, target))
    return response


def invoke(
    args: argparse.Namespace,
    method: str,
    path: str,
    answer: type[Answer],
    body: BaseModel | None = None,
    service: str = "registry",
    headers: dict[str, str] | None = None,
) -> Answer:
    """Call `service`'s API at `path` with `body`; its answer as `answer`, the contract model
    the route answers."""
    sidecar = sidecar_for(args)
    app_id = app_id_hosting(service, sidecar.app_ids)
    url = f"{sidecar.url}/v1.0/invoke/{app_id}/method/{path}"
    response = send(sidecar, method, url, service, body, headers)
    try:
        answered = response.json()
    except ValueError:
        raise CliError(
            f"{service} answered {response.status_code} with a body that is not JSON; "
            f"is {sidecar.where} an Agora sidecar?"
        ) from None
    try:
        return answer.model_validate(answered)
    except ValidationError as exc:
        kind = answer.__name__
        lines = [f"  {line}" for line in validation_lines(kind, exc)]
        head = f"{service} answered with a body that does not read as {kind}"
        head += f"; is {sidecar.where} an Agora sidecar?"
        raise CliError("\n".join([head, *capped(lines, indent="  ")])) from None
