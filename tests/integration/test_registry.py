"""The registry through real sidecars: replication, durability, dead-lettering, idempotency."""

from __future__ import annotations

import functools
import uuid
from typing import Any

import httpx

from agora.harness import LocalCluster, ServiceReplica
from tests.integration.helpers import eventually, filter_ids, profile, publish_event, replicas_of

# Replicas learn of changes through the fan-out topic; on a loaded 2-core machine (a burst
# of tasks in a neighbouring test) a delivery can wait for a retry.
REPLICATION_S = 60


def test_registration_through_one_replica_is_seen_by_the_other(apps_cluster: LocalCluster) -> None:
    a, b = replicas_of(apps_cluster, "registry")
    skill = f"skill-{uuid.uuid4().hex[:6]}"
    for agent in (profile("alpha-" + skill, skill, "summarize"), profile("beta-" + skill, skill)):
        httpx.post(f"{a.app_url}/v1/agents", json=agent, timeout=10).raise_for_status()

    expected = ["alpha-" + skill, "beta-" + skill]
    assert filter_ids(a.app_url, [skill], ["summarize"]) == expected
    eventually(lambda: filter_ids(b.app_url, [skill], ["summarize"]) == expected, timeout=REPLICATION_S)

    # And through Dapr service invocation from any sidecar.
    response = httpx.post(
        b.invoke_url("v1/agents/filter"), json={"required_skills": [skill], "preferred_skills": ["summarize"]}
    )
    assert [x["agent_id"] for x in response.json()["agents"]] == expected

    httpx.delete(f"{b.app_url}/v1/agents/alpha-{skill}", timeout=10).raise_for_status()
    eventually(lambda: filter_ids(a.app_url, [skill]) == ["beta-" + skill], timeout=REPLICATION_S)


def test_registration_by_topic_reaches_every_replica(apps_cluster: LocalCluster) -> None:
    replicas = replicas_of(apps_cluster, "registry")
    skill = f"skill-{uuid.uuid4().hex[:6]}"
    publish_event(
        replicas[0].dapr_http, "agora.registry", {"kind": "register", "profile": profile("gamma", skill)}
    )

    def finds_gamma(replica: ServiceReplica) -> bool:
        return filter_ids(replica.app_url, [skill]) == ["gamma"]

    for replica in replicas:
        eventually(functools.partial(finds_gamma, replica), timeout=REPLICATION_S)


def test_profile_survives_restart_of_app_and_sidecar(apps_cluster: LocalCluster) -> None:
    a, b = replicas_of(apps_cluster, "registry")
    skill = f"skill-{uuid.uuid4().hex[:6]}"
    httpx.post(f"{a.app_url}/v1/agents", json=profile("durable", skill, cost_per_step_usd=0.5), timeout=10)
    eventually(lambda: filter_ids(b.app_url, [skill]) == ["durable"], timeout=REPLICATION_S)

    b.restart()
    assert filter_ids(b.app_url, [skill]) == ["durable"], "load_all warmed the cache from Redis"
    stored = httpx.get(f"{b.app_url}/v1/agents/durable", timeout=10).json()
    assert stored["cost_per_step_usd"] == 0.5


def test_malformed_command_is_dead_lettered_and_service_keeps_serving(apps_cluster: LocalCluster) -> None:
    registry = replicas_of(apps_cluster, "registry")[0]
    [recorder] = replicas_of(apps_cluster, "recorder")
    bad = {"kind": "register", "profile": {"agent_id": "", "agent_name": "Nobody", "skill_tags": []}}
    event_id = publish_event(registry.dapr_http, "agora.registry", bad)

    def dead_letter() -> dict[str, Any] | None:
        messages = httpx.get(f"{recorder.app_url}/v1/messages/agora.deadletter", timeout=10).json()[
            "messages"
        ]
        return next((m for m in messages if m.get("message_id") == event_id), None)

    # Up to a redelivery cycle late right after the restart in the test above (see test_market_crash).
    letter = eventually(dead_letter, timeout=45)
    assert letter["topic"] == "agora.registry"
    assert letter["subscriber"] == "registry"
    assert letter["reason"] == "payload failed validation"
    assert letter["payload"] == bad
    failed_fields = {tuple(e["loc"])[-1] for e in letter["errors"]}
    assert failed_fields == {"agent_id", "skill_tags"}

    # Not even a half-registration happened, and the service still answers.
    assert httpx.get(f"{registry.app_url}/readyz", timeout=5).status_code == 200
    skill = f"skill-{uuid.uuid4().hex[:6]}"
    httpx.post(
        f"{registry.app_url}/v1/agents", json=profile("after-bad", skill), timeout=10
    ).raise_for_status()
    assert filter_ids(registry.app_url, [skill]) == ["after-bad"]


def test_not_a_cloud_event_is_dead_lettered_too(apps_cluster: LocalCluster) -> None:
    registry = replicas_of(apps_cluster, "registry")[0]
    [recorder] = replicas_of(apps_cluster, "recorder")
    marker = uuid.uuid4().hex
    # Raw text published with a non-JSON content type arrives as a CloudEvent whose data is text.
    httpx.post(
        f"{registry.dapr_http}/v1.0/publish/agora-pubsub/agora.registry",
        content=f"not json {marker}".encode(),
        headers={"content-type": "text/plain"},
        timeout=10,
    ).raise_for_status()

    def dead_letter() -> dict[str, Any] | None:
        messages = httpx.get(f"{recorder.app_url}/v1/messages/agora.deadletter", timeout=10).json()[
            "messages"
        ]
        return next((m for m in messages if marker in str(m.get("payload"))), None)

    assert eventually(dead_letter)["reason"] == "payload failed validation"


def test_redelivered_command_is_applied_once(apps_cluster: LocalCluster) -> None:
    a, b = replicas_of(apps_cluster, "registry")
    skill = f"skill-{uuid.uuid4().hex[:6]}"
    event_id = str(uuid.uuid4())
    publish_event(
        a.dapr_http,
        "agora.registry",
        {"kind": "register", "profile": profile("once", skill)},
        event_id=event_id,
    )
    eventually(lambda: filter_ids(a.app_url, [skill]) == ["once"])

    # Deregister, then deliver the same register command (same CloudEvent id) again: it must
    # be recognised as a duplicate and not resurrect the agent.
    httpx.delete(f"{a.app_url}/v1/agents/once", timeout=10).raise_for_status()
    publish_event(
        b.dapr_http,
        "agora.registry",
        {"kind": "register", "profile": profile("once", skill)},
        event_id=event_id,
    )
    probe_skill = f"probe-{uuid.uuid4().hex[:6]}"
    publish_event(
        b.dapr_http, "agora.registry", {"kind": "register", "profile": profile("probe", probe_skill)}
    )
    eventually(lambda: filter_ids(a.app_url, [probe_skill]) == ["probe"])
    assert filter_ids(a.app_url, [skill]) == []
    assert filter_ids(b.app_url, [skill]) == []


def test_invalid_profile_over_http_is_a_typed_422(default_cluster: LocalCluster) -> None:
    registry = replicas_of(default_cluster, "agora")[0]
    response = httpx.post(registry.invoke_url("v1/agents"), json=profile("bad", "x", max_steps=0), timeout=10)
    assert response.status_code == 422
    assert response.json()["details"]["errors"][0]["loc"][-1] == "max_steps"
    missing = httpx.get(registry.invoke_url("v1/agents/nobody"), timeout=10)
    assert missing.status_code == 404
    assert missing.json()["error"] == "NOT_FOUND"


def test_default_profile_registers_and_filters(default_cluster: LocalCluster) -> None:
    registry = replicas_of(default_cluster, "agora")[0]
    search, digest = f"search-{uuid.uuid4().hex[:6]}", f"digest-{uuid.uuid4().hex[:6]}"
    for agent in (profile("r1", search, digest), profile("r2", search), profile("r3", "sql")):
        httpx.post(registry.invoke_url("v1/agents"), json=agent, timeout=10).raise_for_status()
    publish_event(
        registry.dapr_http, "agora.registry", {"kind": "register", "profile": profile("r0", search)}
    )
    eventually(lambda: filter_ids(registry.app_url, [search], [digest]) == ["r1", "r0", "r2"])
