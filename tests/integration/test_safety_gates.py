"""People asked before a risky step, through real sidecars (redis profile): an agent app's run
reports its steps to the uncertainty monitor. An agent at medium confidence about to call a tool
that cannot be undone parks before the tool runs, and the tool's side effect (a line in a
ledger file the agent app writes) stays absent until a person lets it run; a person's abort
means it never runs. A checkpoint trigger (the agent app's own, or the monitor's configured
one) parks a run before its step's model call, and the step goes as decided."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.system import ALLOCATOR, CONSOLE, ESCALATION, REGISTRY, REPUTATION, TASKBOARD, UNCERTAINTY
from tests.integration.helpers import eventually, publish_event, replicas_of

pytestmark = pytest.mark.integration

AGENTS_FILE = Path(__file__).resolve().parent / "apps" / "safety_agents.py"
MONITOR_TRIGGERS = [
    {"name": "evacuations", "prompt_contains": ["evacuate"], "message": "Evacuations need a person"}
]
TERMINAL = {"COMPLETED", "FAILED", "PARTIAL", "REJECTED"}


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the agents' tools note what they did, one line per call."""
    return tmp_path_factory.mktemp("safety-ledger") / "ledger.txt"


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory, ledger: Path) -> Iterator[LocalCluster]:
    """The market, the monitor (its default policy with the Helm chart's irreversible tools, and
    one checkpoint trigger of its own), the escalation service, the console people decide
    through, and the safety agents' app (app id `agents`, which the access policies let report
    steps to the monitor)."""
    monitor = ServiceSpec(
        UNCERTAINTY.app_id,
        UNCERTAINTY.module,
        env={
            "AGORA_IRREVERSIBLE_TOOL_NAMES": "send_email,delete,deploy",
            "AGORA_CHECKPOINTS": json.dumps(MONITOR_TRIGGERS),
        },
    )
    agents = ServiceSpec(
        "agents",
        "agora.sdk",
        env={
            "AGORA_AGENTS_FILE": str(AGENTS_FILE),
            "AGORA_UNCERTAINTY_APP_ID": "uncertainty",
            "SAFETY_LEDGER": str(ledger),
        },
    )
    with LocalCluster("redis", run_dir=tmp_path_factory.mktemp("safety-gates-cluster")) as cluster:
        for spec in [REGISTRY, TASKBOARD, REPUTATION, ALLOCATOR, ESCALATION, monitor, CONSOLE, agents]:
            cluster.add_service(spec)
        yield cluster


def console(cluster: LocalCluster) -> ServiceReplica:
    return replicas_of(cluster, "console")[0]


def publish(cluster: LocalCluster, skill: str, description: str) -> str:
    task_id = f"gate-{uuid.uuid4().hex[:8]}"
    spec = {
        "task_id": task_id,
        "description": description,
        "required_skills": [skill],
        "min_success_threshold": 0.0,
    }
    publish_event(console(cluster).dapr_http, "agora.tasks", spec)
    return task_id


def waiting_escalation(cluster: LocalCluster, task_id: str) -> dict[str, Any]:
    """The escalation the task's run waits on, once it is listed as waiting."""

    def found() -> dict[str, Any] | None:
        answer = httpx.get(
            console(cluster).invoke_url("v1/escalations?status=WAITING_FOR_HUMAN&limit=500", "escalation"),
            timeout=10,
        )
        waiting = answer.json()["escalations"] if answer.status_code == 200 else []
        return next((e for e in waiting if e["waiting_party"]["id"] == task_id), None)

    escalation: dict[str, Any] = eventually(found, timeout=60)
    return escalation


def board(cluster: LocalCluster, task_id: str) -> dict[str, Any]:
    answer = httpx.get(console(cluster).invoke_url(f"v1/tasks/{task_id}", "taskboard"), timeout=10)
    assert answer.status_code == 200, answer.text
    record: dict[str, Any] = answer.json()
    return record


def decide(cluster: LocalCluster, escalation_id: str, action: str) -> None:
    answer = httpx.post(
        console(cluster).invoke_url(f"v1/escalations/{escalation_id}/resume", "escalation"),
        json={"decision": {"kind": "checkpoint", "action": action}, "who": "alice", "why": "looked at it"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text


def settled(cluster: LocalCluster, task_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        record = board(cluster, task_id)
        return record if record["status"] in TERMINAL and record["outcome"] else None

    return eventually(done, timeout=60)


def noted(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def parked_before_its_tool_ran(cluster: LocalCluster, ledger: Path, table: str) -> tuple[str, dict[str, Any]]:
    """A janitor's task on `table`, parked by the monitor's tool gate: what the person is shown."""
    task_id = publish(cluster, "cleanup", f"Delete the records of table {table}")
    escalation = waiting_escalation(cluster, task_id)
    assert escalation["escalation_id"] == f"{task_id}.tool-1"
    context = escalation["context"]
    assert context["kind"] == "checkpoint" and context["trigger"]["name"] == "before tool delete_records"
    assert context["trigger"]["message"].startswith(
        "medium uncertainty (confidence 0.74) before the irreversible"
    )
    record = board(cluster, task_id)
    assert record["status"] == "ALLOCATED" and record["outcome"] is None, "parked, not ended"
    assert f"delete_records {table}" not in noted(ledger), "parked before the tool ran"
    return task_id, escalation


def test_an_irreversible_tool_at_medium_confidence_runs_only_once_a_person_proceeds(
    market: LocalCluster, ledger: Path
) -> None:
    table = f"orders_{uuid.uuid4().hex[:6]}"
    task_id, escalation = parked_before_its_tool_ran(market, ledger, table)
    time.sleep(2)  # a run that did not wait would have called its tool by now
    assert f"delete_records {table}" not in noted(ledger), "still waiting for a person"

    decide(market, escalation["escalation_id"], "proceed")
    record = settled(market, task_id)

    assert record["status"] == "COMPLETED", record
    assert noted(ledger).count(f"delete_records {table}") == 1, "the held call ran, once"
    outcome = record["outcome"]
    assert outcome["summary"] == f"delete_records {table} done" and outcome["tools_called"] == [
        "delete_records"
    ]


def test_a_held_irreversible_tool_never_runs_when_a_person_aborts(market: LocalCluster, ledger: Path) -> None:
    table = f"orders_{uuid.uuid4().hex[:6]}"
    task_id, escalation = parked_before_its_tool_ran(market, ledger, table)

    decide(market, escalation["escalation_id"], "abort")
    record = settled(market, task_id)

    assert record["status"] == "FAILED" and record["outcome"]["summary"] == "abort by alice"
    assert record["outcome"]["tools_called"] == []
    time.sleep(2)  # nothing is left to call it later either
    assert f"delete_records {table}" not in noted(ledger)


def test_the_agent_app_s_checkpoint_trigger_parks_a_run_before_its_first_step(
    market: LocalCluster, ledger: Path
) -> None:
    host = f"db-{uuid.uuid4().hex[:6]}"
    task_id = publish(market, "operations", f"Decommission host {host}")

    escalation = waiting_escalation(market, task_id)

    assert escalation["escalation_id"] == f"{task_id}.checkpoint-1"
    context = escalation["context"]
    assert context["kind"] == "checkpoint" and context["sheet_num"] == 1
    assert context["trigger"]["name"] == "decommission" and context["prompt"] == f"Decommission host {host}"
    assert f"power_off {host}" not in noted(ledger)

    decide(market, escalation["escalation_id"], "proceed")
    record = settled(market, task_id)

    assert record["status"] == "COMPLETED" and record["outcome"]["actual_steps"] == 2, record
    assert noted(ledger).count(f"power_off {host}") == 1


def test_the_monitor_s_checkpoint_trigger_parks_a_run_and_abort_ends_it_before_any_step(
    market: LocalCluster, ledger: Path
) -> None:
    host = f"db-{uuid.uuid4().hex[:6]}"
    task_id = publish(market, "operations", f"Evacuate host {host}")

    escalation = waiting_escalation(market, task_id)

    assert escalation["escalation_id"] == f"{task_id}.checkpoint-1"
    assert escalation["context"]["trigger"]["name"] == "evacuations"
    assert escalation["audit"][0]["why"] == "Evacuations need a person"

    decide(market, escalation["escalation_id"], "abort")
    record = settled(market, task_id)

    assert record["status"] == "FAILED" and record["outcome"]["actual_steps"] == 0, "no step ran"
    assert f"power_off {host}" not in noted(ledger)
