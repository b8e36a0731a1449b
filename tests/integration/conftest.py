"""Session-wide local clusters of real daprd sidecars, placement, scheduler, Redis and Jaeger."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agora.harness import LocalCluster, ServiceSpec
from agora.harness.system import EMBEDDED, RECORDER, REGISTRY, SERVICES, console_with
from tests.integration.helpers import write_console_users


def _start(
    profile: str, run_dir: Path, specs: list[tuple[ServiceSpec, int]], *, console: bool = False
) -> Iterator[LocalCluster]:
    with LocalCluster(
        profile, run_dir=run_dir, jaeger=True, extra_env={"OTEL_BSP_SCHEDULE_DELAY": "200"}
    ) as cluster:
        for spec, replicas in specs:
            cluster.add_service(spec, replicas)
        if console:
            # The console beside them, with the people of `write_console_users` and the trace store.
            users = write_console_users(run_dir / "console-users.yaml")
            app_ids = {r.spec.app_id for r in cluster.replicas}
            cluster.add_service(
                console_with(
                    app_ids,
                    str(users),
                    AGORA_CONSOLE_REFRESH_SECONDS="0.5",
                    AGORA_CONSOLE_JAEGER_URL=cluster.jaeger_query_url,
                )
            )
        yield cluster


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Redis profile: every service as its own app, two registry replicas sharing state and
    pub/sub, a recorder on the dead-letter and task decision topics, and the console."""
    specs = [(spec, 2 if spec is REGISTRY else 1) for spec in SERVICES]
    yield from _start(
        "redis", tmp_path_factory.mktemp("redis-cluster"), [*specs, (RECORDER, 1)], console=True
    )


@pytest.fixture(scope="session")
def default_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Embedded default profile (in-memory state and pub/sub): every service in one app."""
    yield from _start("default", tmp_path_factory.mktemp("default-cluster"), [(EMBEDDED, 1)])
