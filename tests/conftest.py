from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agora.runtime.tracing import configure_tracing

INTEGRATION_DIR = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
    # Tests that start whole systems of their own run first, while the machine is quiet:
    # their timings (a clean start, a reload timer) are not disturbed by the shared clusters.
    items.sort(key=lambda item: item.get_closest_marker("whole_system") is None)


@pytest.fixture(scope="session")
def tracer_provider() -> TracerProvider:
    """The test process's tracer provider (service name `agora-tests`); tests add exporters."""
    return configure_tracing("agora-tests", from_env=False)


@pytest.fixture
def spans(tracer_provider: TracerProvider) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter
