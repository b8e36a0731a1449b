"""How an agent app's agent bids: by default from its price, load and step allowance; with
estimate="model", its runner's model reads the task and estimates steps and chance, and the cost
is those steps at the agent's real price."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from agora.core.errors import BidNotMade
from agora.core.market import TaskSpec
from agora.core.models import CapabilityProfile
from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import Agent
from agora.sdk.app import HandlerResult
from agora.sdk.runner import AgentRunner

PROFILE = CapabilityProfile(agent_id="geo", agent_name="Geographer", skill_tags=["maps"],
                            cost_per_step_usd=0.01, max_steps=6)  # fmt: skip
TASK = TaskSpec(task_id="t-1", description="Map the rivers of Portugal", required_skills=["maps"])


def estimating(answer: str) -> tuple[Agent, list[Sequence[ChatMessage]]]:
    asked: list[Sequence[ChatMessage]] = []

    def model(messages: Sequence[ChatMessage]) -> str:
        asked.append(messages)
        return answer

    return Agent.from_profile(
        PROFILE, runner=AgentRunner(OfflineModelClient(overrides=model)), estimate="model"
    ), asked


async def test_the_runner_s_model_reads_the_task_and_the_cost_is_its_steps_at_the_agent_s_price() -> None:
    agent, asked = estimating(
        json.dumps({"estimated_steps": 3, "self_reported_success_prob": 0.7, "rationale": "three rivers"})
    )

    offer = await agent.bid(TASK)

    assert (offer.estimated_steps, offer.self_reported_success_prob) == (3, 0.7)
    assert offer.estimated_cost_usd == pytest.approx(0.03) and offer.rationale == "Geographer: three rivers"
    [messages] = asked
    assert "Map the rivers of Portugal" in messages[-1].content
    assert "$0.01" in messages[0].content and "0 of your 4 runs" in messages[0].content


async def test_a_model_estimate_is_kept_within_the_agent_s_step_allowance() -> None:
    agent, _ = estimating(json.dumps({"estimated_steps": 50, "self_reported_success_prob": 0.9}))

    offer = await agent.bid(TASK)

    assert offer.estimated_steps == PROFILE.max_steps and offer.estimated_cost_usd == pytest.approx(0.06)


async def test_an_answer_out_of_form_is_asked_again_with_what_was_wrong() -> None:
    answers = iter(
        ["I would rather not say", json.dumps({"estimated_steps": 2, "self_reported_success_prob": 0.6})]
    )
    asked: list[Sequence[ChatMessage]] = []

    def model(messages: Sequence[ChatMessage]) -> str:
        asked.append(messages)
        return next(answers)

    agent = Agent.from_profile(
        PROFILE, runner=AgentRunner(OfflineModelClient(overrides=model)), estimate="model"
    )

    offer = await agent.bid(TASK)

    assert (offer.estimated_steps, offer.self_reported_success_prob) == (2, 0.6)
    assert asked[1][-2].content == "I would rather not say"
    assert asked[1][-1].content.startswith("That answer is not valid: it holds no JSON object.")


async def test_no_valid_estimate_within_the_attempts_is_a_typed_refusal_naming_why() -> None:
    agent, asked = estimating(json.dumps({"estimated_steps": 0, "self_reported_success_prob": 2}))

    with pytest.raises(
        BidNotMade, match=r"no valid estimate after 2 attempt\(s\): estimated_steps: .*greater"
    ):
        await agent.bid(TASK)
    assert len(asked) == 2


async def done(_: object) -> HandlerResult:
    return HandlerResult(success=True)


def test_a_model_estimate_needs_a_runner_and_market_bids_take_no_estimate() -> None:
    with pytest.raises(ValueError, match="needs a runner"):
        Agent.from_profile(PROFILE, handler=done, estimate="model")
    with pytest.raises(ValueError, match="for bids='self'"):
        Agent.from_profile(PROFILE, handler=done, estimate="model", bids="market")
