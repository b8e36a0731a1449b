"""Awards that lapse in a burst, through real sidecars in both profiles: a registration with
nothing behind it wins several tasks at once, lets every award lapse, and each task passes to
the next-best bid and ends. In the embedded default (one app and one sidecar hosting the
board, the worker and the agents, Dapr's in-memory broker) these tasks once froze for good:
the board's actors waited inside their turns on publishes that the broker held behind a
delivery waiting for those same actors."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from agora.core.task_lifecycle import DEFAULT_ACK_SECONDS
from agora.harness import LocalCluster, ServiceReplica
from agora.runtime.settings import ServiceSettings
from tests.integration.helpers import eventually, profile, publish_event, replicas_of
from tests.integration.test_hostile_input import task_record

TASKS = 10
"""Enough that the ghost wins several at once and their windows close in one sweep (with five,
it often won only two)."""
ENDED = {"COMPLETED", "FAILED", "PARTIAL", "REJECTED"}
SETTLE_S = 60
"""Beyond the acknowledgment window: every task passed on must end within this."""
READ_TIMEOUT_S = ServiceSettings().read_timeout_seconds


def _caller(cluster: LocalCluster) -> tuple[ServiceReplica, str]:
    """A sidecar people's tools call through, and the app id of the registry behind it."""
    if cluster.profile == "default":
        return replicas_of(cluster, "agora")[0], "agora"
    return replicas_of(cluster, "console")[0], "registry"


@pytest.mark.parametrize("cluster_name", ["default_cluster", "apps_cluster"])
def test_a_burst_of_awards_won_by_a_registration_with_nothing_behind_it_all_end(
    cluster_name: str, request: pytest.FixtureRequest
) -> None:
    cluster: LocalCluster = request.getfixturevalue(cluster_name)
    caller, registry = _caller(cluster)
    publisher = replicas_of(cluster, "agora" if cluster.profile == "default" else "allocator")[0]
    ghost = f"ghost-{uuid.uuid4().hex[:6]}"
    # Cheaper than every sample agent with these skills, so it wins the tasks the market rates
    # it well enough for (each task worded apart, so each is rated apart); no runtime will ever
    # take its awards.
    registered = httpx.post(
        caller.invoke_url("v1/agents", registry),
        json=profile(ghost, "web_search", "summarize", cost_per_step_usd=0.00001, max_steps=1),
        timeout=30,
    )
    assert registered.status_code == 200, registered.text
    try:
        eventually(lambda: _offered(caller, registry, ghost), timeout=SETTLE_S)
        task_ids = [f"lapse-{uuid.uuid4().hex[:8]}" for _ in range(TASKS)]
        for number, task_id in enumerate(task_ids):
            publish_event(
                publisher.dapr_http,
                "agora.tasks",
                {"task_id": task_id, "description": f"Find papers on agent markets, part {number}",
                 "required_skills": ["web_search"], "min_success_threshold": 0.0},
            )  # fmt: skip
        won = eventually(lambda: _won_by(cluster, task_ids, ghost), timeout=SETTLE_S)
        assert won, "the ghost won none of the tasks: nothing lapsed"

        deadline = time.monotonic() + DEFAULT_ACK_SECONDS + SETTLE_S
        records: dict[str, dict[str, Any] | None] = {}
        while time.monotonic() < deadline:
            records = {task_id: task_record(cluster, task_id) for task_id in task_ids}
            if all(r is not None and r["status"] in ENDED for r in records.values()):
                break
            time.sleep(1)
        stuck = {
            t: (r or {}).get("status") for t, r in records.items() if r is None or r["status"] not in ENDED
        }
        assert not stuck, f"tasks that never ended: {stuck}"
        for task_id in won:
            record = records[task_id]
            assert record is not None
            first, *later = record["awards"]
            assert first["agent_id"] == ghost and first["expired_at"] is not None
            # Passed on to a live bidder, who took it and reported its outcome.
            assert later and later[-1]["agent_id"] != ghost and later[-1]["acknowledged_at"] is not None
            assert record["outcome"]["agent_id"] == later[-1]["agent_id"]
    finally:
        httpx.delete(caller.invoke_url(f"v1/agents/{ghost}", registry), timeout=30)


def _offered(caller: ServiceReplica, registry: str, agent_id: str) -> bool:
    answer = httpx.post(
        caller.invoke_url("v1/agents/filter", registry), json={"required_skills": ["web_search"]}, timeout=10
    )
    return answer.status_code == 200 and agent_id in {a["agent_id"] for a in answer.json()["agents"]}


def _won_by(cluster: LocalCluster, task_ids: list[str], agent_id: str) -> list[str] | None:
    """The tasks whose first award went to `agent_id`, once every task was decided."""
    records = [task_record(cluster, task_id) for task_id in task_ids]
    if any(r is None or (not r.get("awards") and r["status"] not in ENDED) for r in records):
        return None
    return [
        r["spec"]["task_id"]
        for r in records
        if r and r.get("awards") and r["awards"][0]["agent_id"] == agent_id
    ]


def test_a_task_read_whose_sidecar_does_not_answer_is_a_typed_503_in_bounded_time(
    apps_cluster: LocalCluster,
) -> None:
    """The board's own sidecar paused (alive, holding its sockets, answering nothing): showing a
    task answers 503 UNAVAILABLE with its reason within the read timeout, not a 500 with a
    traceback after the actor call's minute; once the sidecar is back, the board answers."""
    [board] = replicas_of(apps_cluster, "taskboard")
    assert board.daprd is not None
    log_lines_before = board_log(apps_cluster, board).count("\n")
    board.daprd.pause()
    try:
        started = time.monotonic()
        answer = httpx.get(f"{board.app_url}/v1/tasks/never-{uuid.uuid4().hex[:6]}", timeout=60)
        took = time.monotonic() - started
    finally:
        board.daprd.resume()
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert set(body) == {"error", "message", "details"} and body["error"] == "UNAVAILABLE", body
    assert "did not answer in time" in body["message"] and "get_task" in body["message"]
    assert took < READ_TIMEOUT_S + 5, f"answered after {took:.1f} s"
    new_lines = board_log(apps_cluster, board).splitlines()[log_lines_before:]
    assert not [line for line in new_lines if "Traceback" in line or "Exception in ASGI" in line]
    # Back: an unknown task is a 404 again, through the sidecar as people's tools call it.
    eventually(
        lambda: httpx.get(f"{board.app_url}/v1/tasks/never", timeout=30).status_code == 404, timeout=60
    )


def board_log(cluster: LocalCluster, board: ServiceReplica) -> str:
    log = cluster.logs / f"{board.name}.app.log"
    return log.read_text(errors="replace") if log.exists() else ""
