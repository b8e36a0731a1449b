"""The debate's workflow, run without Dapr: the steps it takes, what each save holds, and that a
run begun before rounds were one step keeps the steps its history recorded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agora.core.debate.config import DebateConfig, DebaterConfig
from agora.core.debate.record import DebateDecision, DebateRecord, DebateState, new_debate_record
from agora.core.debate.request import DebateRequest
from agora.core.debate.rounds import Position
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.debate.activities import ANSWER_RETENTION_SECONDS, DebateActivities
from agora.debate.workflow import (
    ANNOUNCE,
    ANSWER,
    ROUND,
    ROUTE,
    SAVE,
    STOP,
    Answer,
    AskRound,
    DebateStart,
    RoundAnswers,
    SaveDebate,
    Stopped,
    debate_run,
)
from agora.runtime.batched_writes import BatchedWrites
from agora.runtime.sidecar import SidecarUnavailable
from agora.sdk.testing import MemoryRepository
from tests.unit.workflow_replay import Scheduled, ScriptedContext

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SPLIT = {"d0": "eu-west", "d1": "us-east", "d2": "ap-south"}


def start(rounds: int = 3) -> DebateStart:
    config = DebateConfig(
        debaters=[DebaterConfig(debater_id=d) for d in SPLIT],
        max_rounds=rounds,
        adaptive_routing=False,
        escalate_threshold=0.0,
    )
    request = DebateRequest(debate_id="debate-1", question="Which region?", config=config)
    return DebateStart(request=request, traceparent=TRACE)


def position(debater_id: str) -> Position:
    return Position(debater_id=debater_id, answer=SPLIT[debater_id], confidence=0.6)


def answers(step: Scheduled) -> Any:
    """Debaters that never agree; every other step has nothing to return."""
    if step.name == ANSWER.name:
        asked: Answer = step.argument
        return position(asked.debater.debater_id)
    if step.name == ROUND.name:
        round_asked: AskRound = step.argument
        return RoundAnswers(positions=[position(d.debater_id) for d in round_asked.debaters])
    return None


def names(ctx: ScriptedContext) -> list[list[str]]:
    return [[s.name for s in wait] for wait in ctx.waits]


def test_a_round_is_one_step_that_carries_the_save_before_it_and_the_end_is_saved_once() -> None:
    ctx = ScriptedContext(answers)
    ctx.run(debate_run, start())

    assert names(ctx) == [
        [ROUND.name],  # carries the new record's save
        [ROUND.name],  # carries round 1's
        [ROUND.name],  # carries round 2's
        [SAVE.name],  # round 3, the answer and the run's end, in one save
        [ANNOUNCE.name],
    ]
    asked: list[AskRound] = ctx.activities(ROUND.name)
    assert [a.round_number for a in asked] == [1, 2, 3] and all(a.earlier == 0 for a in asked)
    assert [len(a.previous.positions) if a.previous else 0 for a in asked] == [0, 3, 3]
    saves = [a.save for a in asked if a.save is not None] + ctx.activities(SAVE.name)
    assert [len(s.record.rounds) for s in saves] == [0, 1, 2, 3]
    assert [s.record.revision for s in saves] == [1, 2, 3, 4]
    assert [s.previous_state for s in saves] == [
        None,
        DebateState.RUNNING,
        DebateState.RUNNING,
        DebateState.RUNNING,
    ]
    final: DebateRecord = saves[-1].record
    assert final.state is DebateState.COMPLETED and final.result is not None
    assert final.result.total_rounds_run == 3
    spans = [[span.name for span in s.finished] for s in saves]
    assert spans == [
        [],
        ["debate.round"],
        ["debate.round"],
        ["debate.round", "debate.aggregate", "debate.run"],
    ]


def test_a_run_begun_before_replays_an_answer_a_step_and_a_save_after_each_round() -> None:
    ctx = ScriptedContext(answers, patched=False)
    ctx.run(debate_run, start())

    asked = [ANSWER.name] * 3
    save, announce = [SAVE.name], [ANNOUNCE.name]
    assert names(ctx) == [save, asked, save, asked, save, asked, save, save, save, announce]
    spans = [span.name for s in ctx.activities(SAVE.name) for span in s.finished]
    assert spans == ["debate.round", "debate.round", "debate.round", "debate.aggregate", "debate.run"]


async def test_a_round_that_runs_again_asks_only_the_debaters_whose_answer_was_not_kept() -> None:
    answers_kept = MemoryRepository(Position)
    records = MemoryRepository(SaveDebate)
    asked: list[str] = []
    activities = DebateActivities(
        model_for=lambda _: None,  # type: ignore[arg-type,return-value]
        publisher=None,  # type: ignore[arg-type]
        records=None,  # type: ignore[arg-type]
        escalations=None,  # type: ignore[arg-type]
        calibration=None,  # type: ignore[arg-type]
        answers=answers_kept.typed(),
        answer_writes=BatchedWrites(answers_kept.typed()),
    )

    async def answer(step: Answer) -> Position:
        asked.append(step.debater.debater_id)
        if step.debater.debater_id == "d2" and len(asked) <= 3:
            raise SidecarUnavailable("the model's host went away mid-round")
        return position(step.debater.debater_id)

    async def save(step: SaveDebate) -> None:
        await records.save("debate-1", step)

    activities.answer = answer  # type: ignore[method-assign]
    activities.save = save  # type: ignore[method-assign]
    config = start().request.config
    record = new_debate_record(start().request, ScriptedContext.now)
    round_two = AskRound(
        debate_id="debate-1",
        earlier=0,
        round_number=2,
        question="Which region?",
        debaters=config.debaters,
        previous=None,
        traceparent=TRACE,
        save=SaveDebate(record=record),
    )

    with pytest.raises(SidecarUnavailable):
        await activities.ask_round(round_two)
    await asyncio.sleep(0.01)  # the answers that came are kept as they come
    assert sorted(asked) == ["d0", "d1", "d2"]
    assert sorted(answers_kept.values) == ["debate-1|0|2|d0", "debate-1|0|2|d1"]

    again = await activities.ask_round(round_two)
    assert sorted(asked) == ["d0", "d1", "d2", "d2"], "only the debater with no kept answer is asked again"
    assert [p.debater_id for p in again.positions] == ["d0", "d1", "d2"]
    assert answers_kept.ttls["debate-1|0|2|d2"] == ANSWER_RETENTION_SECONDS
    assert "debate-1" in records.values, "the record as it stood before the round is saved with it"


def routed_start(confidence: float, threshold: float = 0.5) -> tuple[DebateStart, Any]:
    """A debate whose router answers at `confidence` (above the routing threshold), its
    debaters never agreeing."""
    config = DebateConfig(
        debaters=[DebaterConfig(debater_id=d) for d in SPLIT],
        max_rounds=1,
        routing_confidence_threshold=0.85,
        escalate_threshold=threshold,
    )
    request = DebateRequest(
        debate_id="debate-1", question="Which region?", config=config, options=list(SPLIT.values())
    )

    def answering(step: Scheduled) -> Any:
        if step.name == ROUTE.name:
            return Position(debater_id="d0", answer="eu-west", confidence=confidence)
        if step.name == STOP.name:  # a split debate waits for a person, who ends it
            return Stopped(escalation_id="e1")
        if step.kind == "event":
            abort = EscalationResponse(action=EscalationAction.ABORT)
            return DebateDecision(escalation_id="e1", response=abort, decided_by="pat").model_dump(
                mode="json"
            )
        return answers(step)

    return DebateStart(request=request, traceparent=TRACE), answering


def test_a_confident_router_s_calibrated_answer_is_acted_on_and_one_below_the_gate_is_debated() -> None:
    """One voice is not agreement: the router's 0.95 is 0.71 calibrated, through the gate at
    0.5 and acted on; with the gate at 0.8 the question is debated instead."""
    begun, answering = routed_start(0.95)
    ctx = ScriptedContext(answering)
    ctx.run(debate_run, begun)
    final: DebateRecord = ctx.activities(SAVE.name)[-1].record
    assert final.routing_decision == "single_agent" and final.final_answer == "eu-west"
    assert final.result is not None and final.result.confidence == pytest.approx(0.95 * 0.75)
    assert ctx.activities(ROUND.name) == [], "not debated"

    begun, answering = routed_start(0.95, threshold=0.8)
    ctx = ScriptedContext(answering)
    ctx.run(debate_run, begun)
    asked: list[AskRound] = ctx.activities(ROUND.name)
    assert len(asked) == 1 and asked[0].options == list(SPLIT.values()), "debated, with its options"
    assert ctx.activities(ROUTE.name)[0].options == list(SPLIT.values())


def test_a_run_begun_before_the_single_agent_was_gated_acts_on_the_router_at_once() -> None:
    begun, answering = routed_start(0.95, threshold=0.8)
    ctx = ScriptedContext(answering, patched=False)
    ctx.run(debate_run, begun)
    final: DebateRecord = ctx.activities(SAVE.name)[-1].record
    assert final.routing_decision == "single_agent" and final.result is not None
    assert final.result.confidence == 0.95
