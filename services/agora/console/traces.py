"""A task's trace as a timeline: the trace is found in Jaeger by the task id on the allocator's
intake span (`agora.task_id`), read from Jaeger's query API, and laid out as one row per span
(service, operation, when it started relative to the trace, how long it took, whether it
failed), in start order with its depth below its parent, for the page to draw as bars."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agora.runtime.tracing import TASK_ID_ATTRIBUTE

__all__ = [
    "MAX_SPANS_SHOWN",
    "JaegerAnswer",
    "JaegerTraces",
    "SpanRow",
    "Timeline",
    "TracesUnavailable",
    "timeline",
]

MAX_SPANS_SHOWN = 500
LOOKBACK = timedelta(days=7)


class _Tag(BaseModel):
    model_config = ConfigDict(extra="ignore")

    key: str
    value: str | int | float | bool | None = None


class _Reference(BaseModel):
    model_config = ConfigDict(extra="ignore")

    refType: str
    spanID: str


class _Span(BaseModel):
    model_config = ConfigDict(extra="ignore")

    spanID: str
    operationName: str
    startTime: int
    duration: int  # microseconds
    processID: str
    references: list[_Reference] = Field(default_factory=list)
    tags: list[_Tag] = Field(default_factory=list)


class _Process(BaseModel):
    model_config = ConfigDict(extra="ignore")

    serviceName: str
    tags: list[_Tag] = Field(default_factory=list)


class _Trace(BaseModel):
    model_config = ConfigDict(extra="ignore")

    traceID: str
    spans: list[_Span]
    processes: dict[str, _Process]


class JaegerAnswer(BaseModel):
    """What Jaeger's query API answers (`/api/traces...`): the fields the timeline reads."""

    model_config = ConfigDict(extra="ignore")

    data: list[_Trace] | None = None


class SpanRow(BaseModel):
    service: str
    operation: str
    start_ms: float
    duration_ms: float
    depth: int
    error: bool
    sidecar: bool
    """A span of a Dapr sidecar rather than of an Agora app."""
    offset_pct: float
    width_pct: float


class Timeline(BaseModel):
    trace_id: str
    started_at: datetime
    total_ms: float
    rows: list[SpanRow]
    spans: int
    """Spans in the trace (rows holds at most MAX_SPANS_SHOWN of them)."""
    services: list[str]
    errors: int


def _error(span: _Span) -> bool:
    tags = {t.key: t.value for t in span.tags}
    return tags.get("error") is True or str(tags.get("otel.status_code", "")).upper() == "ERROR"


def timeline(trace: _Trace) -> Timeline:
    """The trace's spans in start order, each with its depth, its offset and width as a share
    of the whole trace (at least a sliver, so a short span stays visible)."""
    spans = sorted(trace.spans, key=lambda s: (s.startTime, s.spanID))
    by_id = {s.spanID: s for s in spans}
    start = min((s.startTime for s in spans), default=0)
    end = max((s.startTime + s.duration for s in spans), default=start)
    total = max(end - start, 1)

    def depth(span: _Span) -> int:
        seen: set[str] = set()
        level, current = 0, span
        while True:
            parent = next((r.spanID for r in current.references if r.refType == "CHILD_OF"), None)
            if parent is None or parent not in by_id or parent in seen:
                return level
            seen.add(parent)
            level, current = level + 1, by_id[parent]

    rows = []
    for span in spans[:MAX_SPANS_SHOWN]:
        process = trace.processes.get(span.processID)
        namespace = {t.key: t.value for t in process.tags}.get("service.namespace") if process else None
        offset = (span.startTime - start) / total * 100
        rows.append(
            SpanRow(
                service=process.serviceName if process else "?",
                operation=span.operationName,
                start_ms=(span.startTime - start) / 1000,
                duration_ms=span.duration / 1000,
                depth=min(depth(span), 12),
                error=_error(span),
                sidecar=namespace != "agora",
                offset_pct=round(min(offset, 99.5), 3),
                width_pct=round(max(span.duration / total * 100, 0.4), 3),
            )
        )
    services = sorted({p.serviceName for p in trace.processes.values()})
    return Timeline(
        trace_id=trace.traceID,
        started_at=datetime.fromtimestamp(start / 1_000_000, UTC),
        total_ms=total / 1000,
        rows=rows,
        spans=len(spans),
        services=services,
        errors=sum(_error(s) for s in spans),
    )


class TracesUnavailable(Exception):
    """Jaeger did not answer, or answered something that is not a trace listing."""


class JaegerTraces:
    """Jaeger's query API (not a Dapr app: reached over plain HTTP)."""

    def __init__(self, query_url: str, timeout_s: float = 10.0) -> None:
        self._url = query_url.rstrip("/")
        self._timeout = timeout_s

    async def task_trace(self, service: str, task_id: str) -> Timeline | None:
        """The newest trace whose spans of `service` name `task_id`; None when there is none."""
        now = datetime.now(UTC)
        params = {
            "service": service,
            "tags": json.dumps({TASK_ID_ATTRIBUTE: task_id}),
            "start": str(int((now - LOOKBACK).timestamp() * 1_000_000)),
            "end": str(int(now.timestamp() * 1_000_000)),
            "limit": "5",
        }
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as http:
                found = await http.get(f"{self._url}/api/traces", params=params)
                listing = JaegerAnswer.model_validate_json(found.content)
                if found.status_code != 200 or not listing.data:
                    return None
                newest = max(listing.data, key=lambda t: min((s.startTime for s in t.spans), default=0))
                # The search answers the matching spans' traces; the whole trace is read by id.
                whole = await http.get(f"{self._url}/api/traces/{newest.traceID}")
                traces = JaegerAnswer.model_validate_json(whole.content).data or [newest]
        except (httpx.HTTPError, ValidationError) as exc:
            raise TracesUnavailable(f"Jaeger did not answer usefully: {type(exc).__name__}") from None
        return timeline(traces[0])
