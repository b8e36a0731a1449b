"""Session-wide local clusters of real daprd sidecars, placement, scheduler, Redis and Jaeger."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agora.harness import LocalCluster, ServiceSpec
from agora.harness.system import EMBEDDED, RECORDER, REGISTRY, SERVICES, console_with
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprSidecar
from tests.integration.helpers import STORE_PROFILE, write_console_api_keys, write_console_users


def _start(
    profile: str, run_dir: Path, specs: list[tuple[ServiceSpec, int]], *, console: bool = False
) -> Iterator[LocalCluster]:
    with LocalCluster(
        profile, run_dir=run_dir, jaeger=True, extra_env={"OTEL_BSP_SCHEDULE_DELAY": "200"}
    ) as cluster:
        for spec, replicas in specs:
            cluster.add_service(spec, replicas)
        if console:
            # The console beside them, with the people of `write_console_users`, their API keys and
            # the trace store.
            users = write_console_users(run_dir / "console-users.yaml")
            keys = write_console_api_keys(run_dir / "console-api-keys.yaml")
            app_ids = {r.spec.app_id for r in cluster.replicas}
            cluster.add_service(
                console_with(
                    app_ids,
                    str(users),
                    AGORA_CONSOLE_REFRESH_SECONDS="0.5",
                    AGORA_CONSOLE_JAEGER_URL=cluster.jaeger_query_url,
                    AGORA_CONSOLE_API_KEYS_FILE=str(keys),
                )
            )
        yield cluster


@pytest.fixture(scope="session")
def apps_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Every service as its own app (the redis profile, or `STORE_PROFILE`'s), two registry
    replicas sharing state and pub/sub, a recorder on the dead-letter and task decision topics,
    and the console."""
    specs = [(spec, 2 if spec is REGISTRY else 1) for spec in SERVICES]
    yield from _start(
        STORE_PROFILE, tmp_path_factory.mktemp("apps-cluster"), [*specs, (RECORDER, 1)], console=True
    )


@pytest.fixture(scope="session")
def default_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Embedded default profile (in-memory state and pub/sub): every service in one app."""
    yield from _start("default", tmp_path_factory.mktemp("default-cluster"), [(EMBEDDED, 1)])


MODEL_CALLER = ServiceSpec("model-caller", None)
"""A sidecar without an app: what a service's sidecar is to its model calls."""


@pytest.fixture(scope="module")
def model_system(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[LocalCluster]:
    """The local model server (llama.cpp's, serving SmolLM2-135M) and a sidecar without an app
    whose `agora-llm` component is `conversation.openai` pointed at it; one per test module."""
    run_dir = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    with LocalCluster(run_dir=run_dir, model="local") as cluster:
        cluster.add_service(MODEL_CALLER)
        yield cluster


@pytest.fixture
async def model_sidecar(model_system: LocalCluster) -> AsyncIterator[DaprSidecar]:
    """The caller's sidecar, as a service's model client reaches it."""
    [caller] = model_system.replicas
    client = DaprSidecar(
        ServiceSettings(app_id="agora-tests", dapr_http_port=caller.endpoints.dapr_http_port)
    )
    yield client
    await client.aclose()
