"""Dapr's actor calls and deliveries answered before the web framework: the same answers as the
framework's routes, a SERVER span that continues the caller's trace, everything else passed on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import pytest
from dapr.actor import Actor, ActorInterface, ActorRuntime
from dapr.clients.base import DaprActorClientBase
from fastapi import FastAPI
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from pydantic import BaseModel

from agora.core.topics import channel
from agora.runtime.actor_interface import actor_method
from agora.runtime.dapr_calls import ACTOR_METHOD_ROUTE, DaprCalls
from agora.runtime.pubsub import MessageDeduplicator, Publisher, Subscriptions
from agora.runtime.settings import ServiceSettings
from agora.runtime.tracing import current_traceparent

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = {"traceparent": f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"}


class EchoInterface(ActorInterface):
    @actor_method("echo")
    async def echo(self, data: object) -> object: ...

    @actor_method("fail")
    async def fail(self) -> None: ...


class Echo(Actor, EchoInterface):
    seen_traceparent: str | None = None

    async def echo(self, data: object) -> object:
        Echo.seen_traceparent = current_traceparent()
        return {"echoed": data, "by": self.id.id}

    async def fail(self) -> None:
        raise RuntimeError("the actor broke")


class Ping(BaseModel):
    n: int


PING = channel("agora.ping", Ping)


class NoSidecar(DaprActorClientBase):
    """The Echo actor keeps no state, sets no reminder: nothing may reach a sidecar."""

    async def invoke_method(self, *args: object, **kwargs: object) -> bytes:
        raise AssertionError("no sidecar here")

    async def save_state_transactionally(self, *args: object) -> None:
        raise AssertionError("no sidecar here")

    async def get_state(self, actor_type: str, actor_id: str, name: str) -> bytes:
        raise AssertionError("no sidecar here")

    async def register_reminder(self, *args: object) -> None:
        raise AssertionError("no sidecar here")

    async def unregister_reminder(self, actor_type: str, actor_id: str, name: str) -> None:
        raise AssertionError("no sidecar here")

    async def register_timer(self, *args: object) -> None:
        raise AssertionError("no sidecar here")

    async def unregister_timer(self, actor_type: str, actor_id: str, name: str) -> None:
        raise AssertionError("no sidecar here")


@pytest.fixture
async def echo_registered() -> AsyncIterator[None]:
    await ActorRuntime.register_actor(Echo, actor_client=NoSidecar())
    try:
        yield
    finally:
        ActorRuntime._actor_managers.pop("Echo", None)


def served(seen: list[int]) -> tuple[httpx.AsyncClient, FastAPI]:
    nowhere = cast(Publisher, None)  # a delivery that succeeds publishes nothing
    subscriptions = Subscriptions(ServiceSettings(), nowhere, MessageDeduplicator(None, 60))

    async def on_ping(ping: Ping) -> None:
        seen.append(ping.n)

    subscriptions.subscribe(PING, on_ping, idempotent=True)
    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    transport = httpx.ASGITransport(app=DaprCalls(app, subscriptions, actors=True))
    return httpx.AsyncClient(transport=transport, base_url="http://app"), app


async def test_an_actor_call_is_dispatched_to_the_actor_in_a_span_continuing_the_caller_s_trace(
    echo_registered: None, spans: InMemorySpanExporter
) -> None:
    client, _ = served([])
    async with client:
        answer = await client.put("/actors/Echo/e-1/method/echo", content=b'{"x": 1}', headers=CALLER)

    assert answer.status_code == 200, answer.text
    assert answer.json() == {"echoed": {"x": 1}, "by": "e-1"}
    [span] = [s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert span.name == f"PUT {ACTOR_METHOD_ROUTE}"
    assert format(span.context.trace_id, "032x") == CALLER_TRACE
    assert span.attributes is not None and span.attributes["http.response.status_code"] == 200
    assert span.attributes["url.path"] == "/actors/Echo/e-1/method/echo"
    # The actor's work runs inside the server span: what it calls carries the trace on.
    assert Echo.seen_traceparent is not None and CALLER_TRACE in Echo.seen_traceparent


async def test_a_failing_actor_or_an_unknown_type_is_answered_500_with_dapr_s_error_body(
    echo_registered: None, spans: InMemorySpanExporter
) -> None:
    client, _ = served([])
    async with client:
        broke = await client.put("/actors/Echo/e-1/method/fail")
        unknown = await client.put("/actors/Nobody/n-1/method/echo", content=b"{}")

    assert broke.status_code == 500 and "the actor broke" in broke.json()["message"]
    assert unknown.status_code == 500 and unknown.json()["errorCode"] == "UNKNOWN"
    failed = [s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert len(failed) == 2 and all(not s.status.is_ok for s in failed)


async def test_a_delivery_goes_to_its_subscription_and_anything_else_to_the_app(
    spans: InMemorySpanExporter,
) -> None:
    seen: list[int] = []
    client, _ = served(seen)
    event: dict[str, Any] = {"id": "e-1", "data": {"n": 7}}
    async with client:
        delivered = await client.post(
            "/events/agora-pubsub/agora.ping", content=json.dumps(event), headers=CALLER
        )
        elsewhere = await client.post("/events/agora-pubsub/agora.unknown", content=b"{}")
        health = await client.get("/healthz")
        timer = await client.put("/actors/Echo/e-1/method/timer/tick")

    assert delivered.status_code == 200 and delivered.json() == {"status": "SUCCESS"}
    assert seen == [7]
    [span] = [s for s in spans.get_finished_spans() if s.name == "POST /events/agora-pubsub/agora.ping"]
    assert span.kind is SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == CALLER_TRACE
    # Not a subscription's route, a probe, a timer: the framework answers (404: no such route).
    assert elsewhere.status_code == 404 and timer.status_code == 404
    assert health.json() == {"status": "ok"}
