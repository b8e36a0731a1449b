"""An agent app's bid and learning handlers, without the app: a bid is its agent's own estimate,
refused (typed) for an agent the app does not host, a task needing a skill the agent lacks, or an
estimate that does not come within the solicitation's time."""

from __future__ import annotations

import asyncio

import pytest

from agora.core.contracts import BidOffer, BidSolicitation
from agora.core.errors import BidTooLate, InvalidArgument, NotFound
from agora.core.market import TaskSpec
from agora.sdk import Agent
from agora.sdk._agent import AgentLoad, HandlerResult
from agora.sdk._app_routes import agent_bid, agent_learning

OFFER = BidOffer(self_reported_success_prob=0.8, estimated_cost_usd=0.02, estimated_steps=3, rationale="mine")


async def done(_: object) -> HandlerResult:
    return HandlerResult(success=True)


def estimates(offer: BidOffer, after_s: float = 0.0) -> Agent:
    async def estimate(spec: TaskSpec, load: AgentLoad) -> BidOffer:
        await asyncio.sleep(after_s)
        return offer

    return Agent("writer", handler=done, skills=["prose", "verse"], estimate=estimate)


def asked(
    agent_id: str = "writer", skills: list[str] | None = None, within_ms: int = 1_000
) -> BidSolicitation:
    task = TaskSpec(task_id="t-1", description="Write", required_skills=skills or ["prose"])
    return BidSolicitation(agent_id=agent_id, task=task, respond_within_ms=within_ms)


async def test_a_bid_is_the_agent_s_own_estimate() -> None:
    agent = estimates(OFFER)

    assert await agent_bid({"writer": agent}, asked(skills=["prose", "verse"])) == OFFER


async def test_a_bid_for_an_agent_the_app_does_not_host_is_not_found() -> None:
    with pytest.raises(NotFound, match="no agent 'reader'"):
        await agent_bid({"writer": estimates(OFFER)}, asked(agent_id="reader"))


async def test_a_bid_for_a_task_needing_a_skill_the_agent_lacks_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="lacks a required skill"):
        await agent_bid({"writer": estimates(OFFER)}, asked(skills=["prose", "code"]))


async def test_an_estimate_later_than_the_solicitation_allows_is_too_late() -> None:
    slow = estimates(OFFER, after_s=1.0)

    with pytest.raises(BidTooLate, match="within 50 ms"):
        await agent_bid({"writer": slow}, asked(within_ms=50))


async def test_an_agent_without_a_runner_has_learnt_nothing() -> None:
    learnt = await agent_learning({"writer": estimates(OFFER)}, "writer")

    assert (learnt.agent_id, learnt.outcomes, learnt.patterns, learnt.effectiveness) == ("writer", 0, [], [])


async def test_the_learning_of_an_agent_the_app_does_not_host_is_not_found() -> None:
    with pytest.raises(NotFound, match="no agent 'reader'"):
        await agent_learning({"writer": estimates(OFFER)}, "reader")
