"""Leases and suspensions through real sidecars (redis profile, two registry replicas): every
registration lapses unless renewed, whether it names a lease or not, and an agent that let an
award lapse is suspended from bidding, so the next task goes to an agent that takes it without
waiting for another acknowledgment window."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import httpx
import pytest

from agora.core.messages import DEFAULT_LEASE_SECONDS, MIN_LEASE_SECONDS
from agora.core.suspension import FIRST_SUSPENSION_SECONDS
from agora.core.task_lifecycle import DEFAULT_ACK_SECONDS
from agora.harness import LocalCluster, ServiceReplica
from tests.integration.helpers import eventually, filter_ids, profile, publish_event, replicas_of
from tests.integration.test_hostile_input import dead_letter_for, task_in

# Replicas learn of changes through the fan-out topic; a replica started less than 30 s ago
# also keeps every lease for that long (RENEWAL_GRACE_SECONDS), and a loaded 2-core machine
# can delay a delivery by a retry.
SETTLE_S = 60


def console(cluster: LocalCluster) -> ServiceReplica:
    return replicas_of(cluster, "console")[0]


def register(
    cluster: LocalCluster, agent: dict[str, object], lease_seconds: int | None = None
) -> httpx.Response:
    """`POST /v1/agents` as people's tools send it (through the console's sidecar)."""
    path = "v1/agents" + (f"?lease_seconds={lease_seconds}" if lease_seconds is not None else "")
    return httpx.post(console(cluster).invoke_url(path, "registry"), json=agent, timeout=30)


def agent_at(replica: ServiceReplica, agent_id: str) -> dict[str, Any] | None:
    """The agent's registry entry as `replica` lists it; None when it has none."""
    answer = httpx.get(f"{replica.app_url}/v1/agents/{agent_id}", timeout=10)
    if answer.status_code == 404:
        return None
    assert answer.status_code == 200, answer.text
    entry: dict[str, Any] = answer.json()
    return entry


def gone_from(replica: ServiceReplica, agent_id: str, skill: str) -> bool:
    """Whether `replica` neither offers nor lists the agent any more."""
    return agent_id not in filter_ids(replica.app_url, [skill]) and agent_at(replica, agent_id) is None


def first_offered(replica: ServiceReplica, agent_id: str, skill: str) -> bool:
    """Whether `replica` offers the agent first for a task needing `web_search`, preferring `skill`."""
    return filter_ids(replica.app_url, ["web_search"], [skill])[:1] == [agent_id]


def suspended_entry(replica: ServiceReplica, agent_id: str) -> dict[str, Any] | None:
    """The agent's entry once `replica` shows it suspended."""
    entry = agent_at(replica, agent_id)
    return entry if entry is not None and entry["suspended_until"] is not None else None


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def seconds_ahead(text: str) -> float:
    return (moment(text) - datetime.now(UTC)).total_seconds()


def test_a_registration_lapses_without_renewal_and_the_default_lease_applies(
    apps_cluster: LocalCluster,
) -> None:
    replicas = replicas_of(apps_cluster, "registry")
    skill = f"leased-{uuid.uuid4().hex[:6]}"
    brief, default, by_topic = (f"{name}-{skill}" for name in ("brief", "default", "topic"))

    answer = register(apps_cluster, profile(brief, skill), lease_seconds=MIN_LEASE_SECONDS)
    assert answer.status_code == 200, answer.text
    assert 0 < seconds_ahead(answer.json()["lease_expires_at"]) <= MIN_LEASE_SECONDS
    registered_from = datetime.now(UTC)
    answer = register(apps_cluster, profile(default, skill))  # no lease named
    assert answer.status_code == 200, answer.text
    publish_event(  # the register command names no lease either
        console(apps_cluster).dapr_http,
        "agora.registry",
        {"kind": "register", "profile": profile(by_topic, skill)},
    )

    for replica in replicas:
        eventually(partial(agent_at, replica, by_topic), timeout=SETTLE_S)
        for agent_id in (default, by_topic):
            entry = agent_at(replica, agent_id)
            assert entry is not None, (replica.name, agent_id)
            # Leased for the default 120 s from when the registry handled it.
            lease_end = moment(entry["lease_expires_at"]) - timedelta(seconds=DEFAULT_LEASE_SECONDS)
            assert registered_from <= lease_end <= registered_from + timedelta(seconds=SETTLE_S)
            assert entry["suspended_until"] is None and entry["suspension_reason"] is None

    # Nobody renews the brief one: every replica drops it from its filter and its listing.
    for replica in replicas:
        eventually(partial(gone_from, replica, brief, skill), timeout=SETTLE_S)
        assert filter_ids(replica.app_url, [skill]) == [default, by_topic]
        listed = httpx.get(f"{replica.app_url}/v1/agents", timeout=10).json()["agents"]
        assert brief not in {a["agent_id"] for a in listed}

    refused = register(apps_cluster, profile(f"never-{skill}", skill), lease_seconds=MIN_LEASE_SECONDS - 1)
    assert refused.status_code == 422, refused.text

    for agent_id in (default, by_topic):
        httpx.delete(console(apps_cluster).invoke_url(f"v1/agents/{agent_id}", "registry"), timeout=30)


def test_an_agent_that_let_an_award_lapse_does_not_win_the_next_task(apps_cluster: LocalCluster) -> None:
    replicas = replicas_of(apps_cluster, "registry")
    allocator = replicas_of(apps_cluster, "allocator")[0]
    skill = f"haunting-{uuid.uuid4().hex[:6]}"
    phantom = f"phantom-{uuid.uuid4().hex[:6]}"
    # A profile with nothing behind it: no runtime will ever acknowledge its awards. It also
    # has the sample agents' `web_search`, and a skill of its own that tasks prefer, so it is
    # the first candidate for the second task unless it is suspended.
    answer = register(apps_cluster, profile(phantom, skill, "web_search"))
    assert answer.status_code == 200, answer.text
    try:
        for replica in replicas:
            eventually(partial(first_offered, replica, phantom, skill), timeout=SETTLE_S)

        # First task: only the phantom can do it; it wins and lets the award lapse (the task's
        # deadline makes the acknowledgment window 3 s).
        first = f"task-{uuid.uuid4().hex[:8]}"
        publish_event(
            allocator.dapr_http,
            "agora.tasks",
            {"task_id": first, "description": "Haunt the data warehouse", "required_skills": [skill],
             "min_success_threshold": 0.0, "deadline_ms": 3000},
        )  # fmt: skip
        failed = task_in(apps_cluster, first, "FAILED", timeout=SETTLE_S)
        assert failed["failure_reason"] == f"no agent acknowledged the award in time (tried {phantom})"
        [lapsed] = failed["awards"]
        assert lapsed["acknowledged_at"] is None and lapsed["expired_at"] is not None

        # The registry suspends it, on every replica, with the reason; it stays listed.
        for replica in replicas:
            entry = eventually(partial(suspended_entry, replica, phantom), timeout=SETTLE_S)
            expected_end = moment(lapsed["expired_at"]) + timedelta(seconds=FIRST_SUSPENSION_SECONDS)
            assert moment(entry["suspended_until"]) == expected_end
            assert first in entry["suspension_reason"] and "lapse" in entry["suspension_reason"]
            suspended_until = entry["suspended_until"]
            assert phantom not in filter_ids(replica.app_url, ["web_search"], [skill])
            listed = httpx.get(f"{replica.app_url}/v1/agents", timeout=10).json()["agents"]
            assert phantom in {a["agent_id"] for a in listed}
        # Renewing its lease (as a runtime that renews but never acknowledges would) does not
        # lift the suspension.
        renewed = register(apps_cluster, profile(phantom, skill, "web_search"))
        assert renewed.status_code == 200 and renewed.json()["suspended_until"] == suspended_until

        # Second task: the phantom would be the first candidate, but a live agent wins it and
        # acknowledges at once: no acknowledgment window is waited out.
        second = f"task-{uuid.uuid4().hex[:8]}"
        published_at = datetime.now(UTC)
        publish_event(
            allocator.dapr_http,
            "agora.tasks",
            {"task_id": second, "description": "Summarise this week's papers on agent coordination",
             "required_skills": ["web_search"], "preferred_skills": [skill], "min_success_threshold": 0.0},
        )  # fmt: skip
        done = task_in(apps_cluster, second, "COMPLETED", "FAILED", timeout=SETTLE_S)
        allocation = done["allocation"]
        assert allocation["winning_agent_id"] in {"researcher", "scout"}
        assert phantom not in {b["agent_id"] for b in allocation["all_bids"]}
        assert phantom in allocation["capability_filtered_out"]
        [award] = done["awards"]
        assert award["agent_id"] == allocation["winning_agent_id"]
        assert award["acknowledged_at"] is not None and award["expired_at"] is None
        assert done["outcome"]["agent_id"] == award["agent_id"]
        taken_after = moment(award["acknowledged_at"]) - published_at
        assert taken_after < timedelta(seconds=DEFAULT_ACK_SECONDS), f"taken {taken_after} after publishing"
    finally:
        httpx.delete(console(apps_cluster).invoke_url(f"v1/agents/{phantom}", "registry"), timeout=30)


def test_only_the_task_board_announces_lapses_and_a_lapse_the_board_disowns_suspends_nobody(
    apps_cluster: LocalCluster,
) -> None:
    now = datetime.now(UTC)
    notice = {
        "task_id": f"nope-{uuid.uuid4().hex[:8]}",
        "agent_id": "researcher",
        "attempt": 1,
        "awarded_at": (now - timedelta(seconds=30)).isoformat(),
        "lapsed_at": now.isoformat(),
    }
    [recorder] = replicas_of(apps_cluster, "recorder")
    with pytest.raises(httpx.HTTPStatusError) as refused:
        publish_event(recorder.dapr_http, "agora.task.award_lapsed", notice)
    assert refused.value.response.status_code == 403
    assert refused.value.response.json()["errorCode"] == "ERR_PUBSUB_FORBIDDEN"

    # What slips past the scopes (published from the task board's own sidecar, as a message
    # injected into the broker would arrive) is checked against the task's record.
    board = replicas_of(apps_cluster, "taskboard")[0]
    unknown_task = publish_event(board.dapr_http, "agora.task.award_lapsed", notice)
    letter = dead_letter_for(apps_cluster, unknown_task, timeout=30)
    assert letter["subscriber"] == "registry" and letter["reason"].startswith("NOT_FOUND")

    # A real task whose winner took the award: a lapse notice for it is refused too.
    allocator = replicas_of(apps_cluster, "allocator")[0]
    task_id = f"task-{uuid.uuid4().hex[:8]}"
    publish_event(
        allocator.dapr_http,
        "agora.tasks",
        {"task_id": task_id, "description": "Find this week's papers on agent coordination",
         "required_skills": ["web_search"], "min_success_threshold": 0.0},
    )  # fmt: skip
    done = task_in(apps_cluster, task_id, "COMPLETED", "FAILED", timeout=40)
    [award] = done["awards"]
    forged = {**notice, "task_id": task_id, "agent_id": award["agent_id"], "awarded_at": award["awarded_at"]}
    disowned = publish_event(board.dapr_http, "agora.task.award_lapsed", forged)
    letter = dead_letter_for(apps_cluster, disowned, timeout=30)
    assert letter["reason"].startswith("UNVERIFIED_LAPSE") and "acknowledged" in letter["reason"]

    for replica in replicas_of(apps_cluster, "registry"):
        for agent_id in ("researcher", award["agent_id"]):
            entry = agent_at(replica, agent_id)
            assert entry is not None and entry["suspended_until"] is None, (replica.name, entry)
