"""Trace continuation across HTTP, and logs that carry the trace."""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from agora.runtime.logs import JsonFormatter
from agora.runtime.service import HTTP_TELEMETRY
from agora.runtime.tracing import current_traceparent, tracer

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


def test_incoming_traceparent_is_continued_in_a_server_span(spans: InMemorySpanExporter) -> None:
    app = FastAPI(telemetry=HTTP_TELEMETRY)
    seen: dict[str, str | None] = {}

    @app.put("/actors/{actor_type_name}/{actor_id}/method/{method_name}")
    async def actor_method(actor_type_name: str, actor_id: str, method_name: str) -> dict[str, str]:
        seen["traceparent"] = current_traceparent()
        return {}

    with TestClient(app) as client:
        response = client.put(
            "/actors/Task/t-1/method/post_task",
            headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
        )
    assert response.status_code == 200
    [span] = [s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert format(span.context.trace_id, "032x") == CALLER_TRACE
    assert span.parent is not None and format(span.parent.span_id, "016x") == CALLER_SPAN
    assert span.name == "PUT /actors/{actor_type_name}/{actor_id}/method/{method_name}"
    assert span.attributes is not None
    assert span.attributes["http.route"] == "/actors/{actor_type_name}/{actor_id}/method/{method_name}"
    assert span.attributes["http.response.status_code"] == 200
    # Work inside the handler is a child of the server span: what it sends on carries it.
    assert seen["traceparent"] is not None and CALLER_TRACE in seen["traceparent"]


def test_health_probes_are_not_traced(spans: InMemorySpanExporter) -> None:
    app = FastAPI(telemetry=HTTP_TELEMETRY)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    with TestClient(app) as client:
        client.get("/healthz")
    assert spans.get_finished_spans() == ()


def test_log_lines_are_json_with_trace_and_span_ids(spans: InMemorySpanExporter) -> None:
    formatter = JsonFormatter("registry")
    with tracer("tests").start_as_current_span("work") as span:
        record = logging.LogRecord("agora", logging.INFO, __file__, 1, "saved %s", ("x",), None)
        record.agent_id = "a-1"
        line = json.loads(formatter.format(record))
    assert line["message"] == "saved x"
    assert line["service"] == "registry"
    assert line["agent_id"] == "a-1"
    assert line["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert line["span_id"] == format(span.get_span_context().span_id, "016x")
