"""People asked before a risky step, not after: the runner with a scripted model and a scripted
step monitor. The tool gate is asked before a tool runs and a pause there holds the call (the
tool's side effect stays absent until a person lets it run: proceed runs it, abort never does,
skip leaves it out, modify_prompt puts a new prompt in its place); a checkpoint trigger holds a
step before its model call; the monitor's reflection prompt reaches the next model call."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from typing import Any, Literal

import pytest

from agora.core.contracts import CheckpointRequest
from agora.core.errors import InvalidArgument
from agora.core.escalation.checkpoints import CheckpointContext, CheckpointTrigger
from agora.core.escalation.decisions import (
    CheckpointAction,
    CheckpointResponse,
    EscalationAction,
    EscalationResponse,
)
from agora.core.escalation.record import ParkRequest
from agora.core.limits import MAX_ITEMS
from agora.core.uncertainty.policy import REFLECTION_PROMPT
from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import RunStatus, Tool
from agora.sdk.runner import AgentDefinition, AgentRunner, AgentState, ReactStep, RunnerConfig, StepCheck
from agora.sdk.tools import ToolExecutor

DBA = AgentDefinition(name="dba", instructions="You look after the database.")
TASK = "Clear out the 2019 orders"


class Ledger:
    """The world the agent's tool changes: the tables it deleted, in order."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

    def tools(self) -> ToolExecutor:
        def delete_records(table: str) -> str:
            """Delete every record of a table (cannot be undone)."""
            self.deleted.append(table)
            return f"deleted {table}"

        return ToolExecutor([Tool(delete_records)])


class Model:
    """The offline model answering `turns` in order; every conversation it was asked is kept."""

    def __init__(self, *turns: dict[str, Any]) -> None:
        self.asked: list[list[ChatMessage]] = []
        answers: Iterator[dict[str, Any]] = iter(turns)

        def next_turn(messages: Sequence[ChatMessage]) -> str:
            self.asked.append(list(messages))
            return json.dumps(next(answers))

        self.client = OfflineModelClient(overrides=next_turn)


def delete(table: str = "orders_2019", confidence: float = 0.7) -> dict[str, Any]:
    return {"thought": "clear it", "action": "tool", "tool": "delete_records",
            "arguments": {"table": table}, "confidence": confidence}  # fmt: skip


def final(answer: str = "done") -> dict[str, Any]:
    return {"thought": "done", "action": "final", "answer": answer, "confidence": 0.9}


class Gates:
    """A step monitor with a checkpoint and a tool gate: holds the tools named in `hold_tools`,
    ends the run before those in `abort_tools`, holds the steps numbered in `hold_steps`,
    flags the steps in `reflect_on` for reflection; knows the decisions in `decisions`. It
    keeps what it was asked, in order, with what the ledger held then."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        hold_tools: Collection[str] = (),
        abort_tools: Collection[str] = (),
        hold_steps: Collection[int] = (),
        reflect_on: dict[int, Literal["continue", "pause"]] | None = None,
    ) -> None:
        self.ledger = ledger
        self.hold_tools, self.abort_tools, self.hold_steps = hold_tools, abort_tools, hold_steps
        self.reflect_on = reflect_on or {}
        self.decisions: dict[str, CheckpointResponse | EscalationResponse] = {}
        self.asked: list[tuple[str, object, int]] = []
        """(what, its step or tool, how many deletions the ledger held when asked)."""
        self.requests: list[CheckpointRequest] = []

    async def check(self, state: AgentState, step: ReactStep) -> StepCheck:
        self.asked.append(("check", state.iterations, len(self.ledger.deleted)))
        action = self.reflect_on.get(state.iterations)
        if action is None:
            return StepCheck()
        escalation = f"{state.session_id}.{state.iterations}" if action == "pause" else None
        return StepCheck(action=action, escalation_id=escalation, reflection=REFLECTION_PROMPT)

    async def before_step(self, state: AgentState, request: CheckpointRequest) -> StepCheck:
        self.asked.append(("checkpoint", request.step, len(self.ledger.deleted)))
        self.requests.append(request)
        if request.step in self.hold_steps:
            escalation = f"{state.session_id}.checkpoint-{request.step}"
            return StepCheck(action="pause", escalation_id=escalation, reason="confirm the step")
        return StepCheck()

    async def before_tool(self, state: AgentState, step: ReactStep) -> StepCheck:
        self.asked.append(("tool", step.tool, len(self.ledger.deleted)))
        if step.tool in self.abort_tools:
            return StepCheck(action="abort", reason="critical uncertainty")
        if step.tool in self.hold_tools:
            escalation = f"{state.session_id}.tool-{state.iterations}"
            return StepCheck(
                action="pause", escalation_id=escalation, reason=f"confirm before tool {step.tool}"
            )
        return StepCheck()

    async def decision_on(
        self, session_id: str, escalation_id: str
    ) -> CheckpointResponse | EscalationResponse | None:
        return self.decisions.get(escalation_id)


def proceed() -> CheckpointResponse:
    return CheckpointResponse(action=CheckpointAction.PROCEED)


async def held_at_the_tool(ledger: Ledger, model: Model, gates: Gates) -> AgentRunner:
    runner = AgentRunner(model.client, ledger.tools(), monitor=gates)
    paused = await runner.run(DBA, TASK, session_id="s-1")
    assert paused.status is RunStatus.WAITING_FOR_HUMAN and paused.escalation_id == "s-1.tool-1"
    assert ledger.deleted == [], "held before the tool ran: no side effect yet"
    return runner


async def test_the_tool_gate_is_asked_with_the_tool_s_name_before_the_tool_runs() -> None:
    ledger = Ledger()
    gates = Gates(ledger)
    runner = AgentRunner(Model(delete(), final()).client, ledger.tools(), monitor=gates)

    result = await runner.run(DBA, TASK, session_id="s-1")

    assert result.status is RunStatus.COMPLETED and ledger.deleted == ["orders_2019"]
    assert gates.asked == [
        ("checkpoint", 1, 0), ("check", 1, 0), ("tool", "delete_records", 0),
        ("checkpoint", 2, 1), ("check", 2, 1),
    ]  # fmt: skip


async def test_a_held_tool_call_has_no_side_effect_until_a_person_lets_it_run() -> None:
    ledger = Ledger()
    model = Model(delete(), final())
    runner = await held_at_the_tool(ledger, model, Gates(ledger, hold_tools={"delete_records"}))
    saved = await runner.state_store.load("dba", "s-1")
    assert saved is not None and saved.held is not None and saved.held.tool_call is not None
    assert (saved.held.step, saved.held.tool_call.tool) == (1, "delete_records")

    resumed = await runner.resume("dba", "s-1", "Decision: proceed.", decision=proceed())

    assert ledger.deleted == ["orders_2019"], "proceed runs the held call itself"
    assert resumed.status is RunStatus.COMPLETED and [r.name for r in resumed.tool_results] == [
        "delete_records"
    ]
    assert "Result of tool delete_records: deleted orders_2019" in [m.content for m in model.asked[-1]]
    assert resumed.iterations == 2, "the held call ran without a model call of its own"


async def test_abort_ends_the_run_and_the_held_tool_never_runs() -> None:
    ledger = Ledger()
    model = Model(delete(), final())
    runner = await held_at_the_tool(ledger, model, Gates(ledger, hold_tools={"delete_records"}))

    ended = await runner.resume(
        "dba", "s-1", "Decision: abort.", decision=CheckpointResponse(action=CheckpointAction.ABORT)
    )

    assert ledger.deleted == [] and len(model.asked) == 1, "no tool, no further model call"
    assert (
        ended.status is RunStatus.FAILED and ended.reason == "aborted by a person before tool delete_records"
    )


async def test_a_tool_the_monitor_ends_the_run_before_never_runs() -> None:
    ledger = Ledger()
    runner = AgentRunner(
        Model(delete(), final()).client, ledger.tools(), monitor=Gates(ledger, abort_tools={"delete_records"})
    )
    ended = await runner.run(DBA, TASK, session_id="s-1")
    assert (
        ended.status is RunStatus.FAILED and ended.reason == "critical uncertainty" and ledger.deleted == []
    )


async def test_skip_leaves_the_held_call_out_and_the_run_goes_on() -> None:
    ledger = Ledger()
    model = Model(delete(), final("left the table alone"))
    runner = await held_at_the_tool(ledger, model, Gates(ledger, hold_tools={"delete_records"}))

    resumed = await runner.resume(
        "dba", "s-1", "Decision: skip.", decision=CheckpointResponse(action=CheckpointAction.SKIP)
    )

    assert ledger.deleted == [] and resumed.status is RunStatus.COMPLETED
    assert resumed.output == "left the table alone"
    told = [m.content for m in model.asked[-1]]
    assert "The call of tool delete_records did not run: a person skipped it." in told


async def test_modify_prompt_keeps_the_call_from_running_and_the_next_model_call_has_the_new_prompt() -> None:
    ledger = Ledger()
    model = Model(delete(), final("archived instead"))
    runner = await held_at_the_tool(ledger, model, Gates(ledger, hold_tools={"delete_records"}))
    decision = CheckpointResponse(
        action=CheckpointAction.MODIFY_PROMPT, modified_prompt="Archive them instead"
    )

    resumed = await runner.resume("dba", "s-1", "Decision: modify_prompt.", decision=decision)

    assert ledger.deleted == [] and resumed.output == "archived instead"
    told = [m.content for m in model.asked[-1]]
    assert "Use this prompt instead:\nArchive them instead" in told
    assert "The call of tool delete_records did not run: a person gave a new prompt instead." in told


async def test_resumed_with_text_only_the_held_call_goes_as_the_monitor_says_it_was_decided() -> None:
    ledger = Ledger()
    gates = Gates(ledger, hold_tools={"delete_records"})
    runner = await held_at_the_tool(ledger, Model(delete(), final()), gates)
    gates.decisions["s-1.tool-1"] = EscalationResponse(action=EscalationAction.RETRY)

    await runner.resume("dba", "s-1", "Decision: retry.")

    assert ledger.deleted == ["orders_2019"]


async def test_resumed_with_text_only_and_no_known_decision_the_held_call_does_not_run() -> None:
    ledger = Ledger()
    model = Model(delete(), final("waiting for a go-ahead"))
    runner = await held_at_the_tool(ledger, model, Gates(ledger, hold_tools={"delete_records"}))

    resumed = await runner.resume("dba", "s-1", "looks fine to me")

    assert ledger.deleted == [] and resumed.status is RunStatus.COMPLETED
    assert "The call of tool delete_records did not run: no person said it may run." in [
        m.content for m in model.asked[-1]
    ]


async def test_the_reflection_prompt_of_a_doubted_step_is_in_the_next_model_call_after_the_pause() -> None:
    ledger = Ledger()
    model = Model(delete(confidence=0.3), final())
    runner = AgentRunner(model.client, ledger.tools(), monitor=Gates(ledger, reflect_on={1: "pause"}))

    paused = await runner.run(DBA, TASK, session_id="s-1")
    assert paused.status is RunStatus.WAITING_FOR_HUMAN and REFLECTION_PROMPT not in str(model.asked[0])
    await runner.resume("dba", "s-1", "Decision: retry.")

    reflection = ChatMessage(role="system", content=REFLECTION_PROMPT)
    assert reflection in model.asked[1]
    assert model.asked[1].index(reflection) < len(model.asked[1]) - 1, "before the person's answer"


async def test_a_reflection_without_a_pause_is_in_the_next_model_call() -> None:
    ledger = Ledger()
    model = Model(delete(), final())
    runner = AgentRunner(model.client, ledger.tools(), monitor=Gates(ledger, reflect_on={1: "continue"}))
    await runner.run(DBA, TASK, session_id="s-1")
    assert ChatMessage(role="system", content=REFLECTION_PROMPT) in model.asked[1]


async def test_a_checkpoint_holds_its_step_before_the_step_s_model_call() -> None:
    ledger = Ledger()
    model = Model(delete(), final())
    gates = Gates(ledger, hold_steps={2})
    runner = AgentRunner(model.client, ledger.tools(), monitor=gates)

    paused = await runner.run(DBA, TASK, session_id="s-1")

    assert paused.status is RunStatus.WAITING_FOR_HUMAN and paused.escalation_id == "s-1.checkpoint-2"
    assert len(model.asked) == 1 and paused.iterations == 1, "step 2's model call was not made"
    saved = await runner.state_store.load("dba", "s-1")
    assert (
        saved is not None and saved.held is not None and (saved.held.step, saved.held.tool_call) == (2, None)
    )

    resumed = await runner.resume("dba", "s-1", "Decision: proceed.", decision=proceed())

    assert resumed.status is RunStatus.COMPLETED and len(model.asked) == 2
    assert [a for a in gates.asked if a[0] == "checkpoint"] == [("checkpoint", 1, 0), ("checkpoint", 2, 1)], (
        "a step a person let run is not checked again"
    )


async def test_a_checkpoint_on_the_first_step_holds_the_run_before_any_model_call_and_abort_ends_it() -> None:
    ledger = Ledger()
    model = Model(delete(), final())
    runner = AgentRunner(model.client, ledger.tools(), monitor=Gates(ledger, hold_steps={1}))

    paused = await runner.run(DBA, TASK, session_id="s-1")
    assert paused.status is RunStatus.WAITING_FOR_HUMAN and model.asked == []
    ended = await runner.resume(
        "dba", "s-1", "Decision: abort.", decision=CheckpointResponse(action=CheckpointAction.ABORT)
    )

    assert ended.status is RunStatus.FAILED and ended.reason == "aborted by a person before step 1"
    assert model.asked == [] and ledger.deleted == []


async def test_a_skipped_step_is_not_run_and_the_run_goes_on_with_the_next() -> None:
    ledger = Ledger()
    model = Model(final("nothing deleted"))
    gates = Gates(ledger, hold_steps={1})
    runner = AgentRunner(model.client, ledger.tools(), monitor=gates)
    await runner.run(DBA, TASK, session_id="s-1")

    resumed = await runner.resume(
        "dba", "s-1", "Decision: skip.", decision=CheckpointResponse(action=CheckpointAction.SKIP)
    )

    assert resumed.status is RunStatus.COMPLETED and len(model.asked) == 1
    assert "A person skipped step 1; go on with the next step." in [m.content for m in model.asked[0]]
    assert [a[1] for a in gates.asked if a[0] == "checkpoint"] == [1, 2], "the next step is checked in turn"


async def test_modify_prompt_at_a_checkpoint_runs_the_step_with_the_new_prompt() -> None:
    ledger = Ledger()
    model = Model(final("archived"))
    runner = AgentRunner(model.client, ledger.tools(), monitor=Gates(ledger, hold_steps={1}))
    await runner.run(DBA, TASK, session_id="s-1")
    decision = CheckpointResponse(action=CheckpointAction.MODIFY_PROMPT, modified_prompt="Archive them")

    resumed = await runner.resume("dba", "s-1", "Decision: modify_prompt.", decision=decision)

    assert (
        resumed.output == "archived"
        and model.asked[0][-1].content == "Use this prompt instead:\nArchive them"
    )


async def test_a_checkpoint_request_carries_the_runner_s_and_the_run_s_triggers_and_the_step_s_prompt() -> (
    None
):
    ledger = Ledger()
    gates = Gates(ledger)
    runner_wide = CheckpointTrigger(name="drops", prompt_contains=["drop"])
    for_task = CheckpointTrigger(name="step-3", steps=[3])
    runner = AgentRunner(
        Model(final()).client, ledger.tools(), monitor=gates, config=RunnerConfig(checkpoints=[runner_wide])
    )

    await runner.run(DBA, TASK, session_id="s-1", checkpoints=[for_task])

    (request,) = gates.requests
    assert request.triggers == [runner_wide, for_task]
    assert (request.step, request.prompt, request.retry_count) == (1, TASK, 0)


class Escalations:
    def __init__(self) -> None:
        self.parked: dict[str, ParkRequest] = {}

    async def park(self, escalation_id: str, request: ParkRequest) -> None:
        self.parked[escalation_id] = request


async def test_without_a_monitor_the_runner_s_own_trigger_parks_the_step_with_the_escalator() -> None:
    model = Model(final())
    escalations = Escalations()
    trigger = CheckpointTrigger(name="orders", prompt_contains=["ORDERS"], message="Orders are precious")
    runner = AgentRunner(model.client, escalator=escalations, config=RunnerConfig(checkpoints=[trigger]))

    paused = await runner.run(DBA, TASK, session_id="s-1")

    assert paused.status is RunStatus.WAITING_FOR_HUMAN and paused.escalation_id == "s-1.checkpoint-1"
    assert model.asked == []
    context = escalations.parked["s-1.checkpoint-1"].context
    assert isinstance(context, CheckpointContext) and context.trigger == trigger and context.prompt == TASK
    resumed = await runner.resume("dba", "s-1", "Decision: proceed.")
    assert resumed.status is RunStatus.COMPLETED, "a held step whose decision is unknown runs"


async def test_a_step_that_needs_a_confirmation_nobody_can_give_does_not_run() -> None:
    model = Model(final())
    trigger = CheckpointTrigger(name="orders", prompt_contains=["orders"])
    runner = AgentRunner(model.client, config=RunnerConfig(checkpoints=[trigger]))

    ended = await runner.run(DBA, TASK, session_id="s-1")

    assert ended.status is RunStatus.FAILED and model.asked == []
    assert "this runner has no escalator" in ended.reason


async def test_a_warn_only_trigger_lets_the_step_run() -> None:
    model = Model(final())
    trigger = CheckpointTrigger(name="orders", prompt_contains=["orders"], requires_confirmation=False)
    runner = AgentRunner(model.client, config=RunnerConfig(checkpoints=[trigger]))
    assert (await runner.run(DBA, TASK, session_id="s-1")).status is RunStatus.COMPLETED


async def test_more_triggers_than_a_checkpoint_request_holds_are_refused() -> None:
    runner_wide = [CheckpointTrigger(name=f"t{i}") for i in range(MAX_ITEMS)]
    runner = AgentRunner(Model().client, config=RunnerConfig(checkpoints=runner_wide))
    with pytest.raises(InvalidArgument) as refused:
        await runner.run(DBA, TASK, session_id="s-1", checkpoints=[CheckpointTrigger(name="one-more")])
    assert refused.value.code == "INVALID_ARGUMENT"
