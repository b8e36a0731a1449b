from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agora.harness.processes import PORT_RANGE_ENV
from agora.runtime.tracing import configure_tracing

INTEGRATION_DIR = Path(__file__).parent / "integration"


WORKER_PORTS = 4_000
"""Ports of each of pytest's workers (`make test` runs two): consecutive ranges from 16000, below
the kernel's ephemeral ports."""
WHOLE_SYSTEM_FILES = frozenset(
    {
        "test_first_hour.py",
        "test_kubernetes_node.py",
        "test_no_leftovers.py",
        "test_side_by_side.py",
    }
)
"""The test files marked `whole_system`: each starts systems of its own the way a person would
(`make run`'s default ports and run folder, a Kubernetes node), so they run one after another,
on one worker (tests/unit/test_test_scheduling.py keeps this list and the marks in step)."""
WHOLE_SYSTEM_GROUP = "whole-system"


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is not None and PORT_RANGE_ENV not in os.environ:
        first = 16_000 + int(worker.removeprefix("gw")) * WORKER_PORTS
        os.environ[PORT_RANGE_ENV] = f"{first}-{first + WORKER_PORTS - 1}"


def file_group_of(nodeid: str) -> str:
    """The unit of work of pytest's workers: a test file (its systems are the file's fixtures),
    the whole-system files together."""
    path = nodeid.split("::", 1)[0]
    return WHOLE_SYSTEM_GROUP if Path(path).name in WHOLE_SYSTEM_FILES else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]  # no type hints

    class FileGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return file_group_of(nodeid)

    return FileGroupScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
    # Tests that start whole systems of their own run first: their timings (a clean start, a
    # reload timer) are not disturbed by the shared clusters, and with workers side by side the
    # longest group starts first.
    items.sort(key=lambda item: item.get_closest_marker("whole_system") is None)


@pytest.fixture(scope="session", autouse=True)
def tracer_provider() -> TracerProvider:
    """The test process's tracer provider (service name `agora-tests`); tests add exporters.
    Installed before a worker's first test, whichever file that is: a test that builds a
    service app would otherwise install the process-wide provider from its own environment
    (one with `OTEL_TRACES_EXPORTER=none` records no span for the tests after it)."""
    return configure_tracing("agora-tests", from_env=False)


@pytest.fixture
def spans(tracer_provider: TracerProvider) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter
