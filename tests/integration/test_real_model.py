"""The whole system on the real local model (llama.cpp's server, SmolLM2-135M), every service in
the embedded app beside its sidecar: the market's estimates come from the model, one call per
decision as the server counts them; a plan is made from a valid draft and its subgoals run on the
model to an end with a reason; a debate answers with one of its options; a model server that
dies mid-run leaves typed failures, nothing running."""

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
"""The longest a debate may take on the local model: seconds per call, a few dozen calls."""
TEXT_PIECES_READ = 8
"""Of the model's first answer, the pieces the stream test reads before it has seen enough."""
ANSWER_ENDS = frozenset({"step", "step_rejected"})
"""A run's events that end the model's answer of a step: the step it decided, or the reason the
answer was not one (this small model writes invalid steps too)."""
PLAN_ON_THE_MODEL_WAIT_S = 1200
"""The longest a plan's subgoal may take to run on the local model and be judged: each attempt
is an agent's run of several steps, each a model call of up to a minute on a busy machine."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(run_dir=tmp_path_factory.mktemp("real-model"), model="local") as cluster:
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


def completions_served(cluster: LocalCluster) -> int:
    """The completions the model server has begun, as its own log counts them (a line per
    request it takes into a slot)."""
    log = (cluster.logs / "model-server.log").read_text(errors="replace")
    return sum(1 for line in log.splitlines() if "launch_slot_" in line and "processing task" in line)


def decide(app: ServiceReplica, escalation_id: str, action: str) -> None:
    decided = httpx.post(
        app.invoke_url(f"v1/escalations/{escalation_id}/resume", APP),
        json={"decision": {"kind": "escalation", "action": action}, "who": "pat", "why": "test"},
        timeout=30,
    )
    assert decided.status_code == 200, decided.text


def test_the_market_s_estimates_come_from_the_real_model_in_one_call_a_decision(
    cluster: LocalCluster, system: ServiceReplica
) -> None:
    """Tasks the market rejects once it has the estimates (a threshold no record reaches), so
    nothing but the market calls the model meanwhile: the server served one completion per
    decision, every candidate got an estimate in [0, 1] from the model, none fell back."""
    before = completions_served(cluster)
    task_ids = [publish_task(system, min_success_threshold=0.99) for _ in range(3)]
    records = [task_in(system, task_id, {"REJECTED"}, 300) for task_id in task_ids]

    assert completions_served(cluster) - before == len(task_ids), "one model call a decision, at the server"
    for record in records:
        allocation = record["allocation"]
        bids = allocation["all_bids"]
        assert len(bids) >= 2, bids
        for bid in bids:
            assert not bid["fallback"], bid
            assert 0.0 <= bid["self_reported_success_prob"] <= 1.0, bid
        assert allocation["model_bill"]["model_calls"] == 1, allocation["model_bill"]
        assert "below min_success_threshold 0.99" in allocation["reject_reason"], allocation


def test_a_plan_is_made_from_a_valid_draft_and_its_subgoals_run_on_the_model_to_an_end(
    system: ServiceReplica,
) -> None:
    plan_id = f"real-plan-{uuid.uuid4().hex[:6]}"
    request = {
        "task": "Write a short report on solar panel prices in Spain this year",
        "skills": ["web_search", "summarize", "write"],
        "min_success_threshold": 0.0,
        "config": {"max_subgoals": 1, "max_replans": 0, "enable_lookahead": False, "complexity_threshold": 1},
    }
    submitted = httpx.put(system.invoke_url(f"v1/plans/{plan_id}", APP), json=request, timeout=30)
    assert submitted.status_code == 200, submitted.text

    # An agent's step on this model takes seconds to a minute: a subgoal's attempts take minutes.
    record = record_in_state(system, APP, f"v1/plans/{plan_id}", PLAN_SETTLED, PLAN_ON_THE_MODEL_WAIT_S)
    assert record["plan"] is not None and record["plan"]["subgoals"], "a plan made from a valid draft"
    if record["state"] == "WAITING_FOR_HUMAN":  # a subgoal failed: a person ends the plan
        stop = record["stop"]
        assert stop["reason"] == "subgoal_failed" and stop["detail"], stop
        decide(system, stop["escalation_id"], "abort")
        record = record_in_state(system, APP, f"v1/plans/{plan_id}", {"FAILED", "ABORTED"}, 120)
    assert record["state"] in ("COMPLETED", "FAILED", "ABORTED"), record
    attempts = record["attempts"]
    assert attempts, "its subgoals went to the market"
    ran = [a for a in attempts if a["agent_id"] is not None]
    assert ran, f"a subgoal ran on an agent (on the model): {attempts}"
    for attempt in attempts:
        assert attempt["ended"] and attempt["verdict"], attempt
        assert attempt["verdict"] == "PASS" or attempt["reason"], (
            f"an attempt that did not pass says why: {attempt}"
        )
    if record["state"] != "COMPLETED":
        assert record["reason"] or record["decisions"], record
    assert record["token_usage"]["completion_tokens"] > 0, record["token_usage"]


def test_a_debate_answers_with_one_of_its_options_on_the_real_model(system: ServiceReplica) -> None:
    debate_id = f"real-debate-{uuid.uuid4().hex[:6]}"
    debater = {"backend": "openai", "model_id": "smollm2-135m"}
    options = ["keep a backup", "drop it now"]
    request = {
        "question": "Should the migration keep a backup of the orders table?",
        "options": options,
        "config": {
            "debaters": [{**debater, "debater_id": "d0"}, {**debater, "debater_id": "d1"}],
            "max_rounds": 1,
            "routing_debater": {**debater, "debater_id": "router"},
        },
    }
    asked = httpx.put(system.invoke_url(f"v1/debates/{debate_id}", APP), json=request, timeout=30)
    assert asked.status_code == 200, asked.text

    record = record_in_state(system, APP, f"v1/debates/{debate_id}", DEBATE_SETTLED, REAL_MODEL_WAIT_S)
    answers = [p["answer"] for r in record["rounds"] for p in r["positions"]]
    assert all(a in options or a == "" for a in answers), answers
    for position in (p for r in record["rounds"] for p in r["positions"]):
        assert position["answer"] or position["reasoning"], position  # an abstention says why
    result = record["result"]
    assert result is not None and result["final_answer"] in [*options, ""], result
    if record["state"] == "COMPLETED":
        assert record["final_answer"] in options, record
    if result["routing_decision"] == "single_agent":
        assert result["confidence"] <= 0.75, "one voice's confidence is calibrated, not a vote of one"
    if record["state"] == "WAITING_FOR_HUMAN":
        decide(system, record["escalation_id"], "abort")
        record_in_state(system, APP, f"v1/debates/{debate_id}", {"ABORTED"}, 120)


def test_an_agent_run_s_event_stream_carries_the_model_s_text_piece_by_piece_as_it_writes(
    system: ServiceReplica,
) -> None:
    task_id = publish_task(system, min_success_threshold=0.0)
    url = system.invoke_url(f"v1/runs/{task_id}/events", APP)

    def watched() -> list[tuple[str, dict[str, Any], int | None]] | None:
        # NOT_FOUND until the run begins in the app; then read while the model writes its first
        # answer: up to a few of its pieces, or the answer's end, whichever comes first (the rest
        # of the run, minutes on this model, is not what this test is about).
        try:
            return read_stream(url, stop=ANSWER_ENDS, state_key="kind", most=TEXT_PIECES_READ)
        except AssertionError:
            return None

    try:
        events = eventually(watched, timeout=300, interval=0.2)
    finally:
        # The run's remaining minutes on the one model server would only slow the tests after it.
        cancelled = httpx.post(
            system.invoke_url(f"v1/tasks/{task_id}/cancel", APP),
            json={"cancelled_by": "pat", "reason": "the stream test has read what it reads"},
            timeout=30,
        )
        assert cancelled.status_code in (200, 409), cancelled.text

    kinds = [kind for kind, _, _ in events]
    ids = [event_id for _, _, event_id in events if event_id is not None]
    assert ids == list(range(ids[0], ids[0] + len(ids))), "numbered in order, none twice"
    answered = next((i for i, kind in enumerate(kinds) if kind != "text"), len(kinds))
    assert set(kinds[answered : answered + 1]) <= ANSWER_ENDS, (
        "only the answer's end ends its pieces",
        kinds,
    )
    pieces = [data["text"] for kind, data, _ in events[:answered] if kind == "text"]
    assert len(pieces) >= 2, ("the model's first answer arrives in pieces before it ends", kinds)
    assert all(pieces), "each piece carries text"


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
