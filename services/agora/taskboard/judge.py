"""The judge of a task whose check is `judge`: the board's own model reads the task, its rubric
and the agent's output, and gives a `JudgeOpinion` (passed, confidence, reason). The model's
answer is input like any other: held to the opinion's JSON Schema where the server can hold it,
validated, asked again once, and otherwise no verdict at all (the outcome stays unchecked)."""

from __future__ import annotations

import asyncio

from agora.core.acceptance import JudgeCheck, JudgeOpinion
from agora.core.contracts import CheckRequest
from agora.llm import (
    ChatMessage,
    ModelClient,
    ModelError,
    ModelOutputInvalid,
    ModelUnavailable,
    complete_json,
)
from agora.runtime.checkers import CheckAnswerInvalid, CheckNotAnswered

__all__ = ["JUDGE_PROMPT", "Judge"]

JUDGE_PROMPT = (
    "You check another agent's work. Read the task, the rubric a result must meet, and the "
    "agent's result. Decide whether the result meets the rubric. Answer with a JSON object: "
    '"passed" (true or false), "confidence" (how sure you are, from 0 to 1) and "reason" (one '
    "sentence on why)."
)
JUDGE_ATTEMPTS = 2
"""An answer that is not an opinion is asked again once, with what was wrong."""
JUDGE_TIMEOUT_S = 60.0
MAX_OUTPUT_CHARS = 8_000
"""The part of the agent's output the judge reads (its beginning): a bounded prompt."""


class Judge:
    def __init__(self, model: ModelClient, *, timeout_s: float = JUDGE_TIMEOUT_S) -> None:
        self._model = model
        self._timeout_s = timeout_s

    async def opinion(self, check: JudgeCheck, request: CheckRequest) -> JudgeOpinion:
        """The judge's opinion of the outcome; `CheckNotAnswered` when the model could not be
        reached (tried again later), `CheckAnswerInvalid` when it answered but gave no opinion."""
        messages = [
            ChatMessage(role="system", content=JUDGE_PROMPT),
            ChatMessage(
                role="user",
                content=(
                    f"Task: {request.spec.description}\n"
                    f"Rubric: {check.rubric}\n"
                    f"Result: {request.outcome.summary[:MAX_OUTPUT_CHARS]}"
                ),
            ),
        ]
        try:
            async with asyncio.timeout(self._timeout_s):
                opinion, _ = await complete_json(self._model, messages, JudgeOpinion, attempts=JUDGE_ATTEMPTS)
        except TimeoutError:
            raise CheckNotAnswered(f"the model did not answer within {self._timeout_s:g} s") from None
        except ModelOutputInvalid as exc:
            raise CheckAnswerInvalid(
                f"answered out of its contract {JUDGE_ATTEMPTS} times: {exc.problem}"[:500]
            ) from None
        except ModelUnavailable as exc:
            raise CheckNotAnswered(f"the model could not be reached: {exc}"[:500]) from None
        except ModelError as exc:
            raise CheckAnswerInvalid(f"the model refused the call: {exc}"[:500]) from None
        return opinion
