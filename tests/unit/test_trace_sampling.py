"""The apps sample as the standard OTEL_TRACES_SAMPLER variables say (the Helm chart sets
`parentbased_traceidratio` with the sidecars' rate); the traces they start themselves, spans of
long workflow steps included, are kept or dropped whole by that verdict."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agora.runtime import tracing
from agora.runtime.tracing import (
    configure_tracing,
    extract_context,
    record_finished_span,
    span_traceparent,
    stable_span_id,
)

RATIO = 0.1
LOW_64_BITS = (1 << 64) - 1
KEPT_AT_A_TENTH = 0x4BF92F3577B34DA6_0000000000000001
"""A trace id a trace id ratio sampler of 0.1 keeps (its low 64 bits are below a tenth of 2^64)."""
DROPPED_AT_A_TENTH = 0x4BF92F3577B34DA6_FFFFFFFFFFFFFFFE
"""One it drops."""

Configure = Callable[[], tuple[TracerProvider, InMemorySpanExporter]]


@pytest.fixture
def fresh_tracing(monkeypatch: pytest.MonkeyPatch) -> Iterator[Configure]:
    """`configure_tracing` as a service's start-up calls it, with an in-memory exporter, on a
    provider of this test only (the process-wide one other tests use is left as it is)."""
    made: list[TracerProvider] = []

    def configure() -> tuple[TracerProvider, InMemorySpanExporter]:
        monkeypatch.setattr(tracing, "_provider", None)
        monkeypatch.setattr(trace, "set_tracer_provider", lambda provider: None)
        exporter = InMemorySpanExporter()
        provider = configure_tracing("sampling-test", exporter, batch=False)
        monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
        made.append(provider)
        return provider, exporter

    yield configure
    for provider in made:
        provider.shutdown()


def _at_a_tenth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", str(RATIO))


def _recorded_traces(exporter: InMemorySpanExporter) -> set[int]:
    return {span.context.trace_id for span in exporter.get_finished_spans()}


def test_the_sampler_is_the_one_otel_traces_sampler_names(
    monkeypatch: pytest.MonkeyPatch, fresh_tracing: Configure
) -> None:
    _at_a_tenth(monkeypatch)
    provider, exporter = fresh_tracing()
    assert provider.sampler.get_description().startswith("ParentBased{root:TraceIdRatioBased{0.1}")

    app_tracer = provider.get_tracer("test")
    for trace_id, flags in ((KEPT_AT_A_TENTH, "00"), (DROPPED_AT_A_TENTH, "01")):
        # A caller's decision is followed whatever the ratio would say of its trace id.
        caller = extract_context({"traceparent": f"00-{trace_id:032x}-00f067aa0ba902b7-{flags}"})
        app_tracer.start_span("continued", context=caller).end()
    assert _recorded_traces(exporter) == {DROPPED_AT_A_TENTH}


def test_a_new_workflow_trace_and_its_recorded_root_share_the_samplers_verdict(
    monkeypatch: pytest.MonkeyPatch, fresh_tracing: Configure
) -> None:
    _at_a_tenth(monkeypatch)
    _, exporter = fresh_tracing()
    start = datetime(2025, 1, 1, tzinfo=UTC)
    flagged_kept: set[int] = set()
    expected_kept: set[int] = set()
    for n in range(400):
        traceparent = span_traceparent(None, stable_span_id("run", str(n)))
        _, trace_hex, _, flags = traceparent.split("-")
        trace_id = int(trace_hex, 16)
        if flags == "01":
            flagged_kept.add(trace_id)
        if trace_id & LOW_64_BITS < RATIO * 2**64:
            expected_kept.add(trace_id)
        record_finished_span("agora.run", traceparent, None, start, start + timedelta(seconds=1))
    assert flagged_kept == expected_kept
    assert 0 < len(flagged_kept) < 400  # 400 new traces at a tenth: some kept, most not
    # The root is recorded exactly for the traces its children were told to record.
    assert _recorded_traces(exporter) == flagged_kept


def test_without_a_sampler_variable_every_new_trace_is_kept(
    monkeypatch: pytest.MonkeyPatch, fresh_tracing: Configure
) -> None:
    monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    monkeypatch.delenv("OTEL_TRACES_SAMPLER_ARG", raising=False)
    fresh_tracing()
    flags = {span_traceparent(None, stable_span_id("run", str(n))).rsplit("-", 1)[1] for n in range(50)}
    assert flags == {"01"}
