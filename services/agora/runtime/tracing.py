"""OpenTelemetry set-up from the standard OTEL_* variables, and trace-context helpers.

Exporter choice: `OTEL_TRACES_EXPORTER` (otlp | console | none) when set; otherwise OTLP when
an OTLP endpoint is configured, else the console exporter. `OTEL_EXPORTER_OTLP_PROTOCOL`
picks grpc (default) or http/protobuf. Tests pass their own (in-memory) exporter.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, MutableMapping

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

_provider: TracerProvider | None = None


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
    # still flows through every hop, marked unsampled, at a fraction of the cost.
    sampler = ALWAYS_OFF if chosen is None and from_env and _exporter_disabled() else None
    provider = TracerProvider(resource=resource, sampler=sampler)
    if chosen is not None:
        provider.add_span_processor(BatchSpanProcessor(chosen) if batch else SimpleSpanProcessor(chosen))
    trace.set_tracer_provider(provider)
    _provider = provider
    return provider


def shutdown_tracing() -> None:
    if _provider is not None:
        _provider.force_flush()
        _provider.shutdown()


def tracer(name: str = "agora") -> trace.Tracer:
    return trace.get_tracer(name)


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
