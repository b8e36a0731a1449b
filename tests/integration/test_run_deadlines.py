"""A task's `deadline_ms` bounds its run, on real sidecars (redis profile, every service its own
app): an agent app's run still going at the task's deadline is stopped, and the task ends FAILED,
its outcome's summary naming `DEADLINE_EXCEEDED`, with the cost the run spent so far
(tests/integration/apps/deadline_agents.py).

Both runs here are on the durable path: a run goes on in its award's delivery for at most a
third of the award's acknowledgment window, which a task's deadline shortens to the deadline,
so a run reaches its deadline inside the delivery only when the award came late (unit-tested in
tests/unit/test_run_deadlines.py); after that the run's `agent_run` workflow holds it.

- a run going on at its deadline is stopped by its app there and then (an asyncio timeout in
  the workflow's step), with what its model calls and steps cost;
- a run paused for a person is ended by its workflow's durable timer at the deadline, with what
  the run saved when it paused; no person's answer is waited for."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.system import ALLOCATOR, CONSOLE, ESCALATION, RECORDER, REGISTRY, REPUTATION, TASKBOARD
from tests.integration.helpers import eventually, publish_event, recorded_activity_inputs, replicas_of

pytestmark = pytest.mark.integration

AGENTS_FILE = Path(__file__).resolve().parent / "apps" / "deadline_agents.py"
AGENTS = ServiceSpec("agents", "agora.sdk", env={"AGORA_AGENTS_FILE": str(AGENTS_FILE)})
STEP_PRICE_USD = 0.001
"""The agents' `cost_per_step_usd`."""
TERMINAL = {"COMPLETED", "FAILED", "PARTIAL", "REJECTED"}
LATE_BY_AT_MOST_S = 5.0
"""How long after its deadline a run may end: the app's stop, a workflow step, the board's write
(the durable timer fires through the scheduler, whose due times are not to the millisecond)."""


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster("redis", run_dir=tmp_path_factory.mktemp("run-deadlines-cluster")) as cluster:
        for spec in [REGISTRY, TASKBOARD, REPUTATION, ALLOCATOR, ESCALATION, RECORDER, CONSOLE, AGENTS]:
            cluster.add_service(spec)
        yield cluster


def console(cluster: LocalCluster) -> ServiceReplica:
    return replicas_of(cluster, "console")[0]


def publish(cluster: LocalCluster, description: str, skill: str, deadline_ms: int) -> str:
    task_id = f"deadline-{uuid.uuid4().hex[:8]}"
    spec = {"task_id": task_id, "description": description, "required_skills": [skill],
            "min_success_threshold": 0.0, "deadline_ms": deadline_ms}  # fmt: skip
    publish_event(console(cluster).dapr_http, "agora.tasks", spec)
    return task_id


def settled(cluster: LocalCluster, task_id: str, timeout: float = 90) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        answer = httpx.get(console(cluster).invoke_url(f"v1/tasks/{task_id}", "taskboard"), timeout=10)
        record = answer.json() if answer.status_code == 200 else None
        return record if record and record["status"] in TERMINAL and record["outcome"] else None

    return eventually(done, timeout=timeout)


def seconds_from_award_to_end(record: dict[str, Any]) -> float:
    [award] = record["awards"]
    failed = next(change for change in record["history"] if change["status"] == "FAILED")
    return (
        datetime.fromisoformat(failed["at"]) - datetime.fromisoformat(award["awarded_at"])
    ).total_seconds()


def saved_run(app: ServiceReplica, agent_id: str, task_id: str) -> dict[str, Any]:
    """A run's state as the agent app saved it (`agent:state:<agent_id>|<task_id>`)."""
    key = quote(f"agent:state:{agent_id}|{task_id}", safe="")
    answer = httpx.get(f"{app.dapr_http}/v1.0/state/agora-state/{key}", timeout=10)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def dead_letters_of(cluster: LocalCluster, task_id: str) -> list[dict[str, Any]]:
    recorder = replicas_of(cluster, "recorder")[0]
    answer = httpx.get(f"{recorder.app_url}/v1/messages/agora.deadletter", timeout=10).json()
    return [m for m in answer["messages"] if isinstance(m, dict) and task_id in str(m.get("message_id"))]


def test_a_run_going_on_at_its_deadline_is_stopped_and_its_task_fails_with_the_cost_so_far(
    market: LocalCluster,
) -> None:
    task_id = publish(market, "Wait for the tide", "patience", deadline_ms=3_000)
    record = settled(market, task_id)

    outcome = record["outcome"]
    assert record["status"] == "FAILED" and outcome["agent_id"] == "dawdler"
    assert outcome["actual_success"] is False
    assert outcome["summary"].startswith("DEADLINE_EXCEEDED: "), outcome["summary"]
    # What the run spent until it was stopped: its model calls at their prices and its steps.
    assert outcome["actual_steps"] > 0 and outcome["input_tokens"] > 0 and outcome["output_tokens"] > 0
    assert outcome["actual_cost_usd"] > outcome["actual_steps"] * STEP_PRICE_USD
    # Stopped at its deadline, not at the end of its 200 steps (a minute).
    assert 3.0 <= seconds_from_award_to_end(record) <= 3.0 + LATE_BY_AT_MOST_S, record
    # Where its workflow held it (the durable path: a run outlasting its award's delivery is
    # handed to it), the deadline's step ended the run, recorded once, and the run it overtook
    # reported nothing (its answer, if it came, is recorded and not acted on). On a machine slow
    # enough that the deadline came before the hand-over, the delivery's own bound ended it and
    # no workflow ran. Either way the board took one end.
    [app] = replicas_of(market, "agents")
    executed, ended, reported = (
        recorded_activity_inputs(app, f"run.{task_id}", name)
        for name in ("agent.execute", "agent.deadline", "agent.report")
    )
    if executed or ended or reported:
        assert len(ended) == 1 and len(executed) <= 1 and reported == [], (executed, ended, reported)
    assert [h["status"] for h in record["history"]].count("FAILED") == 1, record["history"]
    assert dead_letters_of(market, task_id) == []


def test_a_run_paused_for_a_person_at_its_deadline_is_ended_by_its_workflow_s_timer(
    market: LocalCluster,
) -> None:
    task_id = publish(market, "Find the 1851 census records", "records", deadline_ms=4_000)
    record = settled(market, task_id)

    outcome = record["outcome"]
    assert record["status"] == "FAILED" and outcome["agent_id"] == "quitter"
    assert outcome["summary"].startswith("DEADLINE_EXCEEDED: "), outcome["summary"]
    assert 4.0 <= seconds_from_award_to_end(record) <= 4.0 + LATE_BY_AT_MOST_S, record
    # What the run saved when it paused, at its prices; the saved run ended too, so a person's
    # answer that comes now finds nothing waiting for it.
    [app] = replicas_of(market, "agents")
    saved = saved_run(app, "quitter", task_id)
    assert saved["status"] == "FAILED" and saved["reason"] == outcome["summary"]
    assert outcome["actual_steps"] == saved["iterations"] >= 1 and saved["cost_usd"] > 0
    assert outcome["input_tokens"] == saved["input_tokens"] > 0
    assert outcome["actual_cost_usd"] == pytest.approx(
        saved["cost_usd"] + saved["iterations"] * STEP_PRICE_USD
    )
    # Nothing but the workflow's durable timer was left to end it: its deadline step did.
    [ended] = recorded_activity_inputs(app, f"run.{task_id}", "agent.deadline")
    assert ended["award"]["task_id"] == task_id
    assert dead_letters_of(market, task_id) == []
