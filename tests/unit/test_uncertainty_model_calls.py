"""The uncertainty monitor's own model calls (P(True), samples) are bounded: each answer's length
and each call's time, so a slow model never holds a step's verdict past what the agent's runner
waits; a call that takes too long is left out of the estimate like a failed one."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agora.core.uncertainty.belief import NOT_RUN
from agora.core.uncertainty.estimator import UncertaintyEstimator
from agora.core.uncertainty.model import ModelMessage
from agora.core.uncertainty.policy import UncertaintyPolicy
from agora.llm import ChatMessage, Completion, ModelUnavailable, TracedModelClient
from agora.runtime.settings import ServiceSettings
from agora.uncertainty.app import (
    CONFIDENCE_ANSWER_TOKENS,
    CONFIDENCE_CALL_SECONDS,
    UncertaintySettings,
    confidence_model,
)

PROMPT = [ModelMessage(role="user", content="What is the capital of France?")]


class Answering(TracedModelClient):
    """Answers `text` after `delay_s`, keeping the output limit each call was given."""

    backend = "answering"

    def __init__(self, text: str, delay_s: float = 0.0) -> None:
        self.text = text
        self.delay_s = delay_s
        self.max_tokens: list[int | None] = []

    async def _complete(self, messages: list[ChatMessage], *, max_tokens: int | None, **_: Any) -> Completion:
        self.max_tokens.append(max_tokens)
        await asyncio.sleep(self.delay_s)
        return Completion(text=self.text, model="m", backend=self.backend)


async def test_each_call_has_an_output_limit_and_gives_the_answer_s_text() -> None:
    model = Answering('{"p_true": 0.9, "reason": "known"}')
    ask = confidence_model(model)
    assert await ask(PROMPT, temperature=0.0) == '{"p_true": 0.9, "reason": "known"}'
    assert model.max_tokens == [CONFIDENCE_ANSWER_TOKENS]


async def test_a_call_slower_than_its_deadline_is_a_typed_failure_in_time() -> None:
    ask = confidence_model(Answering("0.9", delay_s=30), timeout_s=0.05)
    started = time.monotonic()
    with pytest.raises(ModelUnavailable, match=r"did not answer within 0.05s"):
        await ask(PROMPT, temperature=0.0)
    assert time.monotonic() - started < 5


async def test_a_p_true_that_times_out_is_left_out_and_the_step_still_gets_its_verdict() -> None:
    estimator = UncertaintyEstimator(UncertaintyPolicy(), model=confidence_model(Answering("0.9", 30), 0.05))
    estimator.initialize("s1", "")
    step, _ = await estimator.observe_llm_response("Paris. Confidence: 90%", "1", prompt_messages=PROMPT)
    assert step.p_true_confidence == NOT_RUN
    assert step.signal_errors == ["p_true: ModelUnavailable: the model did not answer within 0.05s"]

    answered = UncertaintyEstimator(UncertaintyPolicy(), model=confidence_model(Answering("0.9")))
    answered.initialize("s2", "")
    step, _ = await answered.observe_llm_response("Paris. Confidence: 90%", "1", prompt_messages=PROMPT)
    assert step.p_true_confidence == 0.9 and step.signal_errors == []


def test_the_deadline_is_a_setting_whose_default_fits_three_rounds_in_the_runner_s_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert UncertaintySettings().confidence_call_seconds == CONFIDENCE_CALL_SECONDS
    runner_waits = ServiceSettings().sidecar_timeout_seconds  # an agent app's sidecar client
    assert runner_waits > 3 * CONFIDENCE_CALL_SECONDS
    monkeypatch.setenv("AGORA_CONFIDENCE_CALL_SECONDS", "7.5")
    assert UncertaintySettings().confidence_call_seconds == 7.5
