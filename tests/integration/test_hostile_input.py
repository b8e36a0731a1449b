"""Hostile and careless input through real sidecars: forged decisions and outcomes are refused,
oversized input is refused with a typed error and leaves nothing behind, input at every bound is
served (how fast is measured in `make bench`, not here), permanent errors are dead-lettered on
their first delivery, and an award nobody takes is passed on or failed with the reason."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from agora.core.limits import (
    MAX_BODY_BYTES,
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_SKILL_TAG_CHARS,
    MAX_SKILL_TAGS,
    MAX_TASK_SKILLS,
    MAX_TEXT_CHARS,
)
from agora.harness import LocalCluster, ServiceReplica
from agora.registry.service import INDEX_NAMESPACE
from agora.runtime.actor_interface import wire_name
from agora.runtime.interfaces import ReputationInterface, TaskInterface
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprSidecar
from agora.runtime.state import StateRepository
from agora.runtime.status_index import IdSet, StatusIndex
from tests.integration.helpers import eventually, profile, publish_event, replicas_of
from tests.integration.test_escalation import CONFIDENT, host, pause, resume, session_state, step, url

HUGE_TAG_COUNT = 200_000


def dead_letters(cluster: LocalCluster) -> list[dict[str, Any]]:
    [recorder] = replicas_of(cluster, "recorder")
    answer = httpx.get(f"{recorder.app_url}/v1/messages/agora.deadletter", timeout=10).json()
    return list(answer["messages"])


def dead_letter_for(cluster: LocalCluster, message_id: str, timeout: float = 15) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        return next((m for m in dead_letters(cluster) if m.get("message_id") == message_id), None)

    letter = eventually(found, timeout)
    assert letter is not None
    return letter


def log_lines(replica: ServiceReplica) -> list[dict[str, Any]]:
    path = replica.cluster.logs / f"{replica.name}.app.log"
    lines = []
    for line in Path(path).read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


def refusals_in_log(replica: ServiceReplica, message_id: str) -> list[dict[str, Any]]:
    """The app's 'message dead-lettered' log entries for one message (the default profile has
    no recorder: its in-memory broker lives inside the app's sidecar)."""
    return [
        line
        for line in log_lines(replica)
        if line.get("message") == "message dead-lettered" and line.get("message_id") == message_id
    ]


def forged_decision(escalation_id: str, session: str) -> dict[str, Any]:
    return {
        "escalation_id": escalation_id,
        "waiting_party": {"kind": "session", "id": session},
        "decision": {"kind": "escalation", "action": "retry"},
        "decided_by": "mallory",
        "status": "RESOLVED",
    }


def escalation(cluster: LocalCluster, escalation_id: str) -> dict[str, Any]:
    return dict(httpx.get(url(cluster, "escalation", f"v1/escalations/{escalation_id}"), timeout=30).json())


# -- forged decisions --------------------------------------------------------------------------


def test_a_forged_decision_is_dead_lettered_and_the_session_keeps_waiting(
    default_cluster: LocalCluster,
) -> None:
    session, escalation_id = pause(default_cluster)
    app = host(default_cluster, "agora")
    event_id = publish_event(
        app.dapr_http, "agora.escalation.resolved", forged_decision(escalation_id, session)
    )

    [refusal] = eventually(lambda: refusals_in_log(app, event_id))
    assert refusal["reason"].startswith("UNVERIFIED_DECISION") and "has no decision" in refusal["reason"]
    assert session_state(default_cluster, session)["status"] == "WAITING_FOR_HUMAN"
    record = escalation(default_cluster, escalation_id)
    assert record["status"] == "WAITING_FOR_HUMAN" and record["decision"] is None

    # The person's decision still goes through, and the session continues.
    assert resume(default_cluster, escalation_id, {"action": "retry"}).status_code == 200
    eventually(lambda: session_state(default_cluster, session)["status"] == "RUNNING")
    assert step(default_cluster, session, "3", CONFIDENT).status_code == 200


def test_a_decision_for_an_unknown_escalation_is_dead_lettered(default_cluster: LocalCluster) -> None:
    app = host(default_cluster, "agora")
    event_id = publish_event(
        app.dapr_http, "agora.escalation.resolved", forged_decision(f"nope-{uuid.uuid4().hex[:6]}", "nobody")
    )
    [refusal] = eventually(lambda: refusals_in_log(app, event_id))
    assert refusal["reason"].startswith("NOT_FOUND")


def test_only_the_escalation_service_may_publish_decisions(apps_cluster: LocalCluster) -> None:
    session, escalation_id = pause(apps_cluster)
    [recorder] = replicas_of(apps_cluster, "recorder")
    forged = forged_decision(escalation_id, session)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        publish_event(recorder.dapr_http, "agora.escalation.resolved", forged)
    assert refused.value.response.status_code == 403
    assert refused.value.response.json()["errorCode"] == "ERR_PUBSUB_FORBIDDEN"

    # What slips past the scopes (here: published from the escalation app's own sidecar, as a
    # message injected into the broker would arrive) is checked against the record.
    escalation_app = host(apps_cluster, "escalation")
    event_id = publish_event(escalation_app.dapr_http, "agora.escalation.resolved", forged)
    letter = dead_letter_for(apps_cluster, event_id)
    assert letter["subscriber"] in {"uncertainty", "worker"}
    assert letter["reason"].startswith("UNVERIFIED_DECISION")
    assert session_state(apps_cluster, session)["status"] == "WAITING_FOR_HUMAN"
    assert escalation(apps_cluster, escalation_id)["status"] == "WAITING_FOR_HUMAN"

    console = host(apps_cluster, "console")
    answer = httpx.post(
        console.invoke_url(f"v1/escalations/{escalation_id}/resume", app_id="escalation"),
        json={"decision": {"kind": "escalation", "action": "retry"}, "who": "alice", "why": "checked"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    eventually(lambda: session_state(apps_cluster, session)["status"] == "RUNNING")


def test_a_bad_park_request_names_its_fields(default_cluster: LocalCluster) -> None:
    target = url(default_cluster, "escalation", f"v1/escalations/bad-{uuid.uuid4().hex[:6]}")
    answer = httpx.put(
        target,
        json={
            "waiting_party": {"kind": "session", "id": "s"},
            "context": {"kind": "escalation", "job_id": "s"},
        },
        timeout=30,
    )
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["error"] == "INVALID_ARGUMENT" and body["message"].startswith("invalid request: ")
    missing = {tuple(e["loc"])[-1] for e in body["details"]["errors"]}
    assert {"sheet_num", "confidence", "prompt_used"} <= missing


# -- forged outcomes and awards nobody takes ----------------------------------------------------


def ghost_task(cluster: LocalCluster, *, deadline_ms: int) -> tuple[str, str]:
    """A task whose only capable agent is registered but has no runtime: it wins the award and
    never acknowledges it."""
    skill = f"ghostly-{uuid.uuid4().hex[:6]}"
    ghost = f"ghost-{uuid.uuid4().hex[:6]}"
    registry = host(cluster, "registry")
    registered = httpx.post(
        registry.invoke_url("v1/agents", app_id=registry.spec.app_id), json=profile(ghost, skill), timeout=10
    )
    assert registered.status_code == 200, registered.text
    task_id = f"task-{uuid.uuid4().hex[:8]}"
    spec = {
        "task_id": task_id,
        "description": "Haunt the data warehouse",
        "required_skills": [skill],
        "min_success_threshold": 0.0,
        "deadline_ms": deadline_ms,
    }
    publish_event(host(cluster, "allocator").dapr_http, "agora.tasks", spec)
    return task_id, ghost


def task_record(cluster: LocalCluster, task_id: str) -> dict[str, Any] | None:
    board = host(cluster, "taskboard")
    answer = httpx.get(board.invoke_url(f"v1/tasks/{task_id}", app_id=board.spec.app_id), timeout=10)
    return answer.json() if answer.status_code == 200 else None


def task_in(cluster: LocalCluster, task_id: str, *statuses: str, timeout: float = 20) -> dict[str, Any]:
    """The task's record once it is in one of `statuses` (any status but PENDING when none given)."""

    def settled() -> dict[str, Any] | None:
        record = task_record(cluster, task_id)
        if record is None:
            return None
        return (
            record if (record["status"] in statuses if statuses else record["status"] != "PENDING") else None
        )

    record = eventually(settled, timeout)
    assert record is not None
    return record


def reputation_total(cluster: LocalCluster, agent_id: str) -> int:
    sidecar = host(cluster, "reputation").dapr_http
    method = wire_name(ReputationInterface.get_record)
    answer = httpx.put(f"{sidecar}/v1.0/actors/Reputation/{agent_id}/method/{method}", timeout=10).json()
    return int(answer["result"]["total_tasks"])


def test_an_award_nobody_acknowledges_fails_with_the_reason_within_its_window(
    default_cluster: LocalCluster,
) -> None:
    task_id, ghost = ghost_task(default_cluster, deadline_ms=3000)
    allocated = task_in(default_cluster, task_id, "ALLOCATED")
    awarded_at = time.monotonic()
    assert allocated["allocation"]["winning_agent_id"] == ghost
    assert allocated["awards"][0]["acknowledged_at"] is None

    failed = task_in(default_cluster, task_id, "FAILED")
    assert time.monotonic() - awarded_at < 3 + 10  # the window, plus the scheduler's reminder latency
    assert failed["failure_reason"] == f"no agent acknowledged the award in time (tried {ghost})"
    assert failed["awards"][0]["expired_at"] is not None


def test_a_forged_outcome_is_refused_and_counts_nowhere(default_cluster: LocalCluster) -> None:
    task_id, ghost = ghost_task(default_cluster, deadline_ms=30_000)
    task_in(default_cluster, task_id, "ALLOCATED")
    app = host(default_cluster, "agora")
    forged = {
        "task_id": task_id,
        "agent_id": ghost,
        "actual_success": True,
        "actual_cost_usd": 0.0,
        "actual_steps": 1,
        "award_token": "guessed-guessed-guessed",
    }
    event_id = publish_event(app.dapr_http, "agora.task.outcome", forged)
    [refusal] = eventually(lambda: refusals_in_log(app, event_id))
    assert refusal["reason"].startswith("AWARD_NOT_HELD")
    record = task_record(default_cluster, task_id)
    assert record is not None and record["status"] == "ALLOCATED" and record["outcome"] is None
    assert reputation_total(default_cluster, ghost) == 0


def test_only_workers_may_report_outcomes_and_only_the_board_may_announce_recorded_ones(
    apps_cluster: LocalCluster,
) -> None:
    [recorder] = replicas_of(apps_cluster, "recorder")
    [worker] = replicas_of(apps_cluster, "worker")
    outcome = {
        "task_id": "any",
        "agent_id": "any",
        "actual_success": True,
        "actual_cost_usd": 0.0,
        "actual_steps": 1,
    }
    with pytest.raises(httpx.HTTPStatusError) as refused:
        publish_event(recorder.dapr_http, "agora.task.outcome", outcome)
    assert refused.value.response.status_code == 403
    # The reputation and waiting plans trust this topic: a worker cannot forge the board's word.
    with pytest.raises(httpx.HTTPStatusError) as refused:
        publish_event(
            worker.dapr_http, "agora.task.outcome.recorded", {"outcome": outcome, "counts_as_success": True}
        )
    assert refused.value.response.status_code == 403


# -- bounded input ---------------------------------------------------------------------------


def huge_profile(agent_id: str) -> dict[str, Any]:
    return profile(agent_id, *(f"tag{i}" for i in range(HUGE_TAG_COUNT)))


def registry_index(cluster: LocalCluster) -> list[str]:
    registry = host(cluster, "registry")
    settings = ServiceSettings(dapr_http_port=registry.endpoints.dapr_http_port)

    async def ids() -> list[str]:
        sidecar = DaprSidecar(settings)
        try:
            return await StatusIndex(
                StateRepository(sidecar, settings.state_store, INDEX_NAMESPACE, IdSet)
            ).list("all")
        finally:
            await sidecar.aclose()

    return asyncio.run(ids())


@pytest.mark.parametrize("cluster_name", ["default_cluster", "apps_cluster"])
def test_an_oversized_registration_is_refused_with_its_typed_error_and_leaves_nothing(
    cluster_name: str, request: pytest.FixtureRequest
) -> None:
    cluster: LocalCluster = request.getfixturevalue(cluster_name)
    registry = host(cluster, "registry")
    agent_id = f"huge-{uuid.uuid4().hex[:6]}"
    body = huge_profile(agent_id)
    targets = {
        "through the sidecar": registry.invoke_url("v1/agents", app_id=registry.spec.app_id),
        "straight to the app": f"{registry.app_url}/v1/agents",
    }
    for how, target in targets.items():
        answer = httpx.post(target, json=body, timeout=30)
        assert answer.status_code == 413, (how, answer.status_code, answer.text[:300])
        assert answer.json()["error"] == "PAYLOAD_TOO_LARGE", how

    five_mb = profile(agent_id, "search", agent_name="x" * (5 * 1024 * 1024))
    answer = httpx.post(targets["through the sidecar"], json=five_mb, timeout=30)
    assert answer.status_code == 413 and answer.json()["error"] == "PAYLOAD_TOO_LARGE"

    # Under the body limit but over the field bounds: refused by validation, field named.
    too_many = profile(agent_id, *(f"t{i}" for i in range(MAX_SKILL_TAGS + 1)))
    answer = httpx.post(targets["through the sidecar"], json=too_many, timeout=30)
    assert answer.status_code == 422 and answer.json()["error"] == "INVALID_ARGUMENT"
    assert answer.json()["details"]["errors"][0]["loc"] == ["body", "skill_tags"]

    assert httpx.get(f"{registry.app_url}/healthz", timeout=2).status_code == 200
    missing = httpx.get(f"{registry.app_url}/v1/agents/{agent_id}", timeout=5)
    assert missing.status_code == 404 and missing.json()["error"] == "NOT_FOUND"
    assert agent_id not in registry_index(cluster)


def test_an_oversized_registration_on_the_topic_is_dead_lettered_with_the_field_named(
    apps_cluster: LocalCluster,
) -> None:
    registry = host(apps_cluster, "registry")
    agent_id = f"huge-{uuid.uuid4().hex[:6]}"
    event_id = publish_event(
        registry.dapr_http, "agora.registry", {"kind": "register", "profile": huge_profile(agent_id)}
    )
    letter = dead_letter_for(apps_cluster, event_id)
    assert letter["reason"] == "payload failed validation"
    assert letter["errors"][0]["loc"][-1] == "skill_tags"
    for replica in replicas_of(apps_cluster, "registry"):
        assert httpx.get(f"{replica.app_url}/healthz", timeout=2).status_code == 200
        assert httpx.get(f"{replica.app_url}/v1/agents/{agent_id}", timeout=5).status_code == 404
    assert agent_id not in registry_index(apps_cluster)


def test_a_task_over_its_bounds_is_dead_lettered(apps_cluster: LocalCluster) -> None:
    allocator = host(apps_cluster, "allocator")
    task_id = f"task-{uuid.uuid4().hex[:8]}"
    spec = {"task_id": task_id, "description": "x" * (MAX_TEXT_CHARS + 1), "required_skills": ["web_search"]}
    event_id = publish_event(allocator.dapr_http, "agora.tasks", spec)
    letter = dead_letter_for(apps_cluster, event_id)
    assert letter["errors"][0]["loc"][-1] == "description"
    assert task_record(apps_cluster, task_id) is None


def test_a_profile_and_a_task_at_every_bound_are_served(default_cluster: LocalCluster) -> None:
    registry = host(default_cluster, "registry")
    marker = uuid.uuid4().hex[:8]
    agent_id = (marker + "a" * MAX_ID_CHARS)[:MAX_ID_CHARS]
    tags = [
        (f"{marker}{i:02d}" + "t" * MAX_SKILL_TAG_CHARS)[:MAX_SKILL_TAG_CHARS] for i in range(MAX_SKILL_TAGS)
    ]
    body = profile(agent_id, *tags, agent_name="N" * MAX_NAME_CHARS)
    assert len(json.dumps(body)) < MAX_BODY_BYTES
    answer = httpx.post(registry.invoke_url("v1/agents", app_id=registry.spec.app_id), json=body, timeout=10)
    assert answer.status_code == 200, answer.text
    query = {
        "required_skills": tags[:MAX_TASK_SKILLS],
        "preferred_skills": tags[MAX_TASK_SKILLS : 2 * MAX_TASK_SKILLS],
    }
    found = httpx.post(
        registry.invoke_url("v1/agents/filter", app_id=registry.spec.app_id), json=query, timeout=10
    )
    assert found.status_code == 200 and [a["agent_id"] for a in found.json()["agents"]] == [agent_id]

    task_id = (f"task-{marker}" + "k" * MAX_ID_CHARS)[:MAX_ID_CHARS]
    spec = {
        "task_id": task_id,
        "description": "d" * MAX_TEXT_CHARS,
        "required_skills": tags[:MAX_TASK_SKILLS],
        "preferred_skills": tags[MAX_TASK_SKILLS : 2 * MAX_TASK_SKILLS],
        "min_success_threshold": 0.0,
        "deadline_ms": 2000,
    }
    publish_event(host(default_cluster, "allocator").dapr_http, "agora.tasks", spec)
    decided = task_in(default_cluster, task_id)
    assert decided["allocation"] is None or decided["allocation"]["winning_agent_id"] in (agent_id, None)
    httpx.delete(registry.invoke_url(f"v1/agents/{agent_id}", app_id=registry.spec.app_id), timeout=10)


# -- permanent errors ------------------------------------------------------------------------


def test_an_outcome_for_an_unknown_escalation_is_dead_lettered_on_first_delivery(
    apps_cluster: LocalCluster,
) -> None:
    uncertainty = host(apps_cluster, "uncertainty")
    event_id = publish_event(
        uncertainty.dapr_http,
        "agora.escalation.outcome",
        {"escalation_id": f"nope-{uuid.uuid4().hex[:6]}", "succeeded": True},
    )
    letter = dead_letter_for(apps_cluster, event_id, timeout=10)
    assert letter["subscriber"] == "escalation"
    assert letter["reason"].startswith("NOT_FOUND")
    escalation_app = host(apps_cluster, "escalation")
    retried = [
        line
        for line in log_lines(escalation_app)
        if line.get("message_id") == event_id and "retried" in str(line.get("message"))
    ]
    assert retried == []


# -- who may change the registry -----------------------------------------------------------------


def test_only_people_s_tools_may_deregister_or_overwrite_agents(apps_cluster: LocalCluster) -> None:
    """The registry's sidecar applies its access-control policy to each caller's identity."""
    console, worker, allocator, recorder = (
        host(apps_cluster, name) for name in ("console", "worker", "allocator", "recorder")
    )
    skill = f"guarded-{uuid.uuid4().hex[:6]}"
    victim = f"victim-{uuid.uuid4().hex[:6]}"
    registered = httpx.post(
        console.invoke_url("v1/agents", app_id="registry"), json=profile(victim, skill), timeout=10
    )
    assert registered.status_code == 200, registered.text

    for intruder in (recorder, worker, allocator):
        removed = httpx.delete(intruder.invoke_url(f"v1/agents/{victim}", app_id="registry"), timeout=10)
        assert removed.status_code == 403, (intruder.name, removed.text)
        assert f"spiffe://public/ns/default/{intruder.spec.app_id}" in removed.text
    for intruder in (recorder, allocator):
        overwritten = httpx.post(
            intruder.invoke_url("v1/agents", app_id="registry"), json=profile(victim, "other"), timeout=10
        )
        assert overwritten.status_code == 403, (intruder.name, overwritten.text)

    query = {"required_skills": [skill]}
    found = httpx.post(allocator.invoke_url("v1/agents/filter", app_id="registry"), json=query, timeout=10)
    assert found.status_code == 200 and [a["agent_id"] for a in found.json()["agents"]] == [victim]
    removed = httpx.delete(console.invoke_url(f"v1/agents/{victim}", app_id="registry"), timeout=10)
    assert removed.status_code == 200 and removed.json() == {"deregistered": True}


def test_an_actor_call_with_a_malformed_argument_gets_the_typed_error_and_changes_nothing(
    default_cluster: LocalCluster,
) -> None:
    """Anyone who can reach a sidecar can call an actor method directly; the runtime reads the
    argument into the method's declared model, and what does not fit is refused with the typed
    error instead of an opaque 500, leaving the actor as it was."""
    sidecar = host(default_cluster, "taskboard").dapr_http
    task_id = f"malformed-{uuid.uuid4().hex[:8]}"
    answer = httpx.put(
        f"{sidecar}/v1.0/actors/Task/{task_id}/method/{wire_name(TaskInterface.post_task)}",
        json={"task_id": task_id, "required_skills": "not a list"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    error = answer.json()["error"]
    assert error["error"] == "INVALID_ARGUMENT"
    assert "required_skills" in error["message"] and "description" in error["message"]
    assert task_record(default_cluster, task_id) is None
