"""Two local systems on one machine at once, with the same app ids: each resolves app ids
through its own run folder, so each serves only itself. Calls go through each system's console
sidecar (a second app id), since a sidecar reaches its own app without name resolution."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from agora.harness import LocalCluster, ServiceReplica
from agora.harness.system import CONSOLE, EMBEDDED
from tests.integration.helpers import eventually, filter_ids, profile, publish_event

pytestmark = pytest.mark.whole_system
ROUNDS = 10


@dataclass(frozen=True)
class System:
    app: ServiceReplica
    console: ServiceReplica

    def url(self, path: str) -> str:
        """`path` of app id `agora`, through the console: the system's name resolution decides
        which app that is."""
        return self.console.invoke_url(path, app_id="agora")

    def agents(self, prefix: str) -> set[str]:
        answer = httpx.get(f"{self.app.app_url}/v1/agents", timeout=10).json()
        return {a["agent_id"] for a in answer["agents"] if a["agent_id"].startswith(prefix)}


@pytest.fixture(scope="module")
def two_systems(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[System, System]]:
    with (
        LocalCluster("default", run_dir=tmp_path_factory.mktemp("left")) as left,
        LocalCluster("default", run_dir=tmp_path_factory.mktemp("right")) as right,
    ):
        systems = []
        for cluster in (left, right):
            [app] = cluster.add_service(EMBEDDED)
            [console] = cluster.add_service(CONSOLE)
            systems.append(System(app, console))
        yield systems[0], systems[1]


def test_each_system_reaches_only_its_own_apps(two_systems: tuple[System, System]) -> None:
    left, right = two_systems
    skill = f"side-{uuid.uuid4().hex[:6]}"
    for _ in range(ROUNDS):  # with one resolver for both, about half would land in the other
        for system, side in ((left, "left"), (right, "right")):
            agent = profile(f"{side}-{uuid.uuid4().hex[:6]}", skill)
            answer = httpx.post(system.url("v1/agents"), json=agent, timeout=10)
            assert answer.status_code == 200, answer.text
    assert len(left.agents("left-")) == len(right.agents("right-")) == ROUNDS
    assert left.agents("right-") == right.agents("left-") == set()
    assert len(filter_ids(left.app.app_url, [skill])) == len(filter_ids(right.app.app_url, [skill])) == 5


def test_each_system_allocates_its_own_tasks(two_systems: tuple[System, System]) -> None:
    left, right = two_systems
    task_id = f"task-{uuid.uuid4().hex[:8]}"
    spec = {"task_id": task_id, "description": "Summarise the week", "required_skills": ["web_search"],
            "min_success_threshold": 0.0}  # fmt: skip
    publish_event(left.app.dapr_http, "agora.tasks", spec)

    def decided_on_left() -> bool:
        answer = httpx.get(left.url(f"v1/tasks/{task_id}"), timeout=10)
        return answer.status_code == 200 and answer.json()["status"] != "PENDING"

    eventually(decided_on_left, timeout=30)
    for _ in range(ROUNDS):
        assert httpx.get(right.url(f"v1/tasks/{task_id}"), timeout=10).status_code == 404
