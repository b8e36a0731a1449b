"""The agent loop with the offline model scripted turn by turn: tool calls, the iteration limit,
one-shot answers, a pause for a person and its resumption, and the budget."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from agora.core.errors import NoStateFound
from agora.core.escalation.record import AgentNotWaiting
from agora.core.topics import Channel
from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import (
    BudgetExceeded,
    MaxIterationsExceeded,
    ModelRouter,
    ModelSpec,
    ModelTier,
    RunStatus,
    tool,
)
from agora.sdk.runner import AgentDefinition, AgentRunner, AgentState, ReactStep, RunnerConfig, StepCheck
from agora.sdk.tools import ToolExecutor

CALC = AgentDefinition(name="calc", instructions="You do arithmetic.")


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def scripted(*turns: dict[str, Any] | str) -> OfflineModelClient:
    """The offline model answering `turns` in order, one per call."""
    answers: Iterator[dict[str, Any] | str] = iter(turns)

    def next_turn(_: Sequence[ChatMessage]) -> str | None:
        turn = next(answers)
        return turn if isinstance(turn, str) else json.dumps(turn)

    return OfflineModelClient(overrides=next_turn)


def call_add(a: float, b: float) -> dict[str, Any]:
    return {"thought": "add them", "action": "tool", "tool": "add", "arguments": {"a": a, "b": b}}


def final(answer: str, confidence: float = 0.9) -> dict[str, Any]:
    return {"thought": "done", "action": "final", "answer": answer, "confidence": confidence}


async def test_the_model_calls_a_tool_reads_its_result_and_answers() -> None:
    model = scripted(call_add(2, 3), final("5"))
    runner = AgentRunner(model, ToolExecutor([add]))

    result = await runner.run(CALC, "What is 2 + 3?", session_id="s-1")

    assert result.status is RunStatus.COMPLETED and result.output == "5"
    assert [(r.name, r.output) for r in result.tool_results] == [("add", "5.0")]
    assert result.messages[-2].content == "Result of tool add: 5.0"
    assert result.iterations == 2 and result.input_tokens > 0 and result.output_tokens > 0
    assert "add: Add two numbers." in result.messages[0].content  # the tool catalogue


async def test_a_tool_s_error_goes_back_to_the_model_and_the_run_goes_on() -> None:
    model = scripted({**call_add(2, 3), "tool": "multiply"}, final("I could not multiply"))
    result = await AgentRunner(model, ToolExecutor([add])).run(CALC, "2 * 3?", session_id="s-1")
    assert result.status is RunStatus.COMPLETED
    assert result.tool_results[0].error is not None and "UnknownTool" in result.tool_results[0].error


async def test_an_answer_that_is_not_a_step_is_asked_again() -> None:
    model = scripted("I think it is five", final("5"))
    result = await AgentRunner(model, ToolExecutor([add])).run(CALC, "2 + 3?", session_id="s-1")
    assert result.output == "5" and "not one JSON object" in result.messages[3].content


async def test_no_final_answer_within_the_limit_raises_max_iterations_exceeded_and_saves_the_run_failed() -> (
    None
):
    model = scripted(*[call_add(1, 1)] * 3)
    runner = AgentRunner(model, ToolExecutor([add]), config=RunnerConfig(max_iterations=3))
    with pytest.raises(MaxIterationsExceeded) as stopped:
        await runner.run(CALC, "loop", session_id="s-1")
    assert stopped.value.code == "MAX_ITERATIONS_EXCEEDED"
    saved = await runner.state_store.load("calc", "s-1")
    assert saved is not None and saved.status is RunStatus.FAILED and saved.iterations == 3
    assert "MaxIterationsExceeded" in saved.reason


async def test_one_shot_answers_in_one_call_without_tools() -> None:
    model = scripted("plain text answer")
    runner = AgentRunner(model, ToolExecutor([add]), config=RunnerConfig(react_pattern=False))
    result = await runner.run(CALC, "hi", session_id="s-1")
    assert (result.status, result.output, result.iterations) == (RunStatus.COMPLETED, "plain text answer", 1)
    assert "Tools you can call" not in result.messages[0].content


class PauseOnLowConfidence:
    """A step monitor that pauses a step below 0.5 confidence, once."""

    def __init__(self) -> None:
        self.paused = 0

    async def check(self, state: AgentState, step: ReactStep) -> StepCheck:
        if step.confidence < 0.5 and not self.paused:
            self.paused += 1
            return StepCheck(action="pause", escalation_id=f"{state.session_id}.1", reason="not sure")
        return StepCheck()


async def test_a_paused_run_waits_for_a_person_and_resume_continues_it() -> None:
    model = scripted(final("maybe 6", confidence=0.2), final("5"))
    runner = AgentRunner(model, ToolExecutor([add]), monitor=PauseOnLowConfidence())

    paused = await runner.run(CALC, "2 + 3?", session_id="s-1")
    assert paused.status is RunStatus.WAITING_FOR_HUMAN and paused.escalation_id == "s-1.1"

    resumed = await runner.resume("calc", "s-1", "It is 5, check again")
    assert resumed.status is RunStatus.COMPLETED and resumed.output == "5"
    assert any(m.content == "A person answered: It is 5, check again" for m in resumed.messages)
    assert resumed.iterations == 2, "the count goes on from where the run paused"


async def test_resume_refuses_an_unknown_run_and_one_that_is_not_waiting() -> None:
    runner = AgentRunner(scripted(final("5")), ToolExecutor([add]))
    with pytest.raises(NoStateFound) as unknown:
        await runner.resume("calc", "nope", "hi")
    assert unknown.value.code == "NO_STATE_FOUND" and unknown.value.http_status == 404
    await runner.run(CALC, "2 + 3?", session_id="s-1")
    with pytest.raises(AgentNotWaiting) as refused:
        await runner.resume("calc", "s-1", "hi")
    assert refused.value.code == "AGENT_NOT_WAITING"


class CostEvents:
    def __init__(self) -> None:
        self.sent: list[str] = []

    async def publish(self, channel: Channel[Any], payload: Any, *, message_id: str | None = None) -> str:
        self.sent.append(channel.name)
        return ""


async def test_the_budget_stops_the_run_after_the_call_that_passed_it_was_announced() -> None:
    priced = ModelSpec(model_id="priced", tier=ModelTier.BALANCED, input_usd_per_1k=1000.0)
    model = ModelRouter([priced], {"priced": scripted(call_add(1, 2), final("3"))})
    events = CostEvents()
    runner = AgentRunner(model, ToolExecutor([add]), cost_publisher=events)

    with pytest.raises(BudgetExceeded):
        await runner.run(CALC, "1 + 2?", session_id="s-1", budget_usd=0.01)

    assert events.sent == ["agora.cost.events"]
    saved = await runner.state_store.load("calc", "s-1")
    assert saved is not None and saved.status is RunStatus.FAILED and "BudgetExceeded" in saved.reason
    assert saved.cost_usd > 0.01
