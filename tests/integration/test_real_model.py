"""The whole system on the real local model (llama.cpp's server, SmolLM2-135M), every service in
the embedded app beside its sidecar: what a real model answers never stalls the market, a plan
or a debate, and a model server that dies mid-run leaves typed failures, nothing running.

The market's estimates here may use one output token per candidate (AGORA_ESTIMATE_TOKENS=1),
so every rating the real model writes is cut off: the bids fall back with that reason, and no
test waits on a model for its bids."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agora.harness import LocalCluster, ServiceReplica
from agora.harness.system import EMBEDDED
from tests.integration.helpers import eventually, record_at, record_in_state
from tests.integration.test_task_event_streams import read_stream

pytestmark = pytest.mark.integration

APP = EMBEDDED.app_id
PLAN_SETTLED = {"COMPLETED", "FAILED", "ABORTED", "WAITING_FOR_HUMAN"}
DEBATE_SETTLED = {"COMPLETED", "ABORTED", "WAITING_FOR_HUMAN"}
REAL_MODEL_WAIT_S = 600
"""The longest a plan or a debate may take on the local model: seconds per call, a few dozen calls."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        run_dir=tmp_path_factory.mktemp("real-model"), model="local", extra_env={"AGORA_ESTIMATE_TOKENS": "1"}
    ) as cluster:
        cluster.add_service(EMBEDDED)
        yield cluster


@pytest.fixture
def system(cluster: LocalCluster) -> ServiceReplica:
    [app] = cluster.replicas
    return app


def publish_task(app: ServiceReplica, **fields: Any) -> str:
    task_id = f"real-{uuid.uuid4().hex[:8]}"
    spec = {"task_id": task_id, "description": "Summarise this week's papers on agent coordination",
            "required_skills": ["web_search"], **fields}  # fmt: skip
    published = httpx.post(f"{app.dapr_http}/v1.0/publish/agora-pubsub/agora.tasks", json=spec, timeout=30)
    assert published.status_code == 204, published.text
    return task_id


def task(app: ServiceReplica, task_id: str) -> dict[str, Any] | None:
    return record_at(app, APP, f"v1/tasks/{task_id}")


def task_in(app: ServiceReplica, task_id: str, statuses: set[str], timeout: float) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        record = task(app, task_id)
        return record if record is not None and record["status"] in statuses else None

    return eventually(reached, timeout=timeout, interval=0.3)


def decide(app: ServiceReplica, escalation_id: str, action: str) -> None:
    decided = httpx.post(
        app.invoke_url(f"v1/escalations/{escalation_id}/resume", APP),
        json={"decision": {"kind": "escalation", "action": action}, "who": "pat", "why": "test"},
        timeout=30,
    )
    assert decided.status_code == 200, decided.text


def test_a_bid_the_real_model_cuts_off_falls_back_with_its_reason(system: ServiceReplica) -> None:
    task_id = publish_task(system, min_success_threshold=0.99)

    record = task_in(system, task_id, {"REJECTED"}, 300)

    bids = record["allocation"]["all_bids"]
    assert bids and all(bid["fallback"] for bid in bids), bids
    for bid in bids:
        reason = bid["fallback_reason"]
        assert "the market's model gave no estimate after 2 attempt(s)" in reason, reason
        assert "cut off at its output limit" in reason, reason
    bill = record["allocation"]["model_bill"]
    assert bill["model_calls"] == 2 and bill["completion_tokens"] > 0 and bill["model_seconds"] > 0


def test_a_plan_reaches_its_end_on_the_real_model(system: ServiceReplica) -> None:
    plan_id = f"real-plan-{uuid.uuid4().hex[:6]}"
    request = {
        "task": "Write a short report on solar panel prices in Spain this year",
        "skills": ["web_search", "summarize", "write"],
        "min_success_threshold": 0.99,  # every subgoal rejected: nothing runs on the model meanwhile
        "config": {"max_subgoals": 3, "max_replans": 0, "enable_lookahead": False, "complexity_threshold": 1},
    }
    submitted = httpx.put(system.invoke_url(f"v1/plans/{plan_id}", APP), json=request, timeout=30)
    assert submitted.status_code == 200, submitted.text

    record = record_in_state(system, APP, f"v1/plans/{plan_id}", PLAN_SETTLED, REAL_MODEL_WAIT_S)
    if record["state"] == "WAITING_FOR_HUMAN":  # no plan made, or a subgoal failed: a person ends it
        stop = record["stop"]
        assert stop["reason"] in ("not_planned", "subgoal_failed") and stop["detail"], stop
        decide(system, stop["escalation_id"], "abort")
        record = record_in_state(system, APP, f"v1/plans/{plan_id}", {"FAILED", "ABORTED"}, 120)
    assert record["state"] in ("COMPLETED", "FAILED", "ABORTED"), record
    if record["state"] == "FAILED":
        assert record["reason"], record
    assert record["token_usage"]["completion_tokens"] > 0, record["token_usage"]


def test_a_debate_reaches_its_end_on_the_real_model(system: ServiceReplica) -> None:
    debate_id = f"real-debate-{uuid.uuid4().hex[:6]}"
    debater = {"backend": "openai", "model_id": "smollm2-135m"}
    request = {
        "question": "Should a database migration keep a backup of the table it drops? Options: yes | no",
        "config": {
            "debaters": [{**debater, "debater_id": "d0"}, {**debater, "debater_id": "d1"}],
            "max_rounds": 1,
            "adaptive_routing": False,
        },
    }
    asked = httpx.put(system.invoke_url(f"v1/debates/{debate_id}", APP), json=request, timeout=30)
    assert asked.status_code == 200, asked.text

    record = record_in_state(system, APP, f"v1/debates/{debate_id}", DEBATE_SETTLED, REAL_MODEL_WAIT_S)
    if record["state"] == "WAITING_FOR_HUMAN":  # split, or not sure enough: a person ends it
        decide(system, record["escalation_id"], "abort")
        record = record_in_state(system, APP, f"v1/debates/{debate_id}", {"COMPLETED", "ABORTED"}, 120)
    assert record["state"] in ("COMPLETED", "ABORTED"), record
    positions = record["rounds"][0]["positions"]
    assert {p["debater_id"] for p in positions} == {"d0", "d1"}
    # Each debater answered, or abstained with the reason: never an answer without one.
    assert all(p["answer"] or p["reasoning"] for p in positions), positions


def test_an_agent_run_s_event_stream_carries_the_model_s_text_piece_by_piece_as_it_writes(
    system: ServiceReplica,
) -> None:
    task_id = publish_task(system, min_success_threshold=0.0)
    url = system.invoke_url(f"v1/runs/{task_id}/events", APP)

    def watched() -> list[tuple[str, dict[str, Any], int | None]] | None:
        # NOT_FOUND until the run begins in the app; then read until the run ends or pauses.
        try:
            return read_stream(
                url, stop=frozenset({"COMPLETED", "FAILED", "WAITING_FOR_HUMAN"}), state_key="status"
            )
        except AssertionError:
            return None

    events = eventually(watched, timeout=300, interval=0.2)

    kinds = [kind for kind, _, _ in events]
    assert kinds[-1] == "run_ended", kinds
    ids = [event_id for _, _, event_id in events if event_id is not None]
    assert ids == list(range(ids[0], ids[0] + len(ids))), "numbered in order, none twice"
    first_step = kinds.index("step") if "step" in kinds else len(kinds)
    pieces = [data["text"] for kind, data, _ in events[:first_step] if kind == "text"]
    assert len(pieces) >= 2, ("the model's first answer arrived in pieces before its step", kinds[:20])


def test_a_model_server_killed_mid_run_leaves_a_failed_outcome_with_the_reason(
    cluster: LocalCluster, system: ServiceReplica
) -> None:
    """Last in this file: the server stays dead."""
    task_id = publish_task(system, min_success_threshold=0.0)
    task_in(system, task_id, {"ALLOCATED"}, 300)

    cluster.infra("model-server").kill()

    record = task_in(system, task_id, {"FAILED", "COMPLETED"}, 300)
    assert record["status"] == "FAILED", record
    summary = record["outcome"]["summary"]
    assert "ModelUnavailable" in summary or "could not" in summary, summary
    running = httpx.get(system.invoke_url("v1/tasks?status=ALLOCATED", APP), timeout=30).json()
    assert task_id not in running["task_ids"]
