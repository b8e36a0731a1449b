"""Dapr's own calls into an app, answered before the web framework: actor method calls
(`PUT /actors/{type}/{id}/method/{name}`) and topic deliveries (`POST /events/{pubsub}/{topic}`).

They are most of what a busy actor host or subscriber serves, and the framework's routing,
dependency solving and middleware cost about a third of a task board's CPU on them. Here each
is dispatched straight to the actor runtime or the subscription, in a SERVER span that
continues the caller's `traceparent` and is named as the framework names it, with the same
answers: the actor's serialized result (or Dapr's error body with status 500), the delivery's
status word. Every other request (the public APIs, timers and reminders, Dapr's discovery
calls) goes to the framework, which also keeps routes for these two, so the app answers the
same without this layer (as in tests that call the framework's app directly).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dapr.actor import ActorRuntime
from dapr.clients.exceptions import ERROR_CODE_UNKNOWN, DaprInternalError
from opentelemetry.trace import Span, SpanKind, StatusCode
from starlette.types import ASGIApp, Receive, Scope, Send

from agora.runtime.pubsub import Subscription, Subscriptions
from agora.runtime.tracing import extract_context, tracer

log = logging.getLogger(__name__)

ACTOR_METHOD_ROUTE = "/actors/{actor_type_name}/{actor_id}/method/{method_name}"
_REENTRANCY_HEADER = b"dapr-reentrancy-id"
_JSON = [(b"content-type", b"application/json")]


class DaprCalls:
    """The ASGI app a service is served as: Dapr's actor calls and deliveries answered here,
    everything else by `app`."""

    def __init__(self, app: ASGIApp, subscriptions: Subscriptions, *, actors: bool) -> None:
        self._app = app
        self._subscriptions = subscriptions
        self._actors = actors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            method, path = scope["method"], scope["path"]
            if method == "PUT" and self._actors:
                parts = path.split("/")
                # ['', 'actors', type, id, 'method', name]; timers and reminders have one more.
                if len(parts) == 6 and parts[1] == "actors" and parts[4] == "method":
                    await self._actor_call(scope, receive, send, parts[2], parts[3], parts[5])
                    return
            elif method == "POST" and path.startswith("/events/"):
                subscription = self._subscriptions.at_route(path)
                if subscription is not None:
                    await self._delivery(scope, receive, send, subscription)
                    return
        await self._app(scope, receive, send)

    async def _actor_call(
        self, scope: Scope, receive: Receive, send: Send, actor_type: str, actor_id: str, method: str
    ) -> None:
        headers = dict(scope["headers"])
        body = await _body(receive)
        with _server_span(scope, headers, ACTOR_METHOD_ROUTE) as span:
            try:
                reentrancy = headers.get(_REENTRANCY_HEADER)
                result = await ActorRuntime.dispatch(
                    actor_type, actor_id, method, body, reentrancy.decode() if reentrancy else None
                )
                status, answer = 200, result if isinstance(result, bytes) else json.dumps(result).encode()
            except DaprInternalError as exc:
                status, answer = 500, json.dumps(exc.as_json_safe_dict()).encode()  # type: ignore[no-untyped-call]
            except Exception as exc:
                status = 500
                answer = json.dumps({"message": repr(exc), "errorCode": ERROR_CODE_UNKNOWN}).encode()
            _ended(span, status)
            await _answer(send, status, answer)

    async def _delivery(
        self, scope: Scope, receive: Receive, send: Send, subscription: Subscription[Any]
    ) -> None:
        headers = dict(scope["headers"])
        body = await _body(receive)
        with _server_span(scope, headers, subscription.route) as span:
            try:
                named = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers.items()}
                word = await self._subscriptions.deliver(subscription, body, named)
                status, answer = 200, json.dumps({"status": word}).encode()
            except Exception:
                # `deliver` answers every failure of a handler itself; this is a defect in the
                # delivery path, which Dapr retries like any failed delivery.
                log.error("delivery failed", exc_info=True, extra={"topic": subscription.topic})
                status, answer = 500, b'{"status": "RETRY"}'
            _ended(span, status)
            await _answer(send, status, answer)


@contextmanager
def _server_span(scope: Scope, headers: dict[bytes, bytes], route: str) -> Iterator[Span]:
    """A SERVER span for the call, continuing the caller's trace, current while it is served."""
    carrier = {
        name: headers[key].decode("latin-1")
        for name, key in (("traceparent", b"traceparent"), ("tracestate", b"tracestate"))
        if key in headers
    }
    method = scope["method"]
    with tracer("agora.http").start_as_current_span(
        f"{method} {route}",
        context=extract_context(carrier),
        kind=SpanKind.SERVER,
        attributes={
            "http.request.method": method,
            "http.route": route,
            "url.path": scope["path"],
            "url.scheme": scope.get("scheme", "http"),
        },
    ) as span:
        yield span


def _ended(span: Span, status: int) -> None:
    span.set_attribute("http.response.status_code", status)
    if status >= 500:
        span.set_status(StatusCode.ERROR)
        span.set_attribute("error.type", str(status))


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [*_JSON, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
