"""The debate's model calls on the offline model (as debaters, router and judge) and on
scripted answers: a bad answer is asked again with what was wrong, then abstains (a debater,
the router) or gives way to the weighted vote (the judge)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agora.core.debate.config import AggregationStrategy, DebateConfig, DebaterConfig
from agora.core.debate.rounds import DebateRound, Position, debate_round
from agora.debate.activities import DebateActivities
from agora.debate.steps import ANSWER_ATTEMPTS, answer, debater_messages, judge, offline_answers, route
from agora.debate.workflow import Judge
from agora.llm import (
    ChatMessage,
    Completion,
    ModelOutputInvalid,
    OfflineModelClient,
    TracedModelClient,
    Usage,
)
from agora.sdk.testing import MemoryRepository, ScriptedModel

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
    why = "no valid answer after 2 attempt(s): it holds no JSON object."
    abstained = Position(debater_id="d0", answer="", reasoning=why, confidence=0.0)
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


VALID = json.dumps({"answer": "eu-west", "reasoning": "latency", "confidence": 0.7})


def re_ask(model: ScriptedModel, call: int) -> tuple[ChatMessage, ChatMessage]:
    """The two messages call `call` (0-based) added to the conversation: the model's answer
    before, and what it was told of it."""
    assistant, user = model.asked[call][-2:]
    assert (assistant.role, user.role) == ("assistant", "user")
    return assistant, user


async def test_a_debater_is_asked_again_with_the_fields_its_answer_got_wrong() -> None:
    wrong = json.dumps({"answer": "eu-west", "confidence": 7})
    model = ScriptedModel(wrong, VALID)
    given = await answer(model, DebaterConfig(debater_id="d0"), QUESTION, None)
    assert given.answer == "eu-west" and given.confidence == 0.7
    assert len(model.asked) == ANSWER_ATTEMPTS == 2
    assert model.asked[1][:2] == model.asked[0], "the question is asked again as it was"
    said, told = re_ask(model, 1)
    assert said.content == wrong
    assert told.content.startswith(
        "That answer is not valid: confidence: Input should be less than or equal to 1"
    )
    assert '"confidence"' in told.content  # the form of the answer again


class CutOff(TracedModelClient):
    """Answers in order, each marked cut off at the output limit unless it is `VALID`."""

    backend = "cut-off"

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[list[ChatMessage]] = []

    async def _complete(self, messages: list[ChatMessage], **_: Any) -> Completion:
        self.asked.append(list(messages))
        text = self.answers[len(self.asked) - 1]
        reason = "stop" if text == VALID else "length"
        return Completion(text=text, model="m", backend=self.backend, finish_reason=reason)


async def test_an_answer_cut_off_at_the_output_limit_is_asked_again_more_briefly() -> None:
    model = CutOff('{"answer": "eu-west because the latency from', VALID)
    given = await answer(model, DebaterConfig(debater_id="d0"), QUESTION, None)
    assert given.answer == "eu-west"
    told = model.asked[1][-1].content
    assert "cut off at the output limit" in told and "more briefly" in told


async def test_a_router_without_a_valid_answer_is_asked_again_then_abstains_with_the_reason() -> None:
    router = DebaterConfig(debater_id="r", temperature=0.3)
    model = ScriptedModel("I am sure: eu-west", VALID)
    routed = await route(model, router, QUESTION)
    assert routed.answer == "eu-west" and routed.confidence == 0.7
    assert re_ask(model, 1)[1].content.startswith("That answer is not valid: it holds no JSON object.")
    assert model.temperatures == [0.3, 0.3]

    silent = ScriptedModel("eu-west", "eu-west, surely")
    abstained = await route(silent, router, QUESTION)
    assert (abstained.answer, abstained.confidence) == ("", 0.0)  # below any threshold: debated
    assert abstained.reasoning == "no valid answer after 2 attempt(s): it holds no JSON object."
    assert abstained.token_usage.total_tokens > 0


async def test_a_judge_without_a_valid_verdict_raises_the_reason_with_what_both_attempts_cost() -> None:
    final = await round_of("Which? Options: a | b", None)
    model = ScriptedModel("a", VALID)
    verdict, _ = await judge(model, "Which? Options: a | b", final)
    assert verdict.answer == "eu-west"
    assert re_ask(model, 1)[0].content == "a"

    silent = ScriptedModel("a", "a, clearly")
    with pytest.raises(ModelOutputInvalid, match="no valid answer after 2 attempt") as raised:
        await judge(silent, "Which? Options: a | b", final)
    assert raised.value.text == "a, clearly"
    asked_tokens = sum(len(m.content.split()) for call in silent.asked for m in call)
    assert raised.value.usage == Usage(prompt_tokens=asked_tokens, completion_tokens=1 + 2)


async def test_a_judge_without_a_verdict_leaves_it_to_the_weighted_vote_and_its_tokens_count() -> None:
    judge_config = DebaterConfig(debater_id="judge", usd_per_1k_tokens=1.0)
    config = DebateConfig(
        debaters=[DebaterConfig(debater_id="d0"), DebaterConfig(debater_id="d1")],
        aggregation=AggregationStrategy.JUDGE,
        judge_config=judge_config,
    )
    final = debate_round(1, [Position(debater_id="d0", answer="a", confidence=0.9),
                             Position(debater_id="d1", answer="b", confidence=0.4)])  # fmt: skip
    silent = ScriptedModel("b", "b, clearly")
    activities = DebateActivities(
        model_for=lambda _: silent,
        publisher=None,  # type: ignore[arg-type]
        records=None,  # type: ignore[arg-type]
        escalations=None,  # type: ignore[arg-type]
        calibration=None,  # type: ignore[arg-type]
        answers=MemoryRepository(Position).typed(),
        answer_writes=None,  # type: ignore[arg-type]
    )
    judged = await activities.judge(Judge(config=config, question="Which?", final=final, traceparent=""))
    assert judged.chosen.answer == "a"  # the weighted vote's
    assert len(silent.asked) == 2
    assert judged.usage.completion_tokens == 3 and judged.usage.prompt_tokens > 0
    assert judged.cost_usd == pytest.approx(judged.usage.total_tokens / 1000)


class Schemas(ScriptedModel):
    """A scripted model that keeps the schema each call asked for."""

    def __init__(self, *answers: str) -> None:
        super().__init__(*answers)
        self.schemas: list[dict[str, Any] | None] = []

    async def _complete(self, messages: list[ChatMessage], **options: Any) -> Completion:
        self.schemas.append(options.get("json_schema"))
        return await super()._complete(messages, **options)


OPTIONS = ("keep a backup", "drop it now")


async def test_a_debate_s_options_are_the_schema_s_enum_and_an_answer_outside_them_is_asked_again() -> None:
    off_option = json.dumps({"answer": "no", "reasoning": "", "confidence": 1.0})
    model = Schemas(off_option, json.dumps({"answer": "Keep a backup", "reasoning": "", "confidence": 0.8}))
    given = await answer(model, DebaterConfig(debater_id="d0"), "Keep a backup?", None, OPTIONS)
    assert given.answer == "keep a backup", "read as the option it names"
    assert model.schemas[0] is not None and model.schemas[0]["properties"]["answer"]["enum"] == list(OPTIONS)
    told = re_ask(model, 1)[1].content
    assert "Input should be 'keep a backup' or 'drop it now'" in told, told


async def test_a_debater_that_keeps_answering_outside_the_options_abstains_saying_so() -> None:
    off_option = json.dumps({"answer": "no", "reasoning": "", "confidence": 1.0})
    given = await answer(
        ScriptedModel(off_option, off_option), DebaterConfig(debater_id="d0"), "?", None, OPTIONS
    )
    assert (given.answer, given.confidence) == ("", 0.0)
    assert "Input should be 'keep a backup' or 'drop it now'" in given.reasoning
    routed = await route(ScriptedModel(off_option, off_option), DebaterConfig(debater_id="r"), "?", OPTIONS)
    assert (routed.answer, routed.confidence) == ("", 0.0), "a router outside the options: debated"


async def test_without_options_any_answer_is_taken() -> None:
    free = json.dumps({"answer": "no", "reasoning": "", "confidence": 1.0})
    given = await answer(ScriptedModel(free), DebaterConfig(debater_id="d0"), "?", None)
    assert given.answer == "no"
