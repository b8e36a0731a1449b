"""The uncertainty monitor's gates as an agent's runner meets them: the SDK's
`UncertaintyStepMonitor` calling the monitor's routes, answered by a `SessionUncertainty` actor
on the SDK's mock actor runtime (the escalation service played by the core's own `park`). A
tool that cannot be undone waits, at medium uncertainty, as a checkpoint before it runs; the
checkpoint triggers the monitor is configured with hold a step before its model call; a doubted
step brings the monitor's reflection prompt to the next model call. And the monitor's settings:
the reference's names and defaults, in its environment and in the Helm chart."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from agora.core.contracts import CheckpointRequest, StepReport
from agora.core.errors import error_from
from agora.core.escalation.checkpoints import CheckpointContext, CheckpointTrigger
from agora.core.escalation.decisions import (
    CheckpointAction,
    CheckpointResponse,
    EscalationAction,
    EscalationResponse,
)
from agora.core.escalation.record import EscalationRecord, EscalationStatus, ParkRequest, WaitingParty, park
from agora.core.messages import EscalationResolved
from agora.core.uncertainty.policy import REFLECTION_PROMPT, UncertaintyPolicy
from agora.llm import ChatMessage, OfflineModelClient
from agora.runtime.actor_client import ActorClient
from agora.runtime.actor_interface import wire_name
from agora.runtime.interfaces import EscalationInterface
from agora.runtime.sidecar import DaprSidecar
from agora.sdk import RunStatus, Tool
from agora.sdk._monitor import UncertaintyStepMonitor
from agora.sdk.runner import AgentDefinition, AgentRunner
from agora.sdk.tools import ToolExecutor
from agora.uncertainty.actors import SessionUncertainty, UncertaintyDeps
from agora.uncertainty.app import UncertaintySettings
from tests.unit.helpers import answer_of, hosted

ROOT = Path(__file__).resolve().parents[2]
SESSION = "s1"
DBA = AgentDefinition(name="dba")


class EscalationService(ActorClient):
    """`Escalation` actors' `park`, as the escalation service answers it."""

    def __init__(self) -> None:
        self.records: dict[str, EscalationRecord] = {}

    async def call(self, actor_type: str, actor_id: str, method: str, payload: Any = None) -> Any:
        assert method == wire_name(EscalationInterface.park) and isinstance(payload, ParkRequest)
        record = park(
            actor_id, payload.waiting_party, payload.context, now=datetime.now(UTC),
            who=payload.who, why=payload.why, existing=self.records.get(actor_id),
        )  # fmt: skip
        self.records[actor_id] = record
        return record.model_dump(mode="json")


class MonitorApp:
    """The monitor's routes as service invocation reaches them, answered by session `s1`'s
    actor: what `UncertaintyClient` sends through the sidecar."""

    def __init__(self, policy: UncertaintyPolicy, triggers: Sequence[CheckpointTrigger] = ()) -> None:
        self.escalations = EscalationService()
        deps = UncertaintyDeps(actors=self.escalations, policy=policy, checkpoint_triggers=tuple(triggers))
        self.actor = hosted(SessionUncertainty, SESSION, deps)
        self.routes: list[str] = []

    async def invoke(
        self, app_id: str, method: str, http_method: str = "POST", json_body: Any = None, **_: Any
    ) -> Any:
        assert app_id == "uncertainty"
        version, sessions, session, *route = method.split("/")
        assert (version, sessions) == ("v1", "sessions")
        assert session == SESSION
        self.routes.append("/".join(route) or http_method)
        actor = self.actor
        answer: object
        if http_method == "GET":
            answer = await actor.get_belief_state()
        elif route == ["llm-responses"]:
            answer = await actor.observe_llm_response(StepReport.model_validate(json_body))
        elif route == ["tool-calls"]:
            answer = await actor.observe_tool_call(StepReport.model_validate(json_body))
        else:
            assert route == ["checkpoints"], route
            answer = await actor.checkpoint(CheckpointRequest.model_validate(json_body))
        found = answer_of(answer)
        if found.error is not None:
            raise error_from(found.error.error, found.error.message, found.error.details)
        assert isinstance(found.result, BaseModel)
        return found.result.model_dump(mode="json")

    async def decide(self, escalation_id: str, decision: CheckpointResponse | EscalationResponse) -> None:
        resolved = EscalationResolved(
            escalation_id=escalation_id,
            waiting_party=WaitingParty(kind="session", id=SESSION),
            decision=decision,
            decided_by="alice",
            status=EscalationStatus.RESOLVED,
        )
        assert answer_of(await self.actor.apply_decision(resolved)).error is None


class Ledger:
    def __init__(self) -> None:
        self.done: list[str] = []

    def tools(self) -> ToolExecutor:
        def delete_records(table: str) -> str:
            """Delete every record of a table."""
            self.done.append(f"delete {table}")
            return "deleted"

        def archive_records(table: str) -> str:
            """Copy a table's records to the archive."""
            self.done.append(f"archive {table}")
            return "archived"

        return ToolExecutor([Tool(delete_records), Tool(archive_records)])


class Model:
    def __init__(self, *turns: dict[str, Any]) -> None:
        self.asked: list[list[ChatMessage]] = []
        answers: Iterator[dict[str, Any]] = iter(turns)

        def next_turn(messages: Sequence[ChatMessage]) -> str:
            self.asked.append(list(messages))
            return json.dumps(next(answers))

        self.client = OfflineModelClient(overrides=next_turn)


def call(tool: str, confidence: float) -> dict[str, Any]:
    return {"thought": "next", "action": "tool", "tool": tool, "arguments": {"table": "orders"},
            "confidence": confidence}  # fmt: skip


FINAL = {"thought": "done", "action": "final", "answer": "done", "confidence": 0.9}
GATED = UncertaintyPolicy(enable_p_true=False, irreversible_tool_names=["delete"])


async def runner_over(app: MonitorApp, model: Model, ledger: Ledger) -> AgentRunner:
    await app.actor._on_activate()
    monitor = UncertaintyStepMonitor(cast(DaprSidecar, app), "uncertainty")
    return AgentRunner(model.client, ledger.tools(), monitor=monitor)


async def test_an_irreversible_tool_at_medium_confidence_waits_as_a_checkpoint_and_proceed_runs_it() -> None:
    app, ledger = MonitorApp(GATED), Ledger()
    runner = await runner_over(app, Model(call("delete_records", 0.7), FINAL), ledger)

    paused = await runner.run(DBA, "Clear the orders", session_id=SESSION)

    assert paused.status is RunStatus.WAITING_FOR_HUMAN and paused.escalation_id == "s1.tool-1"
    assert ledger.done == [], "held before the tool ran"
    record = app.escalations.records["s1.tool-1"]
    assert isinstance(record.context, CheckpointContext) and record.context.trigger is not None
    assert record.context.trigger.name == "before tool delete_records"
    assert record.context.trigger.message.startswith(
        "medium uncertainty (confidence 0.74) before the irreversible"
    )
    assert record.context.prompt.startswith('next Calls delete_records with {"table": "orders"}')
    assert app.routes == ["checkpoints", "llm-responses", "tool-calls"]

    await app.decide("s1.tool-1", CheckpointResponse(action=CheckpointAction.PROCEED))
    resumed = await runner.resume("dba", SESSION, "Decision: proceed.")

    assert ledger.done == ["delete orders"] and resumed.status is RunStatus.COMPLETED


async def test_a_tool_that_can_be_undone_runs_at_medium_confidence() -> None:
    app, ledger = MonitorApp(GATED), Ledger()
    runner = await runner_over(app, Model(call("archive_records", 0.7), FINAL), ledger)
    result = await runner.run(DBA, "Archive the orders", session_id=SESSION)
    assert result.status is RunStatus.COMPLETED and ledger.done == ["archive orders"]
    assert "tool-calls" in app.routes


async def test_the_monitor_s_abort_decision_on_a_held_tool_keeps_it_from_ever_running() -> None:
    app, ledger = MonitorApp(GATED), Ledger()
    runner = await runner_over(app, Model(call("delete_records", 0.7), FINAL), ledger)
    await runner.run(DBA, "Clear the orders", session_id=SESSION)

    await app.decide("s1.tool-1", CheckpointResponse(action=CheckpointAction.ABORT))
    ended = await runner.resume("dba", SESSION, "Decision: abort.")

    assert ended.status is RunStatus.FAILED and ledger.done == []


async def test_a_doubted_step_brings_the_reflection_prompt_to_the_model_call_after_the_decision() -> None:
    app, ledger, model = MonitorApp(GATED), Ledger(), Model(call("archive_records", 0.1), FINAL)
    runner = await runner_over(app, model, ledger)

    paused = await runner.run(DBA, "Archive the orders", session_id=SESSION)
    assert paused.status is RunStatus.WAITING_FOR_HUMAN and paused.escalation_id == "s1.1"
    await app.decide("s1.1", EscalationResponse(action=EscalationAction.RETRY))
    await runner.resume("dba", SESSION, "Decision: retry.")

    assert ChatMessage(role="system", content=REFLECTION_PROMPT) in model.asked[1]
    assert ledger.done == [], "a retried step is asked again, not run as it was"


async def test_a_trigger_the_monitor_is_configured_with_holds_the_step_before_its_model_call() -> None:
    trigger = CheckpointTrigger(
        name="orders", prompt_contains=["orders"], message="Orders are kept for audits"
    )
    app, ledger, model = MonitorApp(GATED, [trigger]), Ledger(), Model(FINAL)
    runner = await runner_over(app, model, ledger)

    paused = await runner.run(DBA, "Clear the orders", session_id=SESSION)

    assert paused.status is RunStatus.WAITING_FOR_HUMAN and paused.escalation_id == "s1.checkpoint-1"
    assert model.asked == [] and paused.reason == "Orders are kept for audits"
    await app.decide("s1.checkpoint-1", CheckpointResponse(action=CheckpointAction.PROCEED))
    resumed = await runner.resume("dba", SESSION, "Decision: proceed.")
    assert resumed.status is RunStatus.COMPLETED and len(model.asked) == 1


def test_the_monitor_s_settings_default_to_the_reference_s_policy() -> None:
    policy = UncertaintySettings().policy()
    assert (policy.low_threshold, policy.medium_threshold, policy.high_threshold) == (0.80, 0.60, 0.40)
    assert policy.enable_p_true and policy.inject_reflection_on_high
    assert not policy.enable_semantic_sampling, "off by default: it multiplies a step's model calls"
    assert policy.irreversible_tool_names == [], "none by default, as in the reference"


def test_the_monitor_s_settings_are_read_from_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGORA_IRREVERSIBLE_TOOL_NAMES", " drop_table, truncate ,")
    monkeypatch.setenv("AGORA_ENABLE_SEMANTIC_SAMPLING", "true")
    monkeypatch.setenv("AGORA_MEDIUM_THRESHOLD", "0.7")
    monkeypatch.setenv("AGORA_CHECKPOINTS", '[{"name": "deploys", "prompt_contains": ["deploy"]}]')
    settings = UncertaintySettings()
    policy = settings.policy()
    assert policy.irreversible_tool_names == ["drop_table", "truncate"]
    assert policy.enable_semantic_sampling and policy.medium_threshold == 0.7
    assert settings.triggers() == [CheckpointTrigger(name="deploys", prompt_contains=["deploy"])]

    monkeypatch.setenv("AGORA_IRREVERSIBLE_TOOL_NAMES", '["send_email"]')
    assert UncertaintySettings().irreversible_tool_names == ["send_email"]
    monkeypatch.setenv("AGORA_IRREVERSIBLE_TOOL_NAMES", "")
    assert UncertaintySettings().irreversible_tool_names == []


def test_thresholds_out_of_order_refuse_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGORA_HIGH_THRESHOLD", "0.9")
    with pytest.raises(ValidationError, match="low_threshold >= medium_threshold >= high_threshold"):
        UncertaintySettings()


def test_the_helm_chart_gives_the_monitor_the_reference_s_policy_and_its_example_s_tools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = yaml.safe_load((ROOT / "deploy" / "helm" / "agora" / "values.yaml").read_text())
    env = {var["name"]: var["value"] for var in values["services"]["uncertainty"]["env"]}
    assert {
        "AGORA_LOW_THRESHOLD", "AGORA_MEDIUM_THRESHOLD", "AGORA_HIGH_THRESHOLD", "AGORA_ENABLE_P_TRUE",
        "AGORA_ENABLE_SEMANTIC_SAMPLING", "AGORA_IRREVERSIBLE_TOOL_NAMES", "AGORA_INJECT_REFLECTION_ON_HIGH",
    } <= set(env)  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from_chart = UncertaintySettings()
    reference_example = ["send_email", "delete", "deploy"]
    assert from_chart.policy() == UncertaintySettings.model_construct().policy().model_copy(
        update={"irreversible_tool_names": reference_example}
    ), "the defaults, and the reference example's irreversible tools"
    assert from_chart.triggers() == []
