"""A task's live event stream on real sidecars (`GET /v1/tasks/{id}/events` on the task board,
through Dapr service invocation): from the start to its end, every event once and in order; a
stream resumed with `Last-Event-ID` after any event gives exactly the rest; `agora task watch`
prints them and ends with the task; an unknown task is 404 NOT_FOUND before any event."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import httpx
import pytest

from agora.harness import LocalCluster, ServiceReplica
from tests.integration.helpers import eventually, publish_event, replicas_of

pytestmark = pytest.mark.integration


def app(cluster: LocalCluster) -> ServiceReplica:
    return replicas_of(cluster, "agora")[0]


def events_url(cluster: LocalCluster, task_id: str) -> str:
    return app(cluster).invoke_url(f"v1/tasks/{task_id}/events", app_id="agora")


def read_stream(
    url: str,
    last_event_id: int | None = None,
    stop: frozenset[str] = frozenset(),
    state_key: str = "state",
    most: int | None = None,
) -> list[tuple[str, dict[str, Any], int | None]]:
    """Every event of a stream until the server ends it, until an event's data has its
    `state_key` in `stop`, or `most` events: (event, data, id)."""
    headers = {"accept": "text/event-stream"}
    if last_event_id is not None:
        headers["last-event-id"] = str(last_event_id)
    found: list[tuple[str, dict[str, Any], int | None]] = []
    kind, data, event_id = "message", "", None
    with httpx.stream("GET", url, headers=headers, timeout=httpx.Timeout(10, read=40)) as answer:
        assert answer.status_code == 200, answer.read()
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:])
            elif line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
            elif not line and data:
                found.append((kind, json.loads(data), event_id))
                if found[-1][1].get(state_key) in stop or len(found) == most:
                    return found
                kind, data, event_id = "message", "", None
    return found


def finished_task(cluster: LocalCluster) -> str:
    task_id = f"events-{uuid.uuid4().hex[:10]}"
    spec = {
        "task_id": task_id,
        "description": "Summarise this week's papers on agent coordination",
        "required_skills": ["web_search"],
        "min_success_threshold": 0.0,
    }
    publish_event(app(cluster).dapr_http, "agora.tasks", spec)
    return task_id


def test_a_stream_from_the_start_gives_every_event_once_in_order_and_ends(
    default_cluster: LocalCluster,
) -> None:
    task_id = finished_task(default_cluster)
    url = events_url(default_cluster, task_id)
    # Watched as soon as the board knows the task: the stream carries it live to its end.
    eventually(lambda: httpx.get(url.removesuffix("/events"), timeout=10).status_code == 200)
    events = read_stream(url)
    ids = [event_id for _, _, event_id in events if event_id is not None]
    assert ids == list(range(1, len(ids) + 1))
    statuses = [data["status"] for kind, data, _ in events if kind == "status"]
    assert statuses[:3] == ["PENDING", "BIDDING", "ALLOCATED"] and statuses[-1] in {"COMPLETED", "FAILED"}
    kinds = [kind for kind, _, _ in events]
    assert "awarded" in kinds and "acknowledged" in kinds and "outcome" in kinds
    assert kinds[-1] == "end" and events[-1][1] == {"task_id": task_id, "last_seq": ids[-1]}


def test_a_stream_resumed_after_any_event_gives_exactly_the_rest(default_cluster: LocalCluster) -> None:
    task_id = finished_task(default_cluster)
    url = events_url(default_cluster, task_id)
    eventually(lambda: httpx.get(url.removesuffix("/events"), timeout=10).json().get("status") == "COMPLETED")
    whole = [e for e in read_stream(url) if e[2] is not None]
    for seen in range(len(whole) + 1):
        rest = read_stream(url, last_event_id=seen)
        assert [e for e in rest if e[2] is not None] == whole[seen:], seen
        assert rest[-1][0] == "end"


def test_a_live_run_s_stream_cut_after_k_events_and_resumed_from_k_has_no_gap_and_no_repeat(
    default_cluster: LocalCluster,
) -> None:
    """The task's own checkpoint parks its run before the first step, so the task is still
    running when the stream is cut; a person lets it go on, and the stream resumed from the
    cut carries the rest."""
    task_id = f"live-{uuid.uuid4().hex[:10]}"
    spec = {
        "task_id": task_id,
        "description": "Summarise this week's papers on agent coordination, then stop",
        "required_skills": ["web_search"],
        "min_success_threshold": 0.0,
        "checkpoints": [{"name": "before-the-run", "prompt_contains": ["papers"]}],
    }
    publish_event(app(default_cluster).dapr_http, "agora.tasks", spec)
    url = events_url(default_cluster, task_id)
    eventually(lambda: httpx.get(url.removesuffix("/events"), timeout=10).status_code == 200)

    cut = read_stream(url, stop=frozenset({"acknowledged"}), state_key="kind")
    k = cut[-1][2]
    assert cut[-1][0] == "acknowledged" and k is not None, cut
    assert [e[2] for e in cut] == list(range(1, k + 1)), cut
    escalations = app(default_cluster).invoke_url(
        "v1/escalations?status=WAITING_FOR_HUMAN&limit=500", app_id="agora"
    )

    def parked() -> str | None:
        waiting = httpx.get(escalations, timeout=10).json()["escalations"]
        return next((e["escalation_id"] for e in waiting if e["waiting_party"]["id"] == task_id), None)

    escalation_id = eventually(parked, timeout=60)
    live = httpx.get(url.removesuffix("/events"), timeout=10).json()
    assert live["status"] == "ALLOCATED", "the run is live when its stream is cut"

    decided = httpx.post(
        app(default_cluster).invoke_url(f"v1/escalations/{escalation_id}/resume", app_id="agora"),
        json={"decision": {"kind": "checkpoint", "action": "proceed"}, "who": "alice", "why": "go on"},
        timeout=30,
    )
    assert decided.status_code == 200, decided.text
    rest = read_stream(url, last_event_id=k)
    whole = read_stream(url)

    assert rest[-1][0] == "end" and whole[-1][0] == "end"
    resumed = [e for e in cut + rest if e[2] is not None]
    assert [e[2] for e in resumed] == list(range(1, len(resumed) + 1)), "no gap, no event twice"
    assert resumed == [e for e in whole if e[2] is not None], "the cut and the rest are the whole stream"
    assert resumed[-1][1]["status"] in {"COMPLETED", "FAILED"}, resumed[-1]
    assert "outcome" in [kind for kind, _, _ in rest], "the run's end came after the cut"


def test_agora_task_watch_prints_the_events_and_ends_with_the_task(default_cluster: LocalCluster) -> None:
    task_id = finished_task(default_cluster)
    port = app(default_cluster).endpoints.dapr_http_port
    record_url = events_url(default_cluster, task_id).removesuffix("/events")
    eventually(lambda: httpx.get(record_url, timeout=10).status_code == 200)
    done = subprocess.run(
        [sys.executable, "-m", "agora.cli", "--dapr-http-port", str(port), "task", "watch", task_id],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:2] == ["1", "PENDING"], lines
    assert any(line.split()[1] == "outcome:" for line in lines), lines
    assert lines[-1].split()[1] in {"COMPLETED", "FAILED"}, lines
    assert [int(line.split()[0]) for line in lines] == list(range(1, len(lines) + 1))


def test_an_unknown_task_is_not_found_before_any_event(default_cluster: LocalCluster) -> None:
    answer = httpx.get(events_url(default_cluster, f"nobody-{uuid.uuid4().hex[:8]}"), timeout=10)
    assert answer.status_code == 404 and answer.json()["error"] == "NOT_FOUND", answer.text
