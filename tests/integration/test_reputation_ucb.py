"""A reputation record as the reputation service shows it (`GET /v1/reputation/{id}`) reports
its UCB bonus over the whole market (redis profile, two reputation replicas): the outcomes of
several agents, applied through either replica's actors, make up `N`."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agora.core.contracts import OutcomeReport, OutcomeReports
from agora.core.market import TaskOutcome
from agora.harness import LocalCluster, ServiceReplica
from agora.harness.system import REPUTATION
from agora.runtime.actor_client import ActorClient
from agora.runtime.clients import reputation_actors
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprSidecar

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def reputations(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ServiceReplica]]:
    run_dir: Path = tmp_path_factory.mktemp("reputation-ucb")
    with LocalCluster("redis", run_dir=run_dir) as cluster:
        yield cluster.add_service(REPUTATION, 2)


def shown(replica: ServiceReplica, agent_id: str) -> dict[str, Any]:
    answer = httpx.get(replica.invoke_url(f"v1/reputation/{agent_id}"), timeout=10)
    assert answer.status_code == 200, answer.text
    record: dict[str, Any] = answer.json()
    return record


def reports(agent_id: str, count: int) -> OutcomeReports:
    return OutcomeReports(
        reports=[
            OutcomeReport(
                outcome=TaskOutcome(
                    task_id=f"{agent_id}-t{i}",
                    agent_id=agent_id,
                    actual_success=i % 2 == 0,
                    actual_cost_usd=0.01,
                    actual_steps=1,
                ),
                counts_as_success=i % 2 == 0,
            )
            for i in range(count)
        ]
    )


def test_a_shown_record_s_ucb_confidence_is_its_bonus_over_the_market_s_outcomes(
    reputations: list[ServiceReplica],
) -> None:
    prefix = uuid.uuid4().hex[:6]
    counts = {f"{prefix}-a": 5, f"{prefix}-b": 3, f"{prefix}-c": 1}

    async def apply() -> None:
        sidecars = [
            DaprSidecar(ServiceSettings(dapr_http_port=r.endpoints.dapr_http_port)) for r in reputations
        ]
        try:
            actors = [reputation_actors(ActorClient(sidecar)) for sidecar in sidecars]
            await asyncio.gather(
                *(
                    actors[i % 2](agent).apply_outcomes(reports(agent, count))
                    for i, (agent, count) in enumerate(counts.items())
                )
            )
        finally:
            await asyncio.gather(*(sidecar.aclose() for sidecar in sidecars))

    asyncio.run(apply())
    market = sum(counts.values())  # this cluster's store holds these agents' outcomes only

    for replica in reputations:
        for agent, count in counts.items():
            record = shown(replica, agent)  # an applying call returns once its total is noted
            assert record["total_tasks"] == count
            assert record["ucb_confidence"] == pytest.approx(math.sqrt(2 * math.log(market) / count))
        stranger = shown(replica, f"{prefix}-new")
        assert stranger["total_tasks"] == 0
        assert stranger["ucb_confidence"] == pytest.approx(math.sqrt(2 * math.log(market)))
