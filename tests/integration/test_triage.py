"""Failure triage in the worker, through real sidecars: a failed attempt is classified from
its trajectory and recovered automatically; once the policy escalates, the task waits for a
person (waiting party: the task's run, its session) and continues as decided."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

import agora.worker
from agora.harness import LocalCluster, ServiceReplica
from tests.integration.helpers import eventually, replicas_of
from tests.integration.test_market import publish_task, show, task

TASKS = 30


@pytest.fixture
def triaging_worker(apps_cluster: LocalCluster) -> Iterator[ServiceReplica]:
    """The worker with triage on and one automatic recovery per failure type."""
    worker = replicas_of(apps_cluster, "worker")[0]
    overrides = {"AGORA_TRIAGE_FAILURES": "true", "AGORA_TRIAGE_REPEAT_LIMIT": "1"}
    worker.stop()
    worker.spec.env.update(overrides)
    try:
        yield worker.start()
    finally:
        worker.stop()
        for name in overrides:
            worker.spec.env.pop(name, None)
        worker.start()


def escalations(cluster: LocalCluster, task_ids: set[str]) -> list[dict[str, Any]]:
    escalation = replicas_of(cluster, "escalation")[0]
    listed = httpx.get(
        escalation.invoke_url("v1/escalations?status=WAITING_FOR_HUMAN&limit=500"), timeout=30
    ).json()["escalations"]
    return [
        e for e in listed if e["waiting_party"]["kind"] == "session" and e["waiting_party"]["id"] in task_ids
    ]


SAMPLE_AGENT_IDS = [
    str(profile["agent_id"])
    for profile in yaml.safe_load((Path(agora.worker.__file__).parent / "sample_agents.yaml").read_text())
]


def learning(cluster: LocalCluster, agent_id: str) -> dict[str, Any]:
    worker = replicas_of(cluster, "worker")[0]
    response = httpx.get(worker.invoke_url(f"v1/agents/{agent_id}/learning"), timeout=30)
    response.raise_for_status()
    return dict(response.json())


def failed_attempts(escalation: dict[str, Any]) -> int:
    """The attempts that had failed when the run was handed to a person (`<task>.attempt-<n>`)."""
    return int(str(escalation["escalation_id"]).rsplit(".attempt-", 1)[1])


def decide(cluster: LocalCluster, escalation_id: str, action: str) -> dict[str, Any]:
    escalation = replicas_of(cluster, "escalation")[0]
    response = httpx.post(
        escalation.invoke_url(f"v1/escalations/{escalation_id}/resume"),
        json={"decision": {"kind": "escalation", "action": action}, "who": "alice", "why": "looked at it"},
        timeout=30,
    )
    response.raise_for_status()
    return dict(response.json())


def test_failed_attempts_are_recovered_then_escalated_and_continue_as_decided(
    apps_cluster: LocalCluster, triaging_worker: ServiceReplica
) -> None:
    allocator = replicas_of(apps_cluster, "allocator")[0]
    batch = uuid.uuid4().hex[:6]
    specs = [
        task(task_id=f"triaged-{batch}-{i:02d}", description=f"Compile quarterly report {i} from the ledgers")
        for i in range(TASKS)
    ]
    task_ids = {s["task_id"] for s in specs}
    for spec in specs:
        publish_task(allocator, spec)

    def sorted_out() -> list[dict[str, Any]]:
        """Every task either completed (first or second attempt) or waits for a person."""
        waiting = escalations(apps_cluster, task_ids)
        parked = {e["waiting_party"]["id"] for e in waiting}
        records = {task_id: show(apps_cluster, task_id) for task_id in task_ids - parked}
        unsettled = {t: r and r["status"] for t, r in records.items() if not r or r["status"] != "COMPLETED"}
        assert not unsettled, f"neither completed nor parked: {unsettled}"
        return waiting or [{}]

    waiting = [e for e in eventually(sorted_out, timeout=120, interval=1.0) if e]
    assert len(waiting) >= 2, "with the offline model about a third of the tasks fail twice"

    # Every finished run is kept for the agent's learning, with the failures it went through.
    learnt = [learning(apps_cluster, agent_id) for agent_id in SAMPLE_AGENT_IDS]
    completed = TASKS - len(waiting)
    assert sum(report["outcomes"] for report in learnt) >= completed

    for parked in waiting:
        record = show(apps_cluster, parked["waiting_party"]["id"])
        assert record is not None and record["status"] == "ALLOCATED"
        attempts = failed_attempts(parked)
        history = parked["context"]["error_history"]
        # The first failure was recovered automatically; a later one went to a person (triage
        # escalated it, or the agent's confidence in it was too low for another retry).
        assert attempts >= 2 and len(history) == attempts and not history[0].endswith("-> escalate")
        assert parked["audit"][0]["who"].startswith("agent:")

    skipped, retried = waiting[0], waiting[1]
    decide(apps_cluster, skipped["escalation_id"], "skip")
    decide(apps_cluster, retried["escalation_id"], "retry")

    def ended(task_id: str) -> dict[str, Any] | None:
        record = show(apps_cluster, task_id)
        return record if record and record["status"] in {"COMPLETED", "FAILED", "PARTIAL"} else None

    skipped_task = eventually(lambda: ended(skipped["waiting_party"]["id"]), timeout=60)
    assert skipped_task["outcome"]["partial"] is True
    assert skipped_task["outcome"]["summary"] == "skip by alice"

    # A retry is one more attempt: it completes, or fails once more and is escalated again.
    retried_id, next_attempt = retried["waiting_party"]["id"], failed_attempts(retried) + 1

    def retried_again() -> str | None:
        record = ended(retried_id)
        if record is not None:
            assert record["status"] == "COMPLETED", record
            return "completed"
        again = [
            e
            for e in escalations(apps_cluster, {retried_id})
            if e["escalation_id"].endswith(f".attempt-{next_attempt}")
        ]
        return "escalated again" if again else None

    assert eventually(retried_again, timeout=60) in {"completed", "escalated again"}
