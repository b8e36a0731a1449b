"""A debate's and a plan's live streams on real sidecars (`GET /v1/debates/{id}/events`,
`GET /v1/plans/{id}/events`, through Dapr service invocation): the record as it is, then its
changes as they are written (ids rising with its revision) until it ends (`end`) or waits for a
person; a stream resumed after the last id repeats nothing; an unknown one is 404 before any
event."""

from __future__ import annotations

import uuid

import httpx
import pytest

from agora.harness import LocalCluster
from tests.integration.test_task_event_streams import app, read_stream

pytestmark = pytest.mark.integration


def events_url(cluster: LocalCluster, path: str) -> str:
    return app(cluster).invoke_url(path, app_id="agora")


def test_a_debate_s_stream_gives_the_record_and_ends_with_it_and_a_resumed_one_repeats_nothing(
    default_cluster: LocalCluster,
) -> None:
    """The offline debaters agree at once: the debate has ended by the time the stream opens."""
    debate_id = f"stream-{uuid.uuid4().hex[:8]}"
    submission = {
        "question": "Should the orders table be migrated this week?",
        "config": {"debaters": [{"debater_id": "d0"}, {"debater_id": "d1"}], "adaptive_routing": False},
    }
    started = httpx.put(
        app(default_cluster).invoke_url(f"v1/debates/{debate_id}", app_id="agora"),
        json=submission,
        timeout=30,
    )
    assert started.status_code == 200, started.text
    url = events_url(default_cluster, f"v1/debates/{debate_id}/events")

    seen = read_stream(url)
    records = [(data, event_id) for kind, data, event_id in seen if kind == "debate"]
    assert records and all(data["debate_id"] == debate_id for data, _ in records)
    ids = [event_id for _, event_id in records if event_id is not None]
    assert len(ids) == len(records), "every record event has its id"
    assert ids == sorted(set(ids)), f"ids rise, none twice: {ids}"
    assert [data["revision"] + 1 for data, _ in records] == ids, "an event's id is its revision + 1"
    assert records[-1][0]["state"] == "COMPLETED", records[-1][0]["state"]
    assert seen[-1][0] == "end" and seen[-1][1] == {"debate_id": debate_id, "last_seq": ids[-1]}
    # Resumed after the last id: nothing it saw again, only the end.
    assert [kind for kind, _, _ in read_stream(url, last_event_id=ids[-1])] == ["end"]


def test_an_unknown_plan_s_stream_is_404_before_any_event(default_cluster: LocalCluster) -> None:
    answer = httpx.get(events_url(default_cluster, "v1/plans/no-such-plan/events"), timeout=30)
    assert answer.status_code == 404 and answer.json()["error"] == "NOT_FOUND", answer.text


def test_a_plan_s_stream_gives_its_changes_as_they_are_written_until_it_waits_or_ends(
    default_cluster: LocalCluster,
) -> None:
    plan_id = f"stream-{uuid.uuid4().hex[:8]}"
    submission = {"task": "Summarise this week's papers on agent coordination and write a brief"}
    started = httpx.put(
        app(default_cluster).invoke_url(f"v1/plans/{plan_id}", app_id="agora"), json=submission, timeout=30
    )
    assert started.status_code == 200, started.text
    seen = read_stream(
        events_url(default_cluster, f"v1/plans/{plan_id}/events"), stop=frozenset({"WAITING_FOR_HUMAN"})
    )
    records = [(data, event_id) for kind, data, event_id in seen if kind == "plan"]
    ids = [event_id for _, event_id in records if event_id is not None]
    assert len(ids) == len(records), "every record event has its id"
    assert ids == sorted(set(ids)) and [data["revision"] + 1 for data, _ in records] == ids, ids
    assert len(records) >= 2, "the plan's changes arrive as they are written"
    states = [data["state"] for data, _ in records]
    assert states[-1] in {"COMPLETED", "WAITING_FOR_HUMAN"}, states
    assert "RUNNING" in states or records[-1][0]["direct"], states
