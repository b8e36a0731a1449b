"""The debate's workflow, run without Dapr: the steps it takes in order, what each save holds,
and that a run begun before its end was one save keeps the order its history recorded."""

from __future__ import annotations

from typing import Any

from agora.core.debate.config import DebateConfig, DebaterConfig
from agora.core.debate.record import DebateRecord, DebateState
from agora.core.debate.request import DebateRequest
from agora.core.debate.rounds import Position
from agora.debate.workflow import Activity, Answer, DebateStart, SaveDebate, debate_run
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


def answers(step: Scheduled) -> Any:
    """Debaters that never agree; every other step has nothing to return."""
    if step.name == Activity.ANSWER:
        asked: Answer = step.argument
        return Position(
            debater_id=asked.debater.debater_id, answer=SPLIT[asked.debater.debater_id], confidence=0.6
        )
    return None


def names(ctx: ScriptedContext) -> list[list[str]]:
    return [[s.name for s in wait] for wait in ctx.waits]


def test_a_debate_that_ends_without_a_person_saves_its_answer_and_its_end_in_one_step() -> None:
    ctx = ScriptedContext(answers)
    ctx.run(debate_run, start())

    asked, save = [Activity.ANSWER] * 3, [Activity.SAVE]
    assert names(ctx) == [save, asked, save, asked, save, asked, save, save, [Activity.ANNOUNCE]]
    saves: list[SaveDebate] = ctx.activities(Activity.SAVE)
    assert [len(s.record.rounds) for s in saves] == [0, 1, 2, 3, 3]
    assert [s.record.revision for s in saves] == [1, 2, 3, 4, 5]
    final: DebateRecord = saves[-1].record
    assert final.state is DebateState.COMPLETED and final.result is not None
    assert final.result.total_rounds_run == 3
    assert saves[-1].previous_state is DebateState.RUNNING
    spans = [[span.name for span in s.finished] for s in saves]
    assert spans == [
        [],
        ["debate.round"],
        ["debate.round"],
        ["debate.round"],
        ["debate.aggregate", "debate.run"],
    ]


def test_a_run_begun_before_replays_the_two_saves_its_history_recorded() -> None:
    ctx = ScriptedContext(answers, patched=False)
    ctx.run(debate_run, start())

    asked = [Activity.ANSWER] * 3
    save, announce = [Activity.SAVE], [Activity.ANNOUNCE]
    assert names(ctx) == [save, asked, save, asked, save, asked, save, save, save, announce]
    spans = [span.name for s in ctx.activities(Activity.SAVE) for span in s.finished]
    assert spans == ["debate.round", "debate.round", "debate.round", "debate.aggregate", "debate.run"]
