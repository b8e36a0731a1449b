"""Async client for the Dapr sidecar's HTTP API.

Every request carries the current trace context, so daprd's own spans (state, pub/sub,
invocation) become children of the caller's span. Transport failures (the sidecar restarting)
are retried with exponential backoff; HTTP errors are raised as typed `DaprError`s.

The client keeps a pool of persistent connections to the sidecar (aiohttp: of the Python
HTTP clients measured here, the one whose per-request cost stays flat at a hundred requests in
flight), opened on first use inside the app's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from pydantic import ValidationError

from agora.core.errors import AgoraError, ErrorBody, error_from
from agora.runtime.settings import ServiceSettings
from agora.runtime.tracing import inject_headers

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 256
"""Connections kept to the sidecar: enough that requests in flight under load reuse them
rather than opening and closing sockets."""


class DaprError(Exception):
    """The sidecar refused a request; `error_code` is Dapr's (e.g. ERR_STATE_SAVE)."""

    def __init__(
        self, status_code: int, error_code: str | None, message: str, app_error: AgoraError | None = None
    ) -> None:
        super().__init__(f"{status_code} {error_code or ''} {message}".strip())
        self.status_code = status_code
        self.error_code = error_code
        self.message = message
        self.app_error = app_error
        """The typed error an app answered with (service invocation passes its `ErrorBody` on)."""
        self.body: Any = None
        """The refusal's JSON body, when it had one."""


class EtagMismatch(DaprError):
    """Optimistic-concurrency conflict: someone else wrote the key since it was read."""


class SidecarUnavailable(Exception):
    """The sidecar did not answer within the retry budget."""


@dataclass(frozen=True)
class SidecarResponse:
    """A sidecar's answer, read in full."""

    status_code: int
    content: bytes
    headers: dict[str, str]
    """Header names in lower case."""

    def json(self) -> Any:
        return orjson.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")


class DaprSidecar:
    def __init__(
        self,
        settings: ServiceSettings,
        *,
        attempts: int = 4,
        base_backoff_seconds: float = 0.1,
    ) -> None:
        self.settings = settings
        self._attempts = attempts
        self._base_backoff = base_backoff_seconds
        self._base_url = settings.dapr_http_endpoint
        self._headers = {"dapr-api-token": settings.dapr_api_token} if settings.dapr_api_token else {}
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            # One pool per event loop: a client used from another loop (tests) gets its own.
            self._session = aiohttp.ClientSession(
                base_url=self._base_url,
                headers=self._headers,
                connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS, keepalive_timeout=30),
                timeout=aiohttp.ClientTimeout(total=self.settings.sidecar_timeout_seconds),
                skip_auto_headers=("User-Agent",),
                auto_decompress=False,
            )
            self._session_loop = loop
        return self._session

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        timeout: float | None = None,
        idempotent: bool = True,
    ) -> SidecarResponse:
        """Send one request. A connection that could not be made is retried with backoff; a
        request that may have reached the sidecar (read timeout, dropped connection) is retried
        only when `idempotent`. `timeout` overrides the default per-attempt timeout."""
        outgoing = inject_headers(dict(headers or {}))
        if json_body is not None and content is None:
            content = orjson.dumps(json_body, option=orjson.OPT_NON_STR_KEYS)
            outgoing.setdefault("content-type", "application/json")
        per_attempt = aiohttp.ClientTimeout(total=timeout) if timeout is not None else None
        http = self._http()
        for attempt in range(1, self._attempts + 1):
            try:
                async with http.request(
                    method, path, data=content, headers=outgoing, params=params, timeout=per_attempt
                ) as raw:
                    response = SidecarResponse(
                        raw.status, await raw.read(), {k.lower(): v for k, v in raw.headers.items()}
                    )
            except (aiohttp.ClientError, TimeoutError) as exc:
                never_sent = isinstance(exc, aiohttp.ClientConnectorError)
                if attempt == self._attempts or not (never_sent or idempotent):
                    raise SidecarUnavailable(f"{method} {path}: {exc!r}") from exc
                delay = self._base_backoff * 2 ** (attempt - 1)
                log.warning("sidecar unreachable, retrying", extra={"path": path, "delay_s": delay})
                await asyncio.sleep(delay)
                continue
            if response.status_code >= 400:
                raise _error_from(response)
            return response
        raise AssertionError("unreachable")

    async def stream(
        self, path: str, *, headers: dict[str, str] | None = None, quiet_seconds: float = 60.0
    ) -> AsyncIterator[bytes]:
        """A GET whose answer is passed on as it comes (an event stream), chunk by chunk. A
        refusal (status 400 or more) is raised as `invoke` raises it, before any chunk; a
        stream quiet for `quiet_seconds` (no heartbeat either) or cut off ends it with
        `SidecarUnavailable`. Not retried: the caller resumes where it was."""
        outgoing = inject_headers(dict(headers or {}))
        quiet = aiohttp.ClientTimeout(
            total=None, sock_connect=self.settings.sidecar_timeout_seconds, sock_read=quiet_seconds
        )
        try:
            async with self._http().get(path, headers=outgoing, timeout=quiet) as raw:
                if raw.status >= 400:
                    refused = SidecarResponse(
                        raw.status, await raw.read(), {k.lower(): v for k, v in raw.headers.items()}
                    )
                    error = _error_from(refused)
                    raise error.app_error or error  # the app's own refusal, as `invoke` raises it
                async for chunk in raw.content.iter_any():
                    yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SidecarUnavailable(f"GET {path}: {exc!r}") from exc

    async def wait_until_ready(self, timeout_seconds: float | None = None) -> None:
        """Wait until the sidecar's components are loaded (it may still be waiting for the app)."""
        deadline = asyncio.get_running_loop().time() + (timeout_seconds or self.settings.sidecar_wait_seconds)
        while True:
            try:
                async with self._http().get("/v1.0/healthz/outbound") as response:
                    if response.status < 300:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise SidecarUnavailable(f"sidecar at {self.settings.dapr_http_endpoint} not ready")
            await asyncio.sleep(0.1)

    async def component_type(self, name: str) -> str | None:
        """The type of the component `name` as the sidecar loaded it (`pubsub.redis`,
        `state.in-memory`...), from its metadata API; None when it has no such component."""
        metadata = (await self.request("GET", "/v1.0/metadata")).json()
        for component in metadata.get("components") or []:
            if isinstance(component, dict) and component.get("name") == name:
                kind = component.get("type")
                return kind if isinstance(kind, str) else None
        return None

    async def publish(self, pubsub: str, topic: str, cloud_event: dict[str, Any]) -> None:
        await self.request(
            "POST",
            f"/v1.0/publish/{pubsub}/{topic}",
            content=json.dumps(cloud_event, default=str).encode(),
            headers={"content-type": "application/cloudevents+json"},
        )

    async def publish_bulk(
        self, pubsub: str, topic: str, cloud_events: list[dict[str, Any]]
    ) -> dict[int, str]:
        """Publish `cloud_events` in one call (Dapr's bulk publish): the ones that failed, by their
        place in the list, with the broker's error. A call refused as a whole raises."""
        entries = [
            {"entryId": str(i), "event": event, "contentType": "application/cloudevents+json"}
            for i, event in enumerate(cloud_events)
        ]
        try:
            await self.request(
                "POST",
                f"/v1.0-alpha1/publish/bulk/{pubsub}/{topic}",
                content=json.dumps(entries, default=str).encode(),
                headers={"content-type": "application/json"},
            )
        except DaprError as exc:
            failed = _failed_entries(exc.body)
            if not failed:
                raise
            return failed
        return {}

    async def invoke(
        self,
        app_id: str,
        method: str,
        http_method: str = "POST",
        json_body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        idempotent: bool = True,
        timeout: float | None = None,
    ) -> Any:
        """Call another app's route through service invocation. Its error answer (an
        `ErrorBody`) is raised as the same typed error it raised over there; the sidecar's own
        refusals (the app unreachable, a policy) stay `DaprError`s. `timeout`: per attempt."""
        try:
            response = await self.request(
                http_method,
                f"/v1.0/invoke/{app_id}/method/{method}",
                json_body=json_body,
                headers=headers,
                idempotent=idempotent,
                timeout=timeout,
            )
        except DaprError as exc:
            raise exc.app_error or exc from None
        return response.json() if response.content else None


def _failed_entries(body: Any) -> dict[int, str]:
    """A bulk publish's failed entries (`failedEntries` of its refusal), by entry id."""
    entries = body.get("failedEntries") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return {}
    failed: dict[int, str] = {}
    for entry in entries:
        entry_id = entry.get("entryId") if isinstance(entry, dict) else None
        if isinstance(entry_id, str) and entry_id.isdigit():
            failed[int(entry_id)] = str(entry.get("error") or "not published")[:500]
    return failed


def _error_from(response: SidecarResponse) -> DaprError:
    error = _refusal(response)
    with contextlib.suppress(ValueError):
        error.body = response.json()
    return error


def _refusal(response: SidecarResponse) -> DaprError:
    error_code: str | None = None
    message = response.text
    try:
        body = response.json()
        error_code = body.get("errorCode")
        message = body.get("message", message)
    except (ValueError, AttributeError):
        pass
    try:  # an Agora app's answer, passed on by service invocation
        answered = ErrorBody.model_validate_json(response.content)
    except ValidationError:
        answered = None
    if answered is not None:
        app_error = error_from(answered.error, answered.message, answered.details)
        return DaprError(response.status_code, answered.error, answered.message, app_error)
    if response.status_code == 409 or (error_code or "").endswith("ETAG_MISMATCH"):
        return EtagMismatch(response.status_code, error_code, message)
    return DaprError(response.status_code, error_code, message)
