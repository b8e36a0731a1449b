"""The `make run` demo reads every answer as its contract model and sends contract models;
an error answer stops it with a readable account (no service, no sidecar: a mock transport)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from agora.cli import demo
from agora.cli.problems import CliError
from agora.core.contracts import Continuation, SessionState, StepReport, StepVerdict
from agora.core.escalation.decisions import EscalationAction
from agora.core.market import AllocationStatus, TaskOutcome, TaskSpec
from agora.core.task_lifecycle import StatusChange, TaskRecord
from agora.core.uncertainty.belief import StepUncertainty
from agora.core.uncertainty.policy import UncertaintyAction, UncertaintyLevel

Route = Callable[[httpx.Request], httpx.Response]


def client(answer: Route) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(answer), base_url="http://sidecar")


def invoke(service: str, path: str) -> str:
    return f"http://sidecar/v1.0/invoke/{service}/method/{path}"


def continued(*continuations: Continuation) -> SessionState:
    return SessionState(continuations=list(continuations))


def test_the_session_goes_on_as_its_last_continuation_says() -> None:
    last = Continuation(
        escalation_id="demo-session.2",
        action=EscalationAction.MODIFY_PROMPT,
        next_prompt="keep the old table",
        decided_by="alice",
        at=datetime(2030, 1, 1, tzinfo=UTC),
    )
    with client(lambda _: httpx.Response(200, json=continued(last).model_dump(mode="json"))) as http:
        assert demo.session_continuation(http, invoke) == (
            "session demo-session continues: modify_prompt by alice with prompt 'keep the old table'"
        )
    with client(lambda _: httpx.Response(200, json=continued().model_dump(mode="json"))) as http:
        assert demo.session_continuation(http, invoke) is None
    with client(lambda _: httpx.Response(404, json={"error": "NOT_FOUND", "message": "no"})) as http:
        assert demo.session_continuation(http, invoke) is None


def test_a_settled_task_is_printed_from_its_record(capsys: pytest.CaptureFixture[str]) -> None:
    spec = TaskSpec(task_id="demo-molecule", description="d", required_skills=["quantum_chemistry"])
    record = TaskRecord(
        spec=spec,
        status=AllocationStatus.COMPLETED,
        outcome=TaskOutcome(
            task_id="demo-molecule", agent_id="a1", actual_success=True, actual_cost_usd=0.5, actual_steps=3
        ),
        history=[StatusChange(status=s) for s in ("PENDING", "BIDDING", "ALLOCATED", "COMPLETED")],
    )
    pending = record.model_copy(update={"status": AllocationStatus.BIDDING})
    with client(lambda _: httpx.Response(200, json=pending.model_dump(mode="json"))) as http:
        assert demo._settled_at(http, invoke("taskboard", "v1/tasks/demo-molecule")) is None
    with client(lambda _: httpx.Response(200, json=record.model_dump(mode="json"))) as http:
        settled = demo._settled_at(http, invoke("taskboard", "v1/tasks/demo-molecule"))
    assert settled == record
    demo._print_task(settled)
    assert capsys.readouterr().out.splitlines() == [
        "  demo-molecule  COMPLETED PENDING → BIDDING → ALLOCATED → COMPLETED",
        "    outcome: succeeded in 3 steps, $0.5000",
    ]


def test_the_uncertain_session_reports_its_steps_as_step_reports(capsys: pytest.CaptureFixture[str]) -> None:
    step = StepUncertainty(
        step_id="2", step_type="llm_call", verbalized_confidence=0.15, p_true_confidence=-1.0,
        fused_confidence=0.15, propagated_confidence=0.3, level=UncertaintyLevel.HIGH,
        action=UncertaintyAction.PAUSE_FOR_HUMAN,
    )  # fmt: skip
    verdict = StepVerdict(
        step=step, action=step.action, status="WAITING_FOR_HUMAN", escalation_id="demo-session.2"
    )
    reports: list[StepReport] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/reset"):
            return httpx.Response(200, json=SessionState().model_dump(mode="json"))
        reports.append(StepReport.model_validate(json.loads(request.content)))
        return httpx.Response(200, json=verdict.model_dump(mode="json"))

    with client(answer) as http:
        demo._pause_a_session(http, invoke)
    assert [(r.step_id, r.prompt) for r in reports] == [("1", None), ("2", "Migrate the orders table")]
    out = capsys.readouterr().out
    assert "step 2 → pause_for_human (confidence 0.30); it waits for a person." in out
    assert "agora escalations show demo-session.2" in out


def test_a_refused_publish_stops_the_demo_with_the_refusal_told_readably() -> None:
    refusal = {
        "errorCode": "ERR_PERMISSION_DENIED",
        "message": "topic agora.tasks is not allowed for x",
    }

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json=refusal)

    with client(answer) as http, pytest.raises(CliError) as stopped:
        demo._publish(http, "http://sidecar/v1.0/publish/agora-pubsub", "agora.tasks", demo.SAMPLE_TASKS[0])
    assert str(stopped.value) == (
        "the Dapr sidecar refused the request to topic agora.tasks (403 ERR_PERMISSION_DENIED): "
        "topic agora.tasks is not allowed for x"
    )


def test_an_error_answer_is_told_from_its_error_body() -> None:
    body: dict[str, Any] = {"error": "NOT_FOUND", "message": "no session demo-session", "details": {}}
    with client(lambda _: httpx.Response(404, json=body)) as http, pytest.raises(CliError) as stopped:
        demo._answer(
            http.post(invoke("uncertainty", "v1/sessions/demo-session/reset")), SessionState, "uncertainty"
        )
    assert str(stopped.value) == "uncertainty refused the request (404 NOT_FOUND): no session demo-session"
