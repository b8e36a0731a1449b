"""OpenTelemetry set-up from the standard OTEL_* variables, and trace-context helpers.

Exporter choice: `OTEL_TRACES_EXPORTER` (otlp | console | none) when set; otherwise OTLP when
an OTLP endpoint is configured, else the console exporter. `OTEL_EXPORTER_OTLP_PROTOCOL`
picks grpc (default) or http/protobuf. Tests pass their own (in-memory) exporter.

Sampling: `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` (read by the OpenTelemetry SDK;
unset: `parentbased_always_on`, every trace). A deployment keeps a share of traces with
`parentbased_traceidratio` and the ratio of its sidecars (Dapr samples parent-based by trace id
ratio too): a trace is decided once, where it starts, and every hop after follows.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import uuid
from collections.abc import Mapping, MutableMapping
from contextvars import ContextVar
from datetime import datetime

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, Decision, Sampler

_provider: TracerProvider | None = None

TASK_ID_ATTRIBUTE = "agora.task_id"
"""The span attribute naming the task a span works on (set on the allocator's intake span, so
a task's trace can be looked up in the trace store by it)."""


def _exporter_from_env() -> SpanExporter | None:
    choice = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    has_endpoint = bool(
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    if choice == "none":
        return None
    if choice == "console" or (not choice and not has_endpoint):
        return ConsoleSpanExporter()
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "grpc"
    )
    if protocol.startswith("http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter()
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    return GrpcExporter(insecure=os.environ.get("OTEL_EXPORTER_OTLP_INSECURE", "true").lower() == "true")


def _exporter_disabled() -> bool:
    return os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none"


def configure_tracing(
    service_name: str, exporter: SpanExporter | None = None, *, batch: bool = True, from_env: bool = True
) -> TracerProvider:
    """Install the process-wide tracer provider once; later calls return the same provider.

    The exporter is `exporter` when given, else the one the OTEL_* variables choose (unless
    `from_env` is False); more can be added with `provider.add_span_processor`."""
    global _provider
    if _provider is not None:
        return _provider
    resource = Resource.create(
        {
            "service.name": os.environ.get("OTEL_SERVICE_NAME", service_name),
            "service.namespace": "agora",
            "service.instance.id": str(uuid.uuid4()),
        }
    )
    chosen = exporter if exporter is not None else (_exporter_from_env() if from_env else None)
    # Spans nobody exports are not recorded (OTEL_TRACES_EXPORTER=none): the trace context
    # still flows through every hop, marked unsampled, at a fraction of the cost. Otherwise
    # (None) the SDK builds the sampler OTEL_TRACES_SAMPLER names.
    sampler = ALWAYS_OFF if chosen is None and from_env and _exporter_disabled() else None
    provider = TracerProvider(resource=resource, sampler=sampler, id_generator=_PresetIds())
    if chosen is not None:
        provider.add_span_processor(BatchSpanProcessor(chosen) if batch else SimpleSpanProcessor(chosen))
    trace.set_tracer_provider(provider)
    _provider = provider
    return provider


def shutdown_tracing() -> None:
    if _provider is not None:
        _provider.force_flush()
        _provider.shutdown()


_tracers: dict[str, tuple[trace.TracerProvider, trace.Tracer]] = {}


def tracer(name: str = "agora") -> trace.Tracer:
    """The tracer `name` of the current tracer provider, made once per provider: asking the
    provider for a tracer builds one afresh, and spans are started on every hop. The cache
    holds the provider itself, not its `id()`: a provider that was dropped may leave its id to
    the next one, whose spans must not go to the old provider's tracer."""
    provider = trace.get_tracer_provider()
    cached = _tracers.get(name)
    if cached is not None and cached[0] is provider:
        return cached[1]
    made = trace.get_tracer(name, tracer_provider=provider)
    _tracers[name] = (provider, made)
    return made


def inject_headers(headers: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """Add `traceparent`/`tracestate` for the current span to outgoing headers."""
    propagate.inject(headers)
    return headers


def extract_context(carrier: Mapping[str, str]) -> context.Context:
    return propagate.extract(carrier)


def current_traceparent() -> str | None:
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


# -- spans of long steps ----------------------------------------------------------------------
#
# A step of a durable workflow (a whole plan, one wave) lasts across processes and crashes, so
# no process can hold its span open. Its ids are chosen when it starts (`span_traceparent`),
# its children carry them, and the span itself is recorded once the step ends
# (`record_finished_span`), with the start time it had.

_preset_ids: ContextVar[tuple[int | None, int] | None] = ContextVar("agora_preset_span_ids", default=None)


class _PresetIds(RandomIdGenerator):
    """Random ids, except for a span being recorded with ids chosen in advance."""

    def generate_span_id(self) -> int:
        preset = _preset_ids.get()
        return preset[1] if preset is not None else super().generate_span_id()

    def generate_trace_id(self) -> int:
        preset = _preset_ids.get()
        return preset[0] if preset is not None and preset[0] is not None else super().generate_trace_id()


def stable_span_id(*key: str) -> int:
    """A span id derived from `key`: the same step gets the same id however often it is replayed."""
    return int.from_bytes(hashlib.sha256("\x1f".join(key).encode()).digest()[:8], "big") or 1


def span_traceparent(parent: str | None, span_id: int) -> str:
    """The traceparent of the span `span_id` under `parent`; without one, of a new trace that
    is sampled when this process's sampler keeps a trace starting there (its children follow
    the flag, and the span itself, recorded later as the root, gets the same verdict: a ratio
    sampler decides by the trace id)."""
    if parent:
        _, trace_id, _, flags = parent.split("-")
        return f"00-{trace_id}-{span_id:016x}-{flags}"
    new_trace = int.from_bytes(secrets.token_bytes(16), "big") or 1
    return f"00-{new_trace:032x}-{span_id:016x}-{'01' if _keeps_new_trace(new_trace) else '00'}"


def _keeps_new_trace(trace_id: int) -> bool:
    """Whether the configured sampler keeps a trace that starts here with `trace_id`. Without a
    configured provider nothing here is recorded; the trace stays sampled for the sidecars."""
    sampler: Sampler | None = _provider.sampler if _provider is not None else None
    if sampler is None:
        return True
    # An empty context: the verdict on a root, whatever span is current.
    verdict = sampler.should_sample(context.Context(), trace_id, "agora.workflow")
    return verdict.decision is Decision.RECORD_AND_SAMPLE


def record_finished_span(
    name: str,
    traceparent: str,
    parent: str | None,
    start: datetime,
    end: datetime,
    attributes: Mapping[str, str | int | float | bool] | None = None,
) -> None:
    """Record the span `traceparent` (ids chosen by `span_traceparent`) that ran from `start`
    to `end`, as a child of `parent` (or a root)."""
    _, trace_hex, span_hex, _ = traceparent.split("-")
    parent_context = extract_context({"traceparent": parent}) if parent else context.Context()
    token = _preset_ids.set((None if parent else int(trace_hex, 16), int(span_hex, 16)))
    try:
        span = tracer("agora.workflow").start_span(
            name, context=parent_context, start_time=_ns(start), attributes=dict(attributes or {})
        )
    finally:
        _preset_ids.reset(token)
    span.end(end_time=_ns(end))


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)
