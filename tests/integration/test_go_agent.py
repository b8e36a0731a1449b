"""An agent in another language: the Go agent app (examples/go-agent, on the Dapr Go SDK, none
of Agora's Python code) joins a real market beside its own daprd as app `agents-go`, speaking
only the documented topics, bid route and JSON Schemas: it registers `wordsmith` with a lease,
wins a task by its own bid, acknowledges the award on the task board, counts the words and
reports the outcome, which every service validates with the same models as a Python agent's.
The contracts are language-neutral."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.gobuild import go_agent
from agora.harness.system import CONSOLE, RECORDER, SERVICES
from tests.integration.helpers import eventually, publish_event, replicas_of

pytestmark = pytest.mark.integration

GO_APP_ID = "agents-go"
TERMINAL = {"COMPLETED", "FAILED", "PARTIAL", "REJECTED"}


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    binary = go_agent()  # built once per version of its sources, into the binary cache
    go_app = ServiceSpec(GO_APP_ID, None, command=[str(binary)])
    with LocalCluster(
        "redis", run_dir=tmp_path_factory.mktemp("go-agent-cluster"), jaeger=True,
        extra_env={"OTEL_BSP_SCHEDULE_DELAY": "200"},
    ) as cluster:  # fmt: skip
        for spec in [*SERVICES, RECORDER, CONSOLE, go_app]:
            cluster.add_service(spec)
        yield cluster


def console(cluster: LocalCluster) -> ServiceReplica:
    return replicas_of(cluster, "console")[0]


def settled(cluster: LocalCluster, task_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        answer = httpx.get(console(cluster).invoke_url(f"v1/tasks/{task_id}", "taskboard"), timeout=10)
        record = answer.json() if answer.status_code == 200 else None
        return (
            record
            if record
            and record["status"] in TERMINAL
            and (record["outcome"] or record["status"] == "REJECTED")
            else None
        )

    return eventually(done, timeout=60)


def test_the_go_agent_registered_itself_as_bidding_for_itself(market: LocalCluster) -> None:
    answer = httpx.get(console(market).invoke_url("v1/agents/wordsmith", "registry"), timeout=10)
    assert answer.status_code == 200, answer.text
    registered = answer.json()
    assert registered["bid_app_id"] == GO_APP_ID and registered["skill_tags"] == ["count_words"]
    assert registered["lease_expires_at"], "registered with a lease"


def test_the_go_agent_wins_a_task_by_its_own_bid_and_reports_the_word_count(market: LocalCluster) -> None:
    task_id = f"words-{uuid.uuid4().hex[:8]}"
    description = "Count the words of this short sentence, please"
    spec = {
        "task_id": task_id,
        "description": description,
        "required_skills": ["count_words"],
        "min_success_threshold": 0.0,
        # A generous bid deadline: a busy machine must not turn the app's own bid into the
        # market's fallback estimate, which this test tells apart.
        "bid_deadline_ms": 5000,
    }
    publish_event(console(market).dapr_http, "agora.tasks", spec)

    record = settled(market, task_id)

    allocation = record["allocation"]
    assert record["status"] == "COMPLETED", record
    assert allocation["winning_agent_id"] == "wordsmith"
    bid = allocation["winning_bid"]
    assert bid["fallback"] is False, bid.get("fallback_reason")
    assert bid["rationale"] == "Wordsmith (Go): one step to count 8 words"
    assert bid["estimated_steps"] == 1 and bid["estimated_cost_usd"] == pytest.approx(0.0001)
    outcome = record["outcome"]
    assert outcome["agent_id"] == "wordsmith" and outcome["actual_success"] is True
    assert outcome["summary"] == str(len(description.split())) == "8"
    assert outcome["actual_steps"] == 1 and outcome["actual_cost_usd"] == pytest.approx(0.0001)
    assert outcome["input_tokens"] == 0 and outcome["output_tokens"] == 0
    history = [change["status"] for change in record["history"]]
    assert history == ["PENDING", "BIDDING", "ALLOCATED", "COMPLETED"], history


def test_no_other_app_may_ask_the_go_agent_for_bids(market: LocalCluster) -> None:
    """Its access policy (components/access-control/agents-go.yaml) lets the allocator ask for
    bids; the registry, say, is refused by the Go app's sidecar."""
    registry = replicas_of(market, "registry")[0]
    solicitation = {
        "agent_id": "wordsmith",
        "task": {"task_id": "nope", "description": "x", "required_skills": ["count_words"]},
        "respond_within_ms": 300,
    }
    refused = httpx.post(registry.invoke_url("v1/bids", GO_APP_ID), json=solicitation, timeout=10)
    assert refused.status_code == 403, refused.text

    offered = httpx.post(console(market).invoke_url("v1/bids", GO_APP_ID), json=solicitation, timeout=10)
    assert offered.status_code == 200, offered.text
    assert offered.json()["estimated_steps"] == 1

    unknown = httpx.post(
        console(market).invoke_url("v1/bids", GO_APP_ID), json={**solicitation, "agent_id": "x"}, timeout=10
    )
    assert unknown.status_code == 404 and unknown.json()["error"] == "NOT_FOUND", unknown.text
