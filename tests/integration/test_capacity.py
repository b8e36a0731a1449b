"""Agent capacity on real sidecars: a burst larger than its capable agents take at once
(tests/integration/apps/slow_agents.py: runs of a few seconds, two at once each) waits QUEUED,
never gives an agent more runs at once than its limit (read from the board's own records), and
completes; an agent that joins while the slow agents' runs are held (the reference worker's,
tests/integration/apps/late_agent.yaml) takes waiting work."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from agora.cli.tasks import task_lines
from agora.core.task_lifecycle import TaskRecord
from agora.harness import LocalCluster, ServiceReplica, ServiceSpec
from agora.harness.system import CONSOLE, RECORDER, SERVICES, WORKER
from tests.integration.helpers import STORE_PROFILE, eventually, publish_event, replicas_of

pytestmark = pytest.mark.integration

AGENTS_FILE = Path(__file__).resolve().parent / "apps" / "slow_agents.py"
RUN_SECONDS = 1
LIMIT = 2
BURST = 24


def agents_app(gate: Path, *names: str) -> ServiceSpec:
    """The app `agents` running the slow agents named, their runs held until `gate` exists."""
    env = {
        "AGORA_AGENTS_FILE": str(AGENTS_FILE),
        "SLOW_AGENTS": ",".join(names),
        "SLOW_RUN_SECONDS": str(RUN_SECONDS),
        "SLOW_GATE": str(gate),
    }
    return ServiceSpec("agents", "agora.sdk", env=env)


LATE = ServiceSpec(
    WORKER.app_id, WORKER.module, env={"AGORA_AGENTS_FILE": str(AGENTS_FILE.with_name("late_agent.yaml"))}
)
"""The reference worker with one agent for the same work, started mid-burst."""
WORKER_RUNS = 16
"""The reference worker's agents take its `AGORA_MAX_RUNS_IN_FLIGHT` (16) at once."""
TERMINAL = {"COMPLETED", "FAILED", "PARTIAL", "REJECTED"}


@dataclass
class Market:
    cluster: LocalCluster
    gate: Path
    """The slow agents' runs go on once this file exists."""


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Market]:
    run_dir = tmp_path_factory.mktemp("capacity")
    gate = run_dir / "gate"
    with LocalCluster(STORE_PROFILE, run_dir=run_dir) as started:
        for spec in [*(s for s in SERVICES if s is not WORKER), RECORDER, CONSOLE]:
            started.add_service(spec)
        started.add_service(agents_app(gate, "slow-a", "slow-b"))
        yield Market(started, gate)


def console(cluster: LocalCluster) -> ServiceReplica:
    return replicas_of(cluster, "console")[0]


def record_of(cluster: LocalCluster, task_id: str) -> dict[str, Any] | None:
    answer = httpx.get(console(cluster).invoke_url(f"v1/tasks/{task_id}", "taskboard"), timeout=10)
    return answer.json() if answer.status_code == 200 else None


def registered(cluster: LocalCluster, agent_id: str) -> bool:
    answer = httpx.get(console(cluster).invoke_url(f"v1/agents/{agent_id}", "registry"), timeout=10)
    return answer.status_code == 200


def most_at_once(records: list[dict[str, Any]]) -> dict[str, int]:
    """For each agent, the most runs it held at once by the board's records: a run from its
    award to its outcome's commit (the slot is claimed before the one and freed after the other)."""
    events: dict[str, list[tuple[datetime, int]]] = {}
    for record in records:
        award = record["awards"][-1]
        ended = next(c["at"] for c in record["history"] if c["status"] in TERMINAL)
        events.setdefault(award["agent_id"], []).extend(
            [(datetime.fromisoformat(award["awarded_at"]), 1), (datetime.fromisoformat(ended), -1)]
        )
    most = {}
    for agent, moments in events.items():
        held = peak = 0
        for _, step in sorted(moments, key=lambda m: (m[0], m[1])):  # an end before a start at a tie
            held += step
            peak = max(peak, held)
        most[agent] = peak
    return most


def test_a_burst_over_capacity_waits_never_passes_a_limit_and_a_joining_agent_takes_waiting_work(
    market: Market,
) -> None:
    cluster = market.cluster
    eventually(lambda: registered(cluster, "slow-a") and registered(cluster, "slow-b"), timeout=60)
    batch = uuid.uuid4().hex[:6]
    ids = [f"slow-{batch}-{n:02d}" for n in range(BURST)]
    for task_id in ids:
        spec = {"task_id": task_id, "description": f"Slow job {task_id}", "required_skills": ["slow-work"]}
        publish_event(console(cluster).dapr_http, "agora.tasks", spec)

    def a_waiting_task() -> dict[str, Any] | None:
        for task_id in reversed(ids):
            record = record_of(cluster, task_id)
            if record is not None and record["status"] == "QUEUED":
                return record
        return None

    waiting = eventually(a_waiting_task, timeout=60, interval=0.5)
    assert waiting["queued"]["reason"].startswith("2 capable agents, 0 free: "), waiting["queued"]
    assert "2 of 2 runs" in waiting["queued"]["reason"]
    shown = "\n".join(task_lines(TaskRecord.model_validate(waiting)))
    assert "QUEUED" in shown and "queue: waiting for a run slot since" in shown, shown

    cluster.add_service(LATE)  # a new agent joins while the slow agents' runs are held

    def taken_by_the_new_agent() -> list[str]:
        records = [record_of(cluster, task_id) or {} for task_id in ids]
        return [
            r["spec"]["task_id"] for r in records
            if r.get("queued") and r.get("awards") and r["awards"][-1]["agent_id"] == "slow-c"
        ]  # fmt: skip

    try:
        eventually(taken_by_the_new_agent, timeout=120, interval=1)
    finally:
        market.gate.touch()  # the slow agents' runs go on

    def all_ended() -> list[dict[str, Any]] | None:
        records = [record_of(cluster, task_id) for task_id in ids]
        return records if all(r is not None and r["status"] in TERMINAL for r in records) else None  # type: ignore[return-value]

    records = eventually(all_ended, timeout=300, interval=1)
    # None failed for want of a slot: each ended with its agent's outcome (the late agent runs the
    # offline model, which gives up on some tasks).
    assert all(r["outcome"] is not None for r in records), [
        (r["spec"]["task_id"], r["status"]) for r in records
    ]
    slow = [r for r in records if r["awards"][-1]["agent_id"] in ("slow-a", "slow-b")]
    assert {r["status"] for r in slow} == {"COMPLETED"}
    waited = [r for r in records if r.get("queued")]
    assert len(waited) >= BURST - 2 * LIMIT, "the capacity of two agents held most of the burst back"
    assert all("QUEUED" in [c["status"] for c in r["history"]] for r in waited)
    peaks = most_at_once(records)
    assert peaks["slow-a"] <= LIMIT and peaks["slow-b"] <= LIMIT, peaks
    assert peaks.get("slow-c", 0) <= WORKER_RUNS, peaks
    taken_late = [r["spec"]["task_id"] for r in waited if r["awards"][-1]["agent_id"] == "slow-c"]
    assert taken_late, f"the agent that joined took none of the waiting tasks: {peaks}"
