"""Market allocation through real sidecars: intake → allocation → award → execution → outcome.

The embedded default (every service in one app) and the redis profile (every service its own
app) run the same modules; each behaviour is checked where it matters.
"""

from __future__ import annotations

import asyncio
import math
import socket
import uuid
from datetime import datetime
from typing import Any

import httpx
import pytest

from agora.allocator.estimates import Ratings, rating_prompt, ratings_schema
from agora.core.contracts import OutcomeReport
from agora.core.market import TaskSpec
from agora.core.models import CapabilityProfile
from agora.core.scoring import MARKET_EXPLORATION
from agora.harness import LocalCluster, ServiceReplica
from agora.llm.offline import OfflineModelClient
from agora.runtime.actor_client import ActorClient
from agora.runtime.clients import reputation_actors, task_actors
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprSidecar
from agora.runtime.state import StateRepository
from agora.runtime.status_index import IdSet, StatusIndex
from agora.taskboard.actors import STATUS_INDEX_NAMESPACE as TASK_STATUS_INDEX
from tests.integration.helpers import eventually, publish_event, recorded_message, replicas_of

TERMINAL = {"COMPLETED", "FAILED", "PARTIAL", "REJECTED"}


def task(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "task_id": f"task-{uuid.uuid4().hex[:10]}",
        "description": "Summarise this week's papers on agent coordination",
        "required_skills": ["web_search"],
        "preferred_skills": ["summarize"],
        "min_success_threshold": 0.0,
    }
    spec.update(overrides)
    return spec


def publish_task(replica: ServiceReplica, spec: dict[str, Any], *, event_id: str | None = None) -> None:
    publish_event(replica.dapr_http, "agora.tasks", spec, event_id=event_id)


def _payload_task(letter: dict[str, Any]) -> object:
    payload = letter.get("payload")
    return payload.get("task_id") if isinstance(payload, dict) else None


def board(cluster: LocalCluster) -> ServiceReplica:
    found = replicas_of(cluster, "taskboard") or replicas_of(cluster, "agora")
    return found[0]


def show(cluster: LocalCluster, task_id: str) -> dict[str, Any] | None:
    replica = board(cluster)
    response = httpx.get(replica.invoke_url(f"v1/tasks/{task_id}", app_id=replica.spec.app_id), timeout=10)
    return response.json() if response.status_code == 200 else None


def settled(cluster: LocalCluster, task_id: str, statuses: set[str] = TERMINAL) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        record = show(cluster, task_id)
        return record if record and record["status"] in statuses else None

    return eventually(done, timeout=40)


def reputation(cluster: LocalCluster, agent_id: str) -> dict[str, Any]:
    replica = (replicas_of(cluster, "reputation") or replicas_of(cluster, "agora"))[0]
    url = replica.invoke_url(f"v1/reputation/{agent_id}", app_id=replica.spec.app_id)
    return dict(httpx.get(url, timeout=10).json())


def test_task_is_awarded_executed_and_its_outcome_recorded(default_cluster: LocalCluster) -> None:
    app = replicas_of(default_cluster, "agora")[0]
    spec = task()
    publish_task(app, spec)
    record = settled(default_cluster, spec["task_id"], {"COMPLETED", "FAILED"})

    allocation = record["allocation"]
    assert allocation["status"] == "ALLOCATED"
    assert allocation["winning_agent_id"] in {"researcher", "scout"}  # the agents with web_search
    assert {s["agent_id"] for s in allocation["all_scores"]} == {"researcher", "scout"}
    finals = [s["final_score"] for s in allocation["all_scores"]]
    assert finals == sorted(finals, reverse=True)
    assert allocation["winning_score"] == allocation["all_scores"][0]
    assert "analyst" in allocation["capability_filtered_out"]
    assert [h["status"] for h in record["history"]][:3] == ["PENDING", "BIDDING", "ALLOCATED"]
    assert len(record["allocation"]["all_bids"]) == 2
    outcome = record["outcome"]
    assert outcome["agent_id"] == allocation["winning_agent_id"]
    assert outcome["actual_steps"] >= 1


def test_no_capable_agent_is_rejected_with_the_reason(default_cluster: LocalCluster) -> None:
    app = replicas_of(default_cluster, "agora")[0]
    spec = task(required_skills=["quantum_chemistry"])
    publish_task(app, spec)
    record = settled(default_cluster, spec["task_id"])
    assert record["status"] == "REJECTED"
    assert "no capable agent" in record["allocation"]["reject_reason"]
    assert record["allocation"]["all_bids"] == []


def rated_below_certain(threshold_task: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A task for two new agents and those agents' profiles, such that the offline market model
    rates neither of them 100 %, alone or together in either order (its rating is drawn from the
    prompt, so one new pair in a hundred would otherwise be rated certain and reach 1.0)."""
    while True:
        skill = f"audit-{uuid.uuid4().hex[:6]}"
        profiles = [
            {"agent_id": agent_id, "agent_name": agent_id, "skill_tags": [skill], "max_steps": 3}
            for agent_id in (f"{skill}-a", f"{skill}-b")
        ]
        spec = {**threshold_task, "required_skills": [skill], "preferred_skills": []}
        first, second = (CapabilityProfile.model_validate(p) for p in profiles)
        calls = ([first], [second], [first, second], [second, first])
        parsed = TaskSpec.model_validate(spec)
        if all(rating < 100 for call in calls for rating in offline_ratings(parsed, call)):
            return spec, profiles


def offline_ratings(spec: TaskSpec, profiles: list[CapabilityProfile]) -> list[int]:
    model = OfflineModelClient()
    answer = asyncio.run(model.complete(rating_prompt(spec, profiles), json_schema=ratings_schema(profiles)))
    rated = Ratings.model_validate_json(answer.text).root
    return [rated[p.agent_id].success_percent for p in profiles]


def test_bids_below_threshold_are_rejected(default_cluster: LocalCluster) -> None:
    app = replicas_of(default_cluster, "agora")[0]
    # Agents without history: calibration 1.0, so no estimate below 100 % reaches threshold 1.0
    # (an agent that outperformed its claims could be calibrated up to exactly 1.0).
    spec, profiles = rated_below_certain(task(min_success_threshold=1.0))
    for profile in profiles:
        httpx.post(app.invoke_url("v1/agents"), json=profile, timeout=10).raise_for_status()
    publish_task(app, spec)
    record = settled(default_cluster, spec["task_id"])
    assert record["status"] == "REJECTED"
    assert "below min_success_threshold" in record["allocation"]["reject_reason"]
    assert all(s["final_score"] == -1.0 for s in record["allocation"]["all_scores"])
    assert len(record["allocation"]["all_bids"]) == 2
    # The market's model rated them as predicted: not a fallback, and below certain.
    bids = record["allocation"]["all_bids"]
    assert [b["fallback"] for b in bids] == [False, False]
    assert all(b["self_reported_success_prob"] < 1.0 for b in bids)
    # Agents without history (N = 0): the plain UCB1 bonus sqrt(2 ln 2), weighted as configured.
    fresh_bonus = MARKET_EXPLORATION * math.sqrt(2 * math.log(2))
    assert [s["ucb_bonus"] for s in record["allocation"]["all_scores"]] == [pytest.approx(fresh_bonus)] * 2


def test_outcome_changes_reputation_seen_by_the_next_allocation(default_cluster: LocalCluster) -> None:
    app = replicas_of(default_cluster, "agora")[0]
    first = task()
    publish_task(app, first)
    done = settled(default_cluster, first["task_id"], {"COMPLETED", "FAILED"})
    winner = done["outcome"]["agent_id"]
    learned = eventually(lambda: (r := reputation(default_cluster, winner)) and r["total_tasks"] >= 1 and r)
    assert learned["success_rate"] == learned["successful_tasks"] / learned["total_tasks"]

    second = task()
    publish_task(app, second)
    record = settled(default_cluster, second["task_id"], {"ALLOCATED", "COMPLETED", "FAILED"})
    [score] = [s for s in record["allocation"]["all_scores"] if s["agent_id"] == winner]
    current = reputation(default_cluster, winner)
    # Scored with the learned record, not the 0.5 given to agents without history.
    assert score["reputation_score"] == pytest.approx(current["success_rate"], abs=0.5)
    assert score["reputation_score"] != 0.5 or learned["success_rate"] == 0.5


def test_redelivered_task_is_allocated_once(default_cluster: LocalCluster) -> None:
    app = replicas_of(default_cluster, "agora")[0]
    spec = task()
    event_id = str(uuid.uuid4())
    publish_task(app, spec, event_id=event_id)
    publish_task(app, spec, event_id=event_id)  # the broker redelivering
    publish_task(app, spec)  # the publisher retrying with a new event id
    record = settled(default_cluster, spec["task_id"], {"COMPLETED", "FAILED"})
    statuses = [h["status"] for h in record["history"]]
    assert statuses.count("ALLOCATED") == 1
    assert statuses.count("BIDDING") == 1
    assert len(record["allocation"]["all_bids"]) == 2


def test_same_task_id_with_another_spec_is_dead_lettered(apps_cluster: LocalCluster) -> None:
    allocator = replicas_of(apps_cluster, "allocator")[0]
    [recorder] = replicas_of(apps_cluster, "recorder")
    spec = task()
    publish_task(allocator, spec)
    settled(apps_cluster, spec["task_id"], {"ALLOCATED", "COMPLETED", "FAILED"})
    publish_task(allocator, {**spec, "description": "something else entirely"})

    def letter() -> dict[str, Any] | None:
        messages = httpx.get(f"{recorder.app_url}/v1/messages/agora.deadletter", timeout=10).json()[
            "messages"
        ]
        return next((m for m in messages if _payload_task(m) == spec["task_id"]), None)

    assert "CONFLICTING_TASK" in eventually(letter)["reason"]


def test_malformed_task_spec_is_dead_lettered_with_its_error(apps_cluster: LocalCluster) -> None:
    allocator = replicas_of(apps_cluster, "allocator")[0]
    [recorder] = replicas_of(apps_cluster, "recorder")
    bad: dict[str, Any] = {
        "task_id": f"bad-{uuid.uuid4().hex[:8]}",
        "description": "",
        "required_skills": [],
        "budget_usd": 0,
    }
    publish_task(allocator, bad)

    def letter() -> dict[str, Any] | None:
        messages = httpx.get(f"{recorder.app_url}/v1/messages/agora.deadletter", timeout=10).json()[
            "messages"
        ]
        return next((m for m in messages if _payload_task(m) == bad["task_id"]), None)

    found = eventually(letter)
    assert found["topic"] == "agora.tasks" and found["subscriber"] == "allocator"
    assert {e["loc"][-1] for e in found["errors"]} == {"description", "required_skills", "budget_usd"}
    assert show(apps_cluster, bad["task_id"]) is None, "nothing was posted for it"


def test_award_reaches_subscribers_and_the_pipeline_spans_separate_services(
    apps_cluster: LocalCluster,
) -> None:
    allocator = replicas_of(apps_cluster, "allocator")[0]
    spec = task()
    publish_task(allocator, spec)
    record = settled(apps_cluster, spec["task_id"], {"COMPLETED", "FAILED"})

    def award() -> dict[str, Any] | None:
        return recorded_message(apps_cluster, "agora.task.awarded", "task_id", spec["task_id"])

    awarded = eventually(award)
    assert awarded["agent_id"] == record["allocation"]["winning_agent_id"] == record["outcome"]["agent_id"]
    assert awarded["score"]["final_score"] >= 0


async def test_concurrent_outcomes_for_one_agent_lose_no_update(apps_cluster: LocalCluster) -> None:
    replica = replicas_of(apps_cluster, "allocator")[0]
    sidecar = DaprSidecar(ServiceSettings(dapr_http_port=replica.endpoints.dapr_http_port))
    reputation = reputation_actors(ActorClient(sidecar))
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    outcomes = [
        {
            "outcome": {
                "task_id": f"t-{i}",
                "agent_id": agent,
                "actual_success": i % 3 != 0,
                "actual_cost_usd": 0.01,
                "actual_steps": 2,
            },
            "counts_as_success": i % 3 != 0,
        }
        for i in range(30)
    ]
    try:
        reports = [OutcomeReport.model_validate(o) for o in outcomes]
        await asyncio.gather(*(reputation(agent).apply_outcome(report) for report in reports))
        await asyncio.gather(*(reputation(agent).apply_outcome(report) for report in reports[:5]))
        record = await reputation(agent).get_record()
    finally:
        await sidecar.aclose()
    assert record.total_tasks == 30, "every outcome counted once, none lost"
    assert record.successful_tasks == 20


async def test_a_repeated_post_restores_a_task_missing_from_its_status_listing(
    default_cluster: LocalCluster,
) -> None:
    """A post that failed after its commit (say, at the index write) is redelivered; the repeat
    finds the task already stored and must still leave it listed under its status."""
    app = replicas_of(default_cluster, "agora")[0]
    sidecar = DaprSidecar(ServiceSettings(dapr_http_port=app.endpoints.dapr_http_port))
    index = StatusIndex(StateRepository(sidecar, "agora-state", TASK_STATUS_INDEX, IdSet))
    spec = task(required_skills=["unheard-of-skill"])  # if the allocator ever takes it: rejected

    def pending() -> list[str]:
        answer = httpx.get(app.invoke_url("v1/tasks", app_id=app.spec.app_id), params={"status": "PENDING"})
        return list(answer.json()["task_ids"])

    try:
        posted = TaskSpec.model_validate(spec)
        board = task_actors(ActorClient(sidecar))
        await board(posted.task_id).post_task(posted)
        assert spec["task_id"] in pending()
        await index.discard(spec["task_id"], "PENDING")
        assert spec["task_id"] not in pending()
        await board(posted.task_id).post_task(posted)
        assert spec["task_id"] in pending()
    finally:
        await sidecar.aclose()


def redis_command(cluster: LocalCluster, *words: str) -> bytes:
    """One command to the cluster's Redis, its raw RESP answer (the test reads TTLs and keys)."""
    assert cluster.redis_port is not None
    with socket.create_connection(("127.0.0.1", cluster.redis_port), timeout=10) as conn:
        conn.sendall(
            b"".join([f"*{len(words)}\r\n".encode(), *(f"${len(w)}\r\n{w}\r\n".encode() for w in words)])
        )
        answer = b""
        while not answer.endswith(b"\r\n"):
            answer += conn.recv(65536)
        return answer


def redis_ttl(cluster: LocalCluster, key: str) -> int:
    return int(redis_command(cluster, "TTL", key).strip().lstrip(b":"))


def test_a_finished_task_and_its_listing_expire_by_a_state_ttl_with_no_reminder(
    apps_cluster: LocalCluster,
) -> None:
    """Dapr keeps a finished task's record for the retention by a state TTL on the actor's state
    (the `ActorStateTTL` feature) and its status listing by one on the listing of the period
    it ended in; its listing under that status is read through the board's API."""
    [console] = replicas_of(apps_cluster, "console")
    spec = task()
    publish_task(console, spec)
    record = settled(apps_cluster, spec["task_id"])
    retention = 7 * 24 * 3600  # AGORA_RETENTION_SECONDS's default

    record_ttl = redis_ttl(apps_cluster, f"taskboard||Task||{spec['task_id']}||state")
    assert retention - 120 < record_ttl <= retention, record_ttl
    period = retention // 16
    ended = int(datetime.fromisoformat(record["history"][-1]["at"]).timestamp()) // period * period
    pattern = f"taskboard||taskboard:status:{record['status']}@{ended}:*"
    keys = [line for line in redis_command(apps_cluster, "KEYS", pattern).split(b"\r\n") if b"||" in line]
    assert keys, pattern
    for key in keys:
        assert retention < redis_ttl(apps_cluster, key.decode()) <= retention + 2 * period
    listed = httpx.get(
        board(apps_cluster).invoke_url("v1/tasks", app_id="taskboard"), params={"status": record["status"]}
    )
    assert spec["task_id"] in listed.json()["task_ids"]
