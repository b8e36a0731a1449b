"""Human escalation through real sidecars: a low-confidence step parks its session, a person
decides, the session continues as decided; decisions apply once; deadlines apply defaults;
a parked escalation outlives its app and sidecar."""

from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from agora.core.escalation.context import EscalationContext
from agora.escalation.listing import LISTING_NAMESPACE, EscalationListings
from agora.escalation.store import RECORD_NAMESPACE, EscalationSlot
from agora.harness import LocalCluster, ServiceReplica
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprSidecar
from agora.runtime.state import StateRepository
from tests.integration.helpers import eventually, recorded_message, replicas_of

CONFIDENT = "The capital of France is Paris. Confidence: 95%"
DOUBTFUL = "I am really not sure this migration is safe. Confidence: 10%"


def host(cluster: LocalCluster, service: str) -> ServiceReplica:
    return (replicas_of(cluster, service) or replicas_of(cluster, "agora"))[0]


def url(cluster: LocalCluster, service: str, path: str) -> str:
    replica = host(cluster, service)
    return replica.invoke_url(path, app_id=replica.spec.app_id)


def step(cluster: LocalCluster, session: str, step_id: str, text: str) -> httpx.Response:
    return httpx.post(
        url(cluster, "uncertainty", f"v1/sessions/{session}/llm-responses"),
        json={"step_id": step_id, "text": text, "prompt": "Plan the database migration"},
        timeout=30,
    )


def session_state(cluster: LocalCluster, session: str) -> dict[str, Any]:
    return dict(httpx.get(url(cluster, "uncertainty", f"v1/sessions/{session}"), timeout=30).json())


def resume(
    cluster: LocalCluster, escalation_id: str, decision: dict[str, Any], who: str = "alice"
) -> httpx.Response:
    return httpx.post(
        url(cluster, "escalation", f"v1/escalations/{escalation_id}/resume"),
        json={"decision": {"kind": "escalation", **decision}, "who": who, "why": "reviewed the plan"},
        timeout=30,
    )


def escalation_context(job_id: str, **fields: Any) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "sheet_num": 1,
        "validation_results": [],
        "confidence": 0.3,
        "retry_count": 1,
        "error_history": [],
        "prompt_used": "p",
        "output_summary": "o",
    }
    return EscalationContext(job_id=job_id, **{**defaults, **fields}).model_dump(mode="json")


def pause(cluster: LocalCluster, doubt: str = DOUBTFUL) -> tuple[str, str]:
    """A session whose second step is doubtful: it is paused, and its escalation is listed."""
    session = f"session-{uuid.uuid4().hex[:8]}"
    first = step(cluster, session, "1", CONFIDENT).json()
    assert first["action"] == "proceed" and first["status"] == "RUNNING"
    paused = step(cluster, session, "2", doubt).json()
    assert paused["action"] == "pause_for_human" and paused["status"] == "WAITING_FOR_HUMAN"
    escalation_id = paused["escalation_id"]
    answer = httpx.get(url(cluster, "escalation", "v1/escalations?limit=500"), timeout=30)
    assert answer.status_code == 200, answer.text
    assert escalation_id in [e["escalation_id"] for e in answer.json()["escalations"]]
    refused = step(cluster, session, "3", CONFIDENT)
    assert refused.status_code == 409 and refused.json()["error"] == "SESSION_NOT_RUNNING"
    return session, escalation_id


@pytest.mark.parametrize(
    ("decision", "status", "next_prompt"),
    [
        ({"action": "retry"}, "RUNNING", None),
        ({"action": "skip"}, "RUNNING", None),
        ({"action": "abort"}, "ABORTED", None),
        (
            {"action": "modify_prompt", "modified_prompt": "Plan it with a rollback"},
            "RUNNING",
            "Plan it with a rollback",
        ),
    ],
    ids=["retry", "skip", "abort", "modify_prompt"],
)
def test_each_decision_continues_the_session_as_decided(
    default_cluster: LocalCluster, decision: dict[str, Any], status: str, next_prompt: str | None
) -> None:
    session, escalation_id = pause(default_cluster)
    shown = httpx.get(
        url(default_cluster, "escalation", f"v1/escalations/{escalation_id}"), timeout=30
    ).json()
    assert shown["context"]["confidence"] < 0.6 and shown["waiting_party"] == {
        "kind": "session",
        "id": session,
    }

    answer = resume(default_cluster, escalation_id, decision)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "RESOLVED" and answer.json()["decided_by"] == "alice"
    assert [a["what"] for a in answer.json()["audit"]][-1] == f"resolved: {decision['action']}"

    continued = eventually(lambda: (s := session_state(default_cluster, session))["status"] == status and s)
    [continuation] = continued["continuations"]
    assert continuation["action"] == decision["action"] and continuation["next_prompt"] == next_prompt
    if status == "ABORTED":
        assert continued["abort_summary"]["reason"] == "reviewed the plan"
    else:
        assert step(default_cluster, session, "3", CONFIDENT).status_code == 200, (
            "the session takes steps again"
        )

    again = resume(default_cluster, escalation_id, {"action": "retry"}, who="bob")
    assert again.status_code == 409 and again.json()["error"] == "AGENT_NOT_WAITING"


def test_unknown_escalation_and_invalid_decisions_are_refused(default_cluster: LocalCluster) -> None:
    missing = resume(default_cluster, "nobody", {"action": "retry"})
    assert missing.status_code == 404 and missing.json()["error"] == "NOT_FOUND"
    _, escalation_id = pause(default_cluster)
    no_prompt = resume(default_cluster, escalation_id, {"action": "modify_prompt"})
    assert no_prompt.status_code == 422
    assert "modified_prompt" in no_prompt.json()["message"]


def test_deadline_applies_the_default_decision(default_cluster: LocalCluster) -> None:
    session = f"session-{uuid.uuid4().hex[:8]}"
    escalation_id = f"{session}.deadline"
    deadline = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    context = escalation_context(session, error_history=["checker failed"])
    parked = httpx.put(
        url(default_cluster, "escalation", f"v1/escalations/{escalation_id}"),
        json={
            "waiting_party": {"kind": "session", "id": session},
            "context": context,
            "deadline": deadline,
            "default_decision": {"kind": "escalation", "action": "skip"},
        },
        timeout=30,
    )
    assert parked.status_code == 200, parked.text
    show = url(default_cluster, "escalation", f"v1/escalations/{escalation_id}")
    expired = eventually(
        lambda: (r := httpx.get(show, timeout=30).json())["status"] == "EXPIRED" and r, timeout=30
    )
    assert expired["decision"]["action"] == "skip" and expired["decided_by"] == "system"
    assert resume(default_cluster, escalation_id, {"action": "retry"}).status_code == 409


def test_parked_escalation_survives_restart_of_its_app_and_sidecar(apps_cluster: LocalCluster) -> None:
    session, escalation_id = pause(apps_cluster)
    escalation = replicas_of(apps_cluster, "escalation")[0]
    escalation.kill()
    escalation.start()
    shown = httpx.get(url(apps_cluster, "escalation", f"v1/escalations/{escalation_id}"), timeout=30).json()
    assert shown["status"] == "WAITING_FOR_HUMAN"
    listed = httpx.get(url(apps_cluster, "escalation", "v1/escalations"), timeout=30).json()["escalations"]
    assert escalation_id in [e["escalation_id"] for e in listed]
    assert resume(apps_cluster, escalation_id, {"action": "retry"}).status_code == 200
    eventually(lambda: session_state(apps_cluster, session)["status"] == "RUNNING")


def test_resume_needs_the_api_token_when_one_is_set(apps_cluster: LocalCluster) -> None:
    escalation = replicas_of(apps_cluster, "escalation")[0]
    escalation.stop()
    escalation.spec.env["AGORA_API_TOKEN"] = "s3cret"
    try:
        escalation.start()
        _, escalation_id = pause(apps_cluster)
        denied = resume(apps_cluster, escalation_id, {"action": "retry"})
        assert denied.status_code == 401 and denied.json()["error"] == "UNAUTHORIZED"
        allowed = httpx.post(
            url(apps_cluster, "escalation", f"v1/escalations/{escalation_id}/resume"),
            json={"decision": {"kind": "escalation", "action": "retry"}, "who": "alice"},
            headers={"x-agora-token": "s3cret"},
            timeout=30,
        )
        assert allowed.status_code == 200
        forged = httpx.post(
            url(apps_cluster, "escalation", f"v1/escalations/{escalation_id}/resume"),
            json={"decision": {"kind": "escalation", "action": "retry"}, "who": "mallory"},
            headers={"x-agora-token": "guess-4711"},
            timeout=30,
        )
        assert forged.status_code == 401
        for log in (f"{escalation.name}.app.log", f"{escalation.name}.daprd.log"):
            text = (apps_cluster.logs / log).read_text()
            assert "s3cret" not in text and "guess-4711" not in text, log  # tokens are never logged
    finally:
        escalation.stop()
        escalation.spec.env.pop("AGORA_API_TOKEN")
        escalation.start()


def test_past_escalations_come_back_as_suggestions_successful_first(default_cluster: LocalCluster) -> None:
    # Two earlier escalations on the same kind of doubt: one skipped, one retried.
    doubt = f"Unsure whether the {uuid.uuid4().hex[:8]} ledger reconciliation balances. Confidence: 10%"
    _, skipped = pause(default_cluster, doubt)
    assert resume(default_cluster, skipped, {"action": "skip"}).status_code == 200
    retried_session, retried = pause(default_cluster, doubt)
    assert (
        resume(default_cluster, retried, {"action": "retry", "guidance": "re-read the schema"}).status_code
        == 200
    )
    eventually(lambda: session_state(default_cluster, retried_session)["status"] == "RUNNING")
    assert (
        step(default_cluster, retried_session, "3", "Checked twice, all good. Confidence: 99%").status_code
        == 200
    )

    def suggested() -> list[dict[str, Any]] | None:
        _, fresh = pause(default_cluster, doubt)
        shown = httpx.get(url(default_cluster, "escalation", f"v1/escalations/{fresh}"), timeout=30).json()
        suggestions = shown["context"]["historical_suggestions"]
        ids = [s["escalation_id"] for s in suggestions]
        return suggestions if skipped in ids and retried in ids else None

    suggestions = eventually(suggested, timeout=30)
    by_id = {s["escalation_id"]: s for s in suggestions}
    assert by_id[skipped]["action"] == "skip" and by_id[skipped]["outcome_succeeded"] is False
    assert by_id[retried]["guidance"] == "re-read the schema"
    known = [s for s in suggestions if s["outcome_succeeded"] is not None]
    assert known == sorted(known, key=lambda s: not s["outcome_succeeded"]), "successful outcomes first"


def test_pre_execution_checkpoint_parks_the_same_way(default_cluster: LocalCluster) -> None:
    session = f"session-{uuid.uuid4().hex[:8]}"
    checkpoints = url(default_cluster, "uncertainty", f"v1/sessions/{session}/checkpoints")
    triggers = [
        {"name": "destructive", "prompt_contains": ["DROP TABLE"], "message": "Destructive SQL"},
        {"name": "heads-up", "sheet_nums": [1], "requires_confirmation": False, "message": "First step"},
    ]
    warned = httpx.post(
        checkpoints, json={"step": 1, "prompt": "list tables", "triggers": triggers}, timeout=30
    )
    assert warned.json()["verdict"]["gate"] == "warn" and warned.json()["status"] == "RUNNING"

    risky = {"step": 2, "prompt": "then drop table orders", "triggers": triggers}
    gated = httpx.post(checkpoints, json=risky, timeout=30).json()
    assert gated["verdict"]["gate"] == "confirm" and gated["status"] == "WAITING_FOR_HUMAN"
    shown = httpx.get(
        url(default_cluster, "escalation", f"v1/escalations/{gated['escalation_id']}"), timeout=30
    )
    assert shown.json()["context"]["kind"] == "checkpoint"
    assert shown.json()["context"]["trigger"]["name"] == "destructive"

    decision = {"kind": "checkpoint", "action": "modify_prompt", "modified_prompt": "archive table orders"}
    answer = httpx.post(
        url(default_cluster, "escalation", f"v1/escalations/{gated['escalation_id']}/resume"),
        json={"decision": decision, "who": "dba"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    continued = eventually(
        lambda: (s := session_state(default_cluster, session))["status"] == "RUNNING" and s
    )
    assert continued["continuations"][-1]["next_prompt"] == "archive table orders"


@pytest.mark.parametrize("kind", ["plan_step", "debate"])
def test_any_waiting_party_is_told_the_decision_on_the_resolved_topic(
    apps_cluster: LocalCluster, kind: str
) -> None:
    """Whatever waits (here a plan step or a debate, parked through the HTTP API) hears the
    decision on `agora.escalation.resolved`, addressed to it."""
    party = {"kind": kind, "id": f"{kind}-{uuid.uuid4().hex[:8]}"}
    escalation_id = f"{party['id']}.review"
    context = escalation_context(
        party["id"],
        error_history=["verifier rejected the subgoal"],
        prompt_used="Compare the three vendor proposals",
        output_summary="two proposals compared, one missing",
    )
    parked = httpx.put(
        url(apps_cluster, "escalation", f"v1/escalations/{escalation_id}"),
        json={"waiting_party": party, "context": context, "who": kind.replace("_", "-")},
        timeout=30,
    )
    parked.raise_for_status()
    assert parked.json()["status"] == "WAITING_FOR_HUMAN"
    prompt = "Compare only the two complete proposals"
    decided = resume(apps_cluster, escalation_id, {"action": "modify_prompt", "modified_prompt": prompt})
    assert decided.status_code == 200, decided.text

    def told() -> dict[str, Any] | None:
        return recorded_message(apps_cluster, "agora.escalation.resolved", "escalation_id", escalation_id)

    event = eventually(told, timeout=30)
    assert event["waiting_party"] == party
    assert event["decision"]["action"] == "modify_prompt" and event["decision"]["modified_prompt"] == prompt
    assert event["decided_by"] == "alice"


def test_only_the_console_may_resume_under_the_access_control_policy(apps_cluster: LocalCluster) -> None:
    """mTLS gives every sidecar a SPIFFE identity; the escalation app's sidecar lets the
    console resume and refuses a service, which may still list and show."""
    _, escalation_id = pause(apps_cluster)
    worker = replicas_of(apps_cluster, "worker")[0]
    console = replicas_of(apps_cluster, "console")[0]

    listed = httpx.get(worker.invoke_url("v1/escalations", app_id="escalation"), timeout=30)
    assert listed.status_code == 200
    shown = httpx.get(worker.invoke_url(f"v1/escalations/{escalation_id}", app_id="escalation"), timeout=30)
    assert shown.status_code == 200 and shown.json()["status"] == "WAITING_FOR_HUMAN"

    decision = {"decision": {"kind": "escalation", "action": "retry"}, "who": "mallory"}
    refused = httpx.post(
        worker.invoke_url(f"v1/escalations/{escalation_id}/resume", app_id="escalation"),
        json=decision,
        timeout=30,
    )
    assert refused.status_code == 403
    assert "access control policy has denied access to id: spiffe://public/ns/default/worker" in refused.text
    still = httpx.get(console.invoke_url(f"v1/escalations/{escalation_id}", app_id="escalation"), timeout=30)
    assert still.json()["status"] == "WAITING_FOR_HUMAN"

    decision["who"] = "alice"
    accepted = httpx.post(
        console.invoke_url(f"v1/escalations/{escalation_id}/resume", app_id="escalation"),
        json=decision,
        timeout=30,
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["decided_by"] == "alice"


async def test_a_repeated_park_is_accepted_and_restores_a_missing_listing(
    default_cluster: LocalCluster,
) -> None:
    """A park that failed after its commit (say, at the index write) is retried by its caller
    with the same request. The retry is accepted although the stored context gained suggestions
    at the first park, and it leaves the escalation listed."""
    topic = uuid.uuid4().hex[:8]
    context = escalation_context(
        f"job-{topic}",
        output_summary=f"Not sure the {topic} ledger balances",
        error_history=[f"step 2: {topic} totals differ"],
    )
    replica = host(default_cluster, "escalation")
    sidecar = DaprSidecar(ServiceSettings(dapr_http_port=replica.endpoints.dapr_http_port))
    records = StateRepository(sidecar, "agora-state", RECORD_NAMESPACE, EscalationSlot)
    listings = EscalationListings(StateRepository(sidecar, "agora-state", LISTING_NAMESPACE, BaseModel))

    def park(escalation_id: str) -> dict[str, Any]:
        body = {"waiting_party": {"kind": "session", "id": escalation_id}, "context": context}
        response = httpx.put(
            url(default_cluster, "escalation", f"v1/escalations/{escalation_id}"), json=body, timeout=30
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    def listed() -> list[str]:
        waiting = "v1/escalations?status=WAITING_FOR_HUMAN&limit=500"
        answer = httpx.get(url(default_cluster, "escalation", waiting), timeout=30)
        return [e["escalation_id"] for e in answer.json()["escalations"]]

    earlier, escalation_id = f"earlier-{topic}", f"relisted-{topic}"
    try:
        park(earlier)
        assert resume(default_cluster, earlier, {"action": "skip"}).status_code == 200
        first = park(escalation_id)
        assert earlier in [s["escalation_id"] for s in first["context"]["historical_suggestions"]]
        slot = await records.get(escalation_id)
        assert slot is not None and slot.value.record is not None
        await listings("WAITING_FOR_HUMAN").remove(escalation_id, slot.value.record.created_at)
        assert escalation_id not in listed()
        assert park(escalation_id) == first
        assert escalation_id in listed()
    finally:
        await sidecar.aclose()


def test_without_a_status_every_escalation_is_listed_newest_first(default_cluster: LocalCluster) -> None:
    """Parked one after the other, one of them decided: the listing of every status has them
    newest first, and the CLI shows them, and one of them, for a person."""
    topic = uuid.uuid4().hex[:8]
    ids = [f"listed-{topic}-{n}" for n in range(3)]
    for n, escalation_id in enumerate(ids):
        body = {
            "waiting_party": {"kind": "session", "id": f"session-{topic}-{n}"},
            "context": escalation_context(f"job-{topic}", confidence=0.2333333333333333),
        }
        parked = httpx.put(
            url(default_cluster, "escalation", f"v1/escalations/{escalation_id}"), json=body, timeout=30
        )
        assert parked.status_code == 200, parked.text
    try:
        assert resume(default_cluster, ids[1], {"action": "skip"}).status_code == 200

        answer = httpx.get(url(default_cluster, "escalation", "v1/escalations?limit=500"), timeout=30).json()
        assert answer["status"] is None and answer["total"] >= 3
        ours = [(e["escalation_id"], e["status"]) for e in answer["escalations"] if e["escalation_id"] in ids]
        assert ours == [(ids[2], "WAITING_FOR_HUMAN"), (ids[1], "RESOLVED"), (ids[0], "WAITING_FOR_HUMAN")]
        created = [datetime.fromisoformat(e["created_at"]) for e in answer["escalations"]]
        assert created == sorted(created, reverse=True)
        waiting = httpx.get(
            url(default_cluster, "escalation", "v1/escalations?status=WAITING_FOR_HUMAN&limit=500"),
            timeout=30,
        ).json()
        listed_waiting = [e["escalation_id"] for e in waiting["escalations"]]
        assert waiting["status"] == "WAITING_FOR_HUMAN" and ids[1] not in listed_waiting
        assert ids[0] in listed_waiting and ids[2] in listed_waiting

        port = ["--dapr-http-port", str(host(default_cluster, "escalation").endpoints.dapr_http_port)]

        def agora(*argv: str) -> str:
            done = subprocess.run(
                [sys.executable, "-m", "agora.cli", *port, *argv], capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        rows = [line.split()[:2] for line in agora("escalations", "list", "--limit", "500").splitlines()]
        assert [row for row in rows if row[0] in ids] == [
            [ids[2], "WAITING_FOR_HUMAN"],
            [ids[1], "RESOLVED"],
            [ids[0], "WAITING_FOR_HUMAN"],
        ]
        shown = agora("escalations", "show", ids[1]).splitlines()
        assert shown[0] == f"{ids[1]}: RESOLVED" and "  confidence: 0.23" in shown
        assert any(line.startswith("decision: skip by alice at ") for line in shown)
        assert not any("0.2333" in line for line in shown)
    finally:
        for escalation_id in (ids[0], ids[2]):
            resume(default_cluster, escalation_id, {"action": "skip"})
