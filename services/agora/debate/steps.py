"""The debate's model calls: the routing model's first answer, each debater's answer in a round,
and the judge's synthesis. Each asks for a structured answer; one that is not valid is asked
once more (`ANSWER_ATTEMPTS`), with the model told what was wrong. A debater that still gives
no valid answer abstains (an empty answer at confidence 0, the reason as its reasoning), so one
bad debater never stops a debate; so does the router (the question is then debated). A judge
without a valid verdict raises `ModelOutputInvalid` with the reason (its caller falls back to
the weighted vote).

`offline_answers` makes the deterministic offline model a debater: it answers with one of the
options the question lists after its last "Options:" (separated by "|"), the i-th debater the i-th
option, and in later rounds moves to an answer a strict majority of its peers gave, so the
embedded default and the tests debate without a network. Its confidence is higher the fewer
options there are; a question with one option gets a confident routing answer.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, create_model, field_validator

from agora.core.debate.config import DebaterConfig
from agora.core.debate.rounds import DebateRound, Position, transcript
from agora.core.limits import MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.planning import TokenUsage
from agora.llm import ChatMessage, MeteredModel, ModelClient, ModelOutputInvalid, Usage, complete_json

DEBATER_PROMPT = "You are debater"
ROUTING_PROMPT = "You answer questions and say how sure you are."
JUDGE_PROMPT = "You judge a debate."
ANSWER_ATTEMPTS = 2
"""Calls for one answer: the first, and one more that tells the model what was wrong."""
ANSWER_AGAIN = (
    'Answer again with only the JSON object: {"answer": "...", "reasoning": "...", "confidence": <0 to 1>}.'
)


class DebaterAnswer(BaseModel):
    answer: str = Field(max_length=MAX_TEXT_CHARS)
    reasoning: str = Field(default="", max_length=MAX_TEXT_CHARS)
    confidence: float = Field(ge=0.0, le=1.0)


@functools.lru_cache(maxsize=256)
def answer_type(options: tuple[str, ...]) -> type[DebaterAnswer]:
    """What an answer to a debate with these options is: `DebaterAnswer` whose answer is one of
    them (its schema an `enum`, which a server that turns schemas into grammars holds the model
    to; an answer that differs only in case or spaces is read as the option). Without options,
    `DebaterAnswer`."""
    if not options:
        return DebaterAnswer
    canonical = {option.casefold(): option for option in options}

    def as_option(value: object) -> object:
        return canonical.get(value.strip().casefold(), value) if isinstance(value, str) else value

    return create_model(
        "DebaterAnswer",
        __base__=DebaterAnswer,
        answer=(Literal[options], Field(description="One of the debate's options, word for word.")),  # type: ignore[valid-type,arg-type]
        __validators__={"_as_option": field_validator("answer", mode="before")(as_option)},
    )


def debater_messages(
    debater: DebaterConfig, question: str, previous: DebateRound | None
) -> list[ChatMessage]:
    persona = f" {debater.role_hint}" if debater.role_hint else ""
    system = (
        f"{DEBATER_PROMPT} {debater.debater_id}.{persona} Answer the question briefly, with your "
        "reasoning and your confidence (0-1) that the answer is right."
    )
    user = f"Question: {question}"
    if previous is not None:
        user += (
            f"\nRound {previous.round_number + 1}. Your peers answered in round {previous.round_number}:\n"
            f"{transcript(previous)}\nConsider their answers and answer again."
        )
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]


async def answer(
    model: ModelClient,
    debater: DebaterConfig,
    question: str,
    previous: DebateRound | None,
    options: Sequence[str] = (),
) -> Position:
    """The debater's position this round (an abstention, with the reason, when it gives no
    valid answer: one of `options`, when the debate has them)."""
    metered = MeteredModel(model)
    messages = debater_messages(debater, question, previous)
    given = await _asked(metered, messages, temperature=debater.temperature, options=options)
    return _position(debater.debater_id, given, metered)


async def route(
    model: ModelClient, router: DebaterConfig, question: str, options: Sequence[str] = ()
) -> Position:
    """The routing model's answer and confidence (adaptive routing); without a valid answer,
    an abstention with the reason (the question is then debated)."""
    metered = MeteredModel(model)
    messages = [
        ChatMessage(role="system", content=f"{ROUTING_PROMPT} Give your confidence (0-1) honestly."),
        ChatMessage(role="user", content=f"Question: {question}"),
    ]
    given = await _asked(metered, messages, temperature=router.temperature, options=options)
    return _position(router.debater_id, given, metered)


async def judge(
    model: ModelClient, question: str, final: DebateRound, options: Sequence[str] = ()
) -> tuple[DebaterAnswer, TokenUsage]:
    """The judge's synthesis of the final round's positions (JUDGE aggregation);
    `ModelOutputInvalid` with the reason when it gives no valid verdict."""
    metered = MeteredModel(model)
    messages = [
        ChatMessage(
            role="system",
            content=f"{JUDGE_PROMPT} Weigh the positions and write the best answer, "
            "with reasoning and your confidence (0-1).",
        ),
        ChatMessage(role="user", content=f"Question: {question}\nPositions:\n{transcript(final)}"),
    ]
    given = await _asked(metered, messages, temperature=0.0, options=options)
    if isinstance(given, _NoAnswer):
        raise ModelOutputInvalid(given.reason, given.text, usage=given.usage)
    return given, _usage(metered)


@dataclass(frozen=True)
class _NoAnswer:
    """Why a model gave no valid `DebaterAnswer`, its last answer, and what the attempts used."""

    reason: str
    text: str
    usage: Usage


async def _asked(
    model: MeteredModel, messages: list[ChatMessage], *, temperature: float, options: Sequence[str] = ()
) -> DebaterAnswer | _NoAnswer:
    """The model's answer (one of `options`, when given), asked again with what was wrong while
    attempts are left. A model that cannot be reached raises (`ModelError`)."""
    try:
        given, _ = await complete_json(
            model,
            messages,
            answer_type(tuple(options)),
            temperature=temperature,
            attempts=ANSWER_ATTEMPTS,
            again=ANSWER_AGAIN,
        )
    except ModelOutputInvalid as exc:
        return _NoAnswer(
            reason=f"no valid answer after {ANSWER_ATTEMPTS} attempt(s): {exc.problem}"[:MAX_NOTE_CHARS],
            text=exc.text,
            usage=Usage(prompt_tokens=model.prompt_tokens, completion_tokens=model.completion_tokens),
        )
    return given


def _position(debater_id: str, given: DebaterAnswer | _NoAnswer, metered: MeteredModel) -> Position:
    """A debater's position: its answer, or an abstention (empty, confidence 0, the reason)."""
    if isinstance(given, _NoAnswer):
        return Position(
            debater_id=debater_id,
            answer="",
            reasoning=given.reason,
            confidence=0.0,
            token_usage=_usage(metered),
        )
    return Position(
        debater_id=debater_id,
        answer=given.answer,
        reasoning=given.reasoning,
        confidence=given.confidence,
        token_usage=_usage(metered),
    )


def _usage(model: MeteredModel) -> TokenUsage:
    return TokenUsage(prompt_tokens=model.prompt_tokens, completion_tokens=model.completion_tokens)


# -- the offline model as a debater ----------------------------------------------------------------


def offline_answers(messages: Sequence[ChatMessage]) -> str | None:
    """The offline model's answers to the debate's prompts (None: not a debate prompt)."""
    if len(messages) < 2:
        return None
    system, user = messages[0].content, messages[-1].content
    question = _question(user)
    options = _options(question)
    if system.startswith(ROUTING_PROMPT):
        confidence = 0.95 if len(options) == 1 else round(0.9 - 0.15 * len(options), 2)
        return _answer(options[0] if options else "I cannot tell", max(confidence, 0.1), "routing")
    if system.startswith(DEBATER_PROMPT):
        match = re.match(rf"{DEBATER_PROMPT} (\S+)\.", system)
        debater = match.group(1) if match else ""
        number = int(digits.group()) if (digits := re.search(r"\d+$", debater)) else 0
        choice = options[number % len(options)] if options else "I cannot tell"
        peers = re.findall(r"^- (\S+) \(confidence [0-9.]+\): (.*?)(?: Because: .*)?$", user, re.MULTILINE)
        others = [text for name, text in peers if name != debater]
        if others:
            best, count = Counter(others).most_common(1)[0]
            if count * 2 > len(others):
                choice = best
        confidence = round(max(0.3, 0.9 - 0.1 * max(0, len(options) - 1)), 2)
        return _answer(choice, confidence, f"debater {debater}")
    if system.startswith(JUDGE_PROMPT):
        positions = re.findall(r"^- \S+ \(confidence [0-9.]+\): (.*?)(?: Because: .*)?$", user, re.MULTILINE)
        best = Counter(positions).most_common(1)[0][0] if positions else "I cannot tell"
        return _answer(best, 0.7, "the judge")
    return None


def _question(user: str) -> str:
    """The question of a prompt (a person's guidance included), without the peers' answers."""
    return re.split(r"\nRound \d+\.|\nPositions:", user.removeprefix("Question: "), maxsplit=1)[0]


def _options(question: str) -> list[str]:
    """The options the question lists last (a person's guidance may narrow them)."""
    found = re.findall(r"Options:[ \t]*([^\n]+)", question)
    if not found:
        return []
    return [option.strip() for option in found[-1].split("|") if option.strip()]


def _answer(text: str, confidence: float, who: str) -> str:
    reasoning = f"{who} weighed the options offline"[:MAX_NOTE_CHARS]
    return json.dumps({"answer": text, "reasoning": reasoning, "confidence": confidence})
