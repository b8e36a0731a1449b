"""Talking to the running system through its sidecar: a request, with the sidecar's token,
to a service (service invocation) or a topic (publish); a failure to reach it or a refusal
becomes a readable `CliError`."""

from __future__ import annotations

import argparse
import re
from typing import Any

import httpx

from agora.cli.problems import CliError, describe_refusal
from agora.cli.sidecar import Sidecar, sidecar_for, token_header
from agora.cli.text import MAX_TEXT_CHARS, one_line, shorten
from agora.harness.system import app_id_hosting

__all__ = ["REQUEST_TIMEOUT_S", "invoke", "send"]

REQUEST_TIMEOUT_S = 30.0


def send(
    sidecar: Sidecar,
    method: str,
    url: str,
    target: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    where = sidecar.where
    try:
        response = httpx.request(
            method, url, json=body, timeout=REQUEST_TIMEOUT_S, headers={**token_header(), **(headers or {})}
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
    body: Any = None,
    service: str = "registry",
    headers: dict[str, str] | None = None,
) -> Any:
    sidecar = sidecar_for(args)
    app_id = app_id_hosting(service, sidecar.app_ids)
    url = f"{sidecar.url}/v1.0/invoke/{app_id}/method/{path}"
    response = send(sidecar, method, url, service, body, headers)
    try:
        return response.json()
    except ValueError:
        raise CliError(
            f"{service} answered {response.status_code} with a body that is not JSON; "
            f"is {sidecar.where} an Agora sidecar?"
        ) from None
