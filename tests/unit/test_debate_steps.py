"""The debate's model calls on the offline model (as debaters, router and judge) and on
scripted answers."""

from __future__ import annotations

import json

from agora.core.debate.config import DebaterConfig
from agora.core.debate.rounds import DebateRound, Position, debate_round
from agora.debate.steps import answer, debater_messages, judge, offline_answers, route
from agora.llm import OfflineModelClient
from agora.sdk.testing import ScriptedModel

QUESTION = "Which region? Options: eu-west | us-east"


def offline() -> OfflineModelClient:
    return OfflineModelClient(overrides=offline_answers)


async def round_of(question: str, previous: DebateRound | None, n: int = 3) -> DebateRound:
    positions = [
        await answer(offline(), DebaterConfig(debater_id=f"d{i}"), question, previous) for i in range(n)
    ]
    return debate_round(1 if previous is None else previous.round_number + 1, positions)


async def test_offline_debaters_take_their_option_then_follow_a_majority_of_peers() -> None:
    first = await round_of(QUESTION, None)
    assert [p.answer for p in first.positions] == ["eu-west", "us-east", "eu-west"]
    assert all(p.token_usage.total_tokens > 0 for p in first.positions)
    second = await round_of(QUESTION, first)
    assert [p.answer for p in second.positions] == ["eu-west"] * 3
    split = await round_of("Which? Options: a | b | c", None)
    again = await round_of("Which? Options: a | b | c", split)
    assert [p.answer for p in again.positions] == ["a", "b", "c"]  # no majority to follow


async def test_the_last_options_count_so_a_persons_guidance_narrows_them() -> None:
    guided = await round_of("Which? Options: a | b | c\nGuidance from pat: Options: b", None)
    assert {p.answer for p in guided.positions} == {"b"}


async def test_the_router_is_confident_only_about_a_single_option() -> None:
    router = DebaterConfig(debater_id="d0")
    assert (await route(offline(), router, "What is 6 x 7? Options: 42")).confidence >= 0.85
    assert (await route(offline(), router, QUESTION)).confidence < 0.85


async def test_a_debater_without_a_valid_answer_abstains() -> None:
    silent = ScriptedModel("no json", "still none")
    given = await answer(silent, DebaterConfig(debater_id="d0"), QUESTION, None)
    abstained = Position(debater_id="d0", answer="", reasoning="no valid answer", confidence=0.0)
    assert given.model_copy(update={"token_usage": abstained.token_usage}) == abstained
    assert given.token_usage.total_tokens > 0  # what the attempts used is counted
    valid = json.dumps({"answer": "eu-west", "reasoning": "latency", "confidence": 0.7})
    model = ScriptedModel("nope", valid)
    retried = await answer(model, DebaterConfig(debater_id="d0", temperature=1.1), QUESTION, None)
    assert retried.answer == "eu-west" and retried.confidence == 0.7
    assert model.temperatures == [1.1, 1.1]  # the debater's own temperature
    assert (
        "skeptic"
        in debater_messages(DebaterConfig(debater_id="d1", role_hint="You are a skeptic."), QUESTION, None)[
            0
        ].content
    )


async def test_the_offline_judge_picks_the_most_held_position() -> None:
    final = await round_of("Which? Options: a | b", None)
    verdict, usage = await judge(offline(), "Which? Options: a | b", final)
    assert verdict.answer == "a" and usage.total_tokens > 0
