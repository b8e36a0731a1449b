"""The debate's workflow, run without Dapr: which steps go side by side, what each save holds,
and that a run begun before the saves rode along keeps the order its history recorded."""

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


def test_each_save_goes_side_by_side_with_the_next_round_s_answers_and_the_end_is_saved_once() -> None:
    ctx = ScriptedContext(answers)
    ctx.run(debate_run, start())

    asked = [Activity.ANSWER] * 3
    assert names(ctx) == [
        [*asked, Activity.SAVE],  # the new record with round 1
        [*asked, Activity.SAVE],  # round 1 with round 2
        [*asked, Activity.SAVE],  # round 2 with round 3
        [Activity.SAVE],  # round 3, the answer and the run's end, in one save
        [Activity.ANNOUNCE],
    ]
    saves: list[SaveDebate] = ctx.activities(Activity.SAVE)
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
    spans = [span.name for s in saves for span in s.finished]
    assert spans == ["debate.round", "debate.round", "debate.round", "debate.aggregate", "debate.run"]
    finished = [span for s in saves for span in s.finished]
    assert [span.attributes["agora.round"] for span in finished if span.name == "debate.round"] == [1, 2, 3]


def test_a_run_begun_before_the_saves_rode_along_replays_its_recorded_order() -> None:
    ctx = ScriptedContext(answers, patched=False)
    ctx.run(debate_run, start())

    asked = [Activity.ANSWER] * 3
    save, announce = [Activity.SAVE], [Activity.ANNOUNCE]
    assert names(ctx) == [save, asked, save, asked, save, asked, save, save, save, announce]
    spans = [span.name for s in ctx.activities(Activity.SAVE) for span in s.finished]
    assert spans == ["debate.round", "debate.round", "debate.round", "debate.aggregate", "debate.run"]
