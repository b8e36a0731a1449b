"""The debate service against real sidecars (redis profile, every service its own app): early
convergence, escalation decided by a person through the CLI, adaptive routing, a restart
mid-round that re-asks no recorded debater, and one trace per debate.

The debaters' model is a scripted OpenAI-compatible endpoint on loopback that answers as the
offline debaters do (the i-th debater takes the i-th option of the question, and moves to a
strict majority of its peers) and can hold answers back."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agora.debate.app import ANSWER_NAMESPACE
from agora.debate.steps import DEBATER_PROMPT
from agora.harness import LocalCluster, ServiceSpec
from agora.harness.scripted_model import ScriptedModel, model_env, serve_scripted_model
from agora.harness.system import CONSOLE, DEBATE, RECORDER, SERVICES
from agora.runtime.settings import ServiceSettings
from tests.integration.helpers import (
    STORE_PROFILE,
    error_line,
    eventually,
    record_at,
    record_in_state,
    recorded_message,
    replicas_of,
)
from tests.integration.test_task_event_streams import read_stream

pytestmark = pytest.mark.integration

SETTLED = {"COMPLETED", "ABORTED", "FAILED", "WAITING_FOR_HUMAN"}
BREAKS_ANSWERS = "[answers break]"
"""In a debate's question: asking a debater raises an error nobody foresaw (`apps.broken_activity`)."""
DEBATERS = [
    {"debater_id": f"d{i}", "backend": "openai", "model_id": "scripted", "role_hint": hint}
    for i, hint in enumerate(["You answer carefully.", "You are a skeptic.", "You look for gaps."])
]


class Debates:
    def __init__(self, cluster: LocalCluster, model: ScriptedModel) -> None:
        self.cluster = cluster
        self.model = model
        self.console = replicas_of(cluster, "console")[0]
        self.app = replicas_of(cluster, "debate")[0]

    def ask(self, marker: str, options: str, **config: Any) -> str:
        debate_id = f"{marker}-{uuid.uuid4().hex[:6]}"
        body = {
            "question": f"Debate {marker}: which one? Options: {options}",
            "config": {"debaters": DEBATERS, **config},
        }
        response = httpx.put(
            self.console.invoke_url(f"v1/debates/{debate_id}", "debate"), json=body, timeout=30
        )
        assert response.status_code == 200, response.text
        return debate_id

    def show(self, debate_id: str) -> dict[str, Any] | None:
        return record_at(self.console, "debate", f"v1/debates/{debate_id}")

    def wait_for(self, debate_id: str, states: set[str] = SETTLED, timeout: float = 60) -> dict[str, Any]:
        return record_in_state(self.console, "debate", f"v1/debates/{debate_id}", states, timeout)

    def completed_event(self, debate_id: str) -> dict[str, Any] | None:
        return recorded_message(self.cluster, "agora.debate.completed", "debate_id", debate_id)


@pytest.fixture(scope="module")
def debates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Debates]:
    with serve_scripted_model() as (model, base_url):
        scripted = ServiceSpec(
            DEBATE.app_id,
            "tests.integration.apps.broken_activity",
            env={**model_env(base_url), "BROKEN_APP": "agora.debate.app",
                 "BROKEN_ACTIVITY": "debate.round", "BROKEN_MARKER": BREAKS_ANSWERS},
        )  # fmt: skip
        with LocalCluster(
            STORE_PROFILE,
            run_dir=tmp_path_factory.mktemp("debate-cluster"),
            jaeger=True,
            extra_env={"OTEL_BSP_SCHEDULE_DELAY": "200"},
        ) as cluster:
            for spec in [*SERVICES, RECORDER, CONSOLE]:
                cluster.add_service(scripted if spec is DEBATE else spec)
            yield Debates(cluster, model)


def test_a_debate_that_converges_stops_early(debates: Debates) -> None:
    debate_id = debates.ask("converge", "A | B")
    record = debates.wait_for(debate_id)
    assert record["state"] == "COMPLETED" and record["routing_decision"] == "debate"
    result = record["result"]
    assert result["converged"] is True and result["total_rounds_run"] == 2  # of max_rounds 3
    assert [r["convergence_score"] for r in result["rounds"]] == [pytest.approx(2 / 3), 1.0]
    assert [p["answer"] for p in result["rounds"][0]["positions"]] == ["A", "B", "A"]
    assert record["final_answer"] == "A" and record["answer_source"] == "debate"
    assert result["escalate_to_human"] is False and result["total_token_usage"]["prompt_tokens"] > 0
    event = eventually(lambda: debates.completed_event(debate_id), timeout=30)
    assert event["final_answer"] == "A" and event["decided_by"] is None


def test_a_confident_router_skips_the_debate(debates: Debates) -> None:
    debate_id = debates.ask("routing", "42")
    record = debates.wait_for(debate_id)
    assert record["state"] == "COMPLETED" and record["routing_decision"] == "single_agent"
    assert record["result"]["rounds"] == [] and record["final_answer"] == "42"
    assert record["answer_source"] == "single_agent"


def test_a_split_debate_is_decided_by_a_person_through_the_cli(debates: Debates) -> None:
    debate_id = debates.ask("split", "red | green | blue")
    waiting = debates.wait_for(debate_id)
    assert waiting["state"] == "WAITING_FOR_HUMAN"
    result = waiting["result"]
    assert result["escalate_to_human"] is True and result["total_rounds_run"] == 3
    assert result["final_convergence_score"] == pytest.approx(1 / 3)
    escalation_id = waiting["escalation_id"]
    escalation = httpx.get(
        debates.console.invoke_url(f"v1/escalations/{escalation_id}", "escalation"), timeout=30
    ).json()
    assert escalation["waiting_party"] == {"kind": "debate", "id": debate_id}
    assert (
        "red" in escalation["context"]["output_summary"] and "blue" in escalation["context"]["output_summary"]
    )

    port = ["--dapr-http-port", str(debates.console.endpoints.dapr_http_port)]
    decided = subprocess.run(
        [sys.executable, "-m", "agora.cli", *port, "escalations", "resume", escalation_id,
         "--action", "modify_prompt", "--prompt", "green, after the latency tests", "--who", "pat"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert decided.returncode == 0, decided.stderr
    record = debates.wait_for(debate_id, {"COMPLETED", "ABORTED"})
    assert record["state"] == "COMPLETED"
    assert record["final_answer"] == "green, after the latency tests"
    assert record["answer_source"] == "person" and record["decided_by"] == "pat"
    event = eventually(lambda: debates.completed_event(debate_id), timeout=30)
    assert event["decided_by"] == "pat" and event["answer_source"] == "person"
    shown = subprocess.run(
        [sys.executable, "-m", "agora.cli", *port, "debate", "show", debate_id],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "round 3: convergence 0.33" in shown.stdout and "(given by pat)" in shown.stdout


def test_a_live_debate_s_stream_carries_each_round_as_it_is_written_and_resumes_after_the_person(
    debates: Debates,
) -> None:
    """Watched from its start: the stream opens on the debate running and carries its record as
    it is written (the stream reads the record every half second, so writes that come closer
    together arrive as one), stops at the wait for a person, and resumed after the decision it
    carries the rest."""
    debate_id = debates.ask("live", "red | green | blue")
    url = debates.console.invoke_url(f"v1/debates/{debate_id}/events", "debate")
    live = read_stream(url, stop=frozenset({"WAITING_FOR_HUMAN"}))
    records = [(data, event_id) for kind, data, event_id in live if kind == "debate"]
    assert records[0][0]["state"] == "RUNNING", "the stream opened on a live debate"
    rounds_seen = [len(data["rounds"]) for data, _ in records]
    assert len(records) >= 2 and rounds_seen == sorted(rounds_seen) and rounds_seen[-1] == 3, rounds_seen
    assert records[-1][0]["state"] == "WAITING_FOR_HUMAN"
    last = records[-1][1]
    assert last is not None

    decided = httpx.post(
        debates.console.invoke_url(f"v1/escalations/{records[-1][0]['escalation_id']}/resume", "escalation"),
        json={"decision": {"kind": "escalation", "action": "modify_prompt", "modified_prompt": "green"},
              "who": "pat"},
        timeout=30,
    )  # fmt: skip
    assert decided.status_code == 200, decided.text
    rest = read_stream(url, last_event_id=last)
    after = [(data, event_id) for kind, data, event_id in rest if kind == "debate"]
    assert after and all(event_id is not None and event_id > last for _, event_id in after), after
    assert after[-1][0]["state"] == "COMPLETED" and after[-1][0]["final_answer"] == "green"
    assert rest[-1][0] == "end"
    whole = [e for e in read_stream(url) if e[0] == "debate"]
    assert [e[2] for e in whole][-len(after) :] == [e for _, e in after], "the rest is the stream's end"


def test_a_retry_debates_again_with_the_persons_guidance(debates: Debates) -> None:
    debate_id = debates.ask("retry", "red | green | blue", max_rounds=1)
    waiting = debates.wait_for(debate_id)
    decision = {"kind": "escalation", "action": "retry", "guidance": "Options: green"}
    response = httpx.post(
        debates.console.invoke_url(f"v1/escalations/{waiting['escalation_id']}/resume", "escalation"),
        json={"decision": decision, "who": "pat", "why": "only green is available"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    record = debates.wait_for(debate_id, {"COMPLETED", "ABORTED"})
    assert record["question"].endswith("Guidance from pat: Options: green")
    assert len(record["earlier"]) == 1 and record["final_answer"] == "green"


def debaters_recorded(debates: Debates, debate_id: str, round_number: int) -> set[str]:
    """The debaters whose answer in `round_number` the debate's round has kept (read through the
    debate app's sidecar): the answers a run of the round again takes as they are."""
    keys = [f"{ANSWER_NAMESPACE}:{debate_id}|0|{round_number}|d{i}" for i in range(3)]
    response = httpx.post(
        f"{debates.app.dapr_http}/v1.0/state/{ServiceSettings().state_store}/bulk",
        json={"keys": keys},
        timeout=10,
    )
    response.raise_for_status()
    return {item["key"].rsplit("|", 1)[1] for item in response.json() if item.get("data") is not None}


@pytest.mark.parametrize("kill", ["app", "sidecar"])
def test_a_debate_resumes_after_a_restart_mid_round_without_asking_again(debates: Debates, kill: str) -> None:
    marker = f"crash{kill}"
    debates.model.hold(marker, "debater d2.", "Round 2.", prompt=DEBATER_PROMPT)
    debate_id = debates.ask(marker, "A | B")
    eventually(lambda: debates.model.holding(marker), timeout=30)
    # The other debaters' round-2 answers are in the run's history before the crash: what the
    # test then checks is that they are not asked again.
    eventually(lambda: {"d0", "d1"} <= debaters_recorded(debates, debate_id, round_number=2), timeout=30)
    if kill == "app":
        debates.app.kill_app()
        time.sleep(1)
        debates.app.start_app()
    else:
        debates.app.kill_sidecar()
        time.sleep(1)
        debates.app.start_sidecar()
    debates.model.release(marker)
    record = debates.wait_for(debate_id, timeout=120)
    assert record["state"] == "COMPLETED" and record["final_answer"] == "A"

    asked = Counter(
        (system.split()[3].rstrip("."), "\nRound 2." in user)
        for system, user in debates.model.asked
        if system.startswith(DEBATER_PROMPT) and f"Debate {marker}:" in user
    )
    assert asked[("d0", False)] == asked[("d1", False)] == asked[("d2", False)] == 1  # round 1, once each
    assert asked[("d0", True)] == asked[("d1", True)] == 1  # recorded in round 2: not asked again


def test_a_debate_is_one_trace(debates: Debates) -> None:
    debate_id = debates.ask("traced", "A | B")
    record = debates.wait_for(debate_id)
    trace_id = record["traceparent"].split("-")[1]

    def whole() -> bool:
        response = httpx.get(f"{debates.cluster.jaeger_query_url}/api/traces/{trace_id}", timeout=10)
        assert response.status_code == 200 and response.json().get("data"), "not in Jaeger yet"
        spans = response.json()["data"][0]["spans"]
        named = Counter(s["operationName"] for s in spans)
        assert named["debate.run"] == 1 and named["debate.route"] == 1
        assert named["debate.round"] == 2 and named["debate.answer"] == 6 and named["debate.aggregate"] == 1
        by_id = {s["spanID"]: s for s in spans}
        rounds = {s["spanID"] for s in spans if s["operationName"] == "debate.round"}
        for span in spans:
            if span["operationName"] == "debate.answer":
                parent = next(r["spanID"] for r in span["references"] if r["refType"] == "CHILD_OF")
                assert parent in rounds and by_id[parent]["operationName"] == "debate.round"
        return True

    eventually(whole, timeout=60, interval=1.0)


def test_the_conformal_gate_escalates_until_calibrated_then_acts(debates: Debates) -> None:
    cold = debates.wait_for(debates.ask("gatecold", "A | B", gate="conformal"))
    assert cold["state"] == "WAITING_FOR_HUMAN"  # converged, but the gate has nothing to go on
    assert cold["result"]["converged"] is True
    assert "needs at least 20" in cold["result"]["gate_decision"]["reason"]

    labelled = [debates.ask("gatecal", "A | B") for _ in range(20)]
    for debate_id in labelled:
        debates.wait_for(debate_id)
        response = httpx.post(
            debates.console.invoke_url(f"v1/debates/{debate_id}/outcome", "debate"),
            json={"right_answer": "A"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
    running = httpx.post(
        debates.console.invoke_url(f"v1/debates/{cold['debate_id']}/outcome", "debate"),
        json={"right_answer": "A"},
        timeout=30,
    )
    assert running.status_code == 409 and running.json()["error"] == "NOT_DECIDABLE"

    warm = debates.wait_for(debates.ask("gatewarm", "A | B", gate="conformal"))
    decision = warm["result"]["gate_decision"]
    assert warm["state"] == "COMPLETED" and warm["final_answer"] == "A", decision
    assert decision["act"] is True and decision["prediction_set"] == ["A"]
    assert decision["calibration_size"] >= 20


def test_a_debate_whose_run_breaks_down_ends_failed_with_its_reason_and_is_announced(
    debates: Debates,
) -> None:
    debate_id = debates.ask("broken", f"tea | coffee {BREAKS_ANSWERS}", adaptive_routing=False)
    record = debates.wait_for(debate_id)

    assert record["state"] == "FAILED"
    assert "InjectedDefect" in record["reason"] and "debate.round" in record["reason"]
    assert record["final_answer"] is None
    event = eventually(lambda: debates.completed_event(debate_id), timeout=30)
    assert event["state"] == "FAILED" and "InjectedDefect" in event["reason"]
    logged = eventually(lambda: error_line(debates.app, "debate_id", debate_id), timeout=10)
    assert logged["trace_id"] == record["traceparent"].split("-")[1]


def test_a_debate_id_reused_with_another_request_is_refused_and_the_same_request_is_a_repeat(
    debates: Debates,
) -> None:
    debate_id = debates.ask("reuse", "tea, coffee")
    url = debates.console.invoke_url(f"v1/debates/{debate_id}", "debate")
    record = debates.show(debate_id)
    assert record is not None
    first = record["request"]

    again = httpx.put(url, json=first, timeout=30)
    assert again.status_code == 200, again.text
    assert again.json()["created"] is False

    other = httpx.put(url, json={**first, "question": "Another question? Options: yes, no"}, timeout=30)
    assert other.status_code == 409, other.text
    assert other.json()["error"] == "CONFLICTING_REQUEST"
    assert "differs in: question" in other.json()["message"]


def test_without_a_state_debates_of_every_state_are_listed_newest_first(debates: Debates) -> None:
    split = debates.ask("list-split", "red | green | blue")
    waiting = debates.wait_for(split)
    assert waiting["state"] == "WAITING_FOR_HUMAN"
    agreed = debates.ask("list-agreed", "A | B")
    assert debates.wait_for(agreed)["state"] == "COMPLETED"
    marker = "listrunning"
    debates.model.hold(marker, "debater d2.", "Round 2.", prompt=DEBATER_PROMPT)
    running = debates.ask(marker, "A | B")
    try:
        eventually(lambda: debates.model.holding(marker), timeout=30)
        answer = httpx.get(debates.console.invoke_url("v1/debates?limit=500", "debate"), timeout=30).json()
        assert answer["state"] is None and answer["total"] >= 3
        mine = {split, agreed, running}
        ours = [(d["debate_id"], d["state"]) for d in answer["debates"] if d["debate_id"] in mine]
        assert ours == [(running, "RUNNING"), (agreed, "COMPLETED"), (split, "WAITING_FOR_HUMAN")]

        narrowed = httpx.get(
            debates.console.invoke_url("v1/debates?state=WAITING_FOR_HUMAN&limit=500", "debate"), timeout=30
        ).json()
        ids = [d["debate_id"] for d in narrowed["debates"]]
        assert narrowed["state"] == "WAITING_FOR_HUMAN" and split in ids and agreed not in ids
        assert ids == sorted(ids)
    finally:
        debates.model.release(marker)
        decision = {"decision": {"kind": "escalation", "action": "abort"}, "who": "pat", "why": "listed"}
        response = httpx.post(
            debates.console.invoke_url(f"v1/escalations/{waiting['escalation_id']}/resume", "escalation"),
            json=decision,
            timeout=30,
        )
        assert response.status_code == 200, response.text
