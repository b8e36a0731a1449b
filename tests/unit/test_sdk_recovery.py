"""The runner recovers failed attempts as the escalation ladder says (retry, the agent's own
analysis, a person, abort), with failure triage reading each attempt's steps; and it learns
from its runs: their outcomes are kept, and the patterns they show go into later prompts."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from agora.core.escalation.context import EscalationContext
from agora.core.escalation.ladder import EscalationConfig
from agora.core.escalation.record import ParkRequest, WaitingPartyKind
from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import RunStatus, tool
from agora.sdk.runner import (
    AgentDefinition,
    AgentRunner,
    InMemoryOutcomeHistory,
    RecoveryPolicy,
    RunnerConfig,
)
from agora.sdk.tools import ToolExecutor

AGENT = AgentDefinition(name="calc")
ONLY_A_PERSON = RecoveryPolicy(
    ladder=EscalationConfig(retry_limit=1, agent_analysis_attempts=0, notify_attempts=0)
)
"""The first failed attempt goes to a person."""


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def scripted(*turns: dict[str, Any]) -> OfflineModelClient:
    answers: Iterator[dict[str, Any]] = iter(turns)

    def next_turn(_: Sequence[ChatMessage]) -> str:
        return json.dumps(next(answers))

    return OfflineModelClient(overrides=next_turn)


def give_up(confidence: float = 0.9) -> dict[str, Any]:
    return {"thought": "I cannot", "action": "final", "answer": "no luck", "succeeded": False,
            "confidence": confidence}  # fmt: skip


def final(answer: str) -> dict[str, Any]:
    return {"thought": "done", "action": "final", "answer": answer, "confidence": 0.9}


def call_add() -> dict[str, Any]:
    return {
        "thought": "add",
        "action": "tool",
        "tool": "add",
        "arguments": {"a": 2, "b": 3},
        "confidence": 0.9,
    }


class RecordingEscalator:
    def __init__(self) -> None:
        self.parked: list[tuple[str, ParkRequest]] = []

    async def park(self, escalation_id: str, request: ParkRequest) -> None:
        self.parked.append((escalation_id, request))


async def test_without_a_recovery_policy_a_run_the_agent_gave_up_on_ends_failed() -> None:
    result = await AgentRunner(scripted(give_up())).run(AGENT, "2 + 3?", session_id="s-1")

    assert result.status is RunStatus.FAILED and result.reason == "the agent gave up: no luck"
    assert result.failed_attempts == 0


async def test_a_failed_attempt_is_tried_again_and_the_next_one_can_succeed() -> None:
    runner = AgentRunner(scripted(give_up(), final("5")), recovery=RecoveryPolicy())

    result = await runner.run(AGENT, "2 + 3?", session_id="s-1")

    assert result.status is RunStatus.COMPLETED and result.output == "5"
    assert result.failed_attempts == 1
    assert any(m.role == "user" and m.content.startswith("Attempt 1 failed (") for m in result.messages)


async def test_the_third_failure_has_the_agent_analyse_it_before_the_fourth_attempt() -> None:
    analysis = {"cause": "I stopped too early", "next_approach": "call the add tool"}
    runner = AgentRunner(
        scripted(give_up(), give_up(), give_up(), analysis, final("5")), recovery=RecoveryPolicy()
    )

    result = await runner.run(AGENT, "2 + 3?", session_id="s-1")

    assert result.status is RunStatus.COMPLETED and result.failed_attempts == 3
    told = [m.content for m in result.messages if m.role == "user"][-1]
    assert told.startswith("Attempt 3 failed (")
    assert told.endswith("Your analysis: I stopped too early Next approach: call the add tool")
    assert result.iterations == 4, "the analysis is not a step of an attempt"


async def test_running_out_of_iterations_is_a_failed_attempt_that_gets_a_fresh_budget() -> None:
    runner = AgentRunner(
        scripted(call_add(), call_add(), final("5")),
        ToolExecutor([add]),
        config=RunnerConfig(max_iterations=2),
        recovery=RecoveryPolicy(),
    )

    result = await runner.run(AGENT, "2 + 3?", session_id="s-1")

    assert result.status is RunStatus.COMPLETED and result.failed_attempts == 1 and result.iterations == 3


async def test_a_run_recovery_cannot_fix_waits_for_a_person_and_goes_on_after_the_answer() -> None:
    escalator = RecordingEscalator()
    runner = AgentRunner(scripted(give_up(), final("5")), recovery=ONLY_A_PERSON, escalator=escalator)

    paused = await runner.run(AGENT, "2 + 3?", session_id="s-1")

    assert paused.status is RunStatus.WAITING_FOR_HUMAN and paused.escalation_id == "s-1.attempt-1"
    [(escalation_id, request)] = escalator.parked
    assert escalation_id == "s-1.attempt-1"
    assert request.waiting_party.kind is WaitingPartyKind.SESSION and request.waiting_party.id == "s-1"
    assert isinstance(request.context, EscalationContext) and request.context.prompt_used == "2 + 3?"
    assert request.who == "agent:calc"

    resumed = await runner.resume("calc", "s-1", "Use the add tool")
    assert resumed.status is RunStatus.COMPLETED and resumed.output == "5"


async def test_without_an_escalator_a_run_that_needs_a_person_ends_failed_saying_so() -> None:
    runner = AgentRunner(scripted(give_up()), recovery=ONLY_A_PERSON)

    result = await runner.run(AGENT, "2 + 3?", session_id="s-1")

    assert result.status is RunStatus.FAILED
    assert result.reason.endswith("A person would decide next; this runner has no escalator.")


async def test_the_ladder_s_last_rung_aborts_the_run() -> None:
    runner = AgentRunner(
        scripted(give_up()), recovery=RecoveryPolicy(ladder=EscalationConfig(max_attempts=1))
    )

    result = await runner.run(AGENT, "2 + 3?", session_id="s-1")

    assert result.status is RunStatus.FAILED and result.reason.startswith("aborted after 1 failed attempts (")


async def test_the_runner_learns_from_its_runs_and_tells_later_runs_what_they_showed() -> None:
    history = InMemoryOutcomeHistory()
    runner = AgentRunner(
        OfflineModelClient(overrides=lambda _: json.dumps(give_up())),
        recovery=RecoveryPolicy(ladder=EscalationConfig(max_attempts=2)),
        outcomes=history,
    )

    for n in range(6):
        last = await runner.run(AGENT, "Summarise the report", session_id=f"s-{n}")

    assert "Lessons from earlier runs of similar work:" in last.messages[0].content
    kept = await history.outcomes("calc")
    assert [o.job_id for o in kept] == [f"s-{n}" for n in range(6)]
    assert all(o.final_status == "aborted" and o.retry_count == 2 for o in kept)
    report = await runner.learning("calc")
    assert report.outcomes == 6 and report.patterns and report.effectiveness


async def test_learning_can_be_turned_off() -> None:
    history = InMemoryOutcomeHistory()
    runner = AgentRunner(
        scripted(final("5")), config=RunnerConfig(learn_from_outcomes=False), outcomes=history
    )

    await runner.run(AGENT, "2 + 3?", session_id="s-1")

    assert await history.outcomes("calc") == []
