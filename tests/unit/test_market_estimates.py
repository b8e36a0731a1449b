"""The market's estimates of candidates that do not bid for themselves: one call rates the lot,
an invalid answer is asked again once with what was wrong, and then every candidate it leaves
unrated gets a reason; every call is on the task's bill."""

from __future__ import annotations

import asyncio
import json
import re

from agora.allocator.estimates import (
    ESTIMATE_ATTEMPTS,
    ESTIMATES_PER_CALL,
    CandidateEstimate,
    MarketEstimates,
    NoEstimate,
    ratings_schema,
)
from agora.core.market import TaskSpec
from agora.core.models import CapabilityProfile
from agora.llm import OfflineModelClient
from agora.sdk.testing import FunctionModel, ScriptedModel

SPEC = TaskSpec(task_id="t-1", description="Summarise the week's papers", required_skills=["summarize"])


def profiles(count: int) -> list[CapabilityProfile]:
    return [
        CapabilityProfile(
            agent_id=f"agent-{i}", agent_name=f"Agent {i}", skill_tags=["summarize"], cost_per_step_usd=0.01
        )
        for i in range(count)
    ]


def rating(*agent_ids: str, percent: int = 70) -> str:
    return json.dumps({a: {"success_percent": percent, "steps": 3} for a in agent_ids})


async def estimate_all(estimates: MarketEstimates, candidates: list[CapabilityProfile]) -> list[object]:
    return list(await asyncio.gather(*(estimates.estimate(p) for p in candidates)))


async def test_candidates_asked_together_are_rated_in_one_call() -> None:
    candidates = profiles(5)
    model = ScriptedModel(rating(*(p.agent_id for p in candidates)))
    estimates = MarketEstimates(model, SPEC)

    answers = await estimate_all(estimates, candidates)

    assert [a.agent_id for a in answers if isinstance(a, CandidateEstimate)] == [
        p.agent_id for p in candidates
    ]
    assert len(model.asked) == 1
    assert all(f"- {p.agent_id}: " in model.asked[0][1].content for p in candidates)
    assert estimates.bill.model_calls == 1 and estimates.bill.completion_tokens > 0


def test_the_schema_sent_asks_for_exactly_the_candidates_with_whole_percents() -> None:
    schema = ratings_schema(profiles(2))

    assert schema["required"] == ["agent-0", "agent-1"] and schema["additionalProperties"] is False
    percent = schema["properties"]["agent-0"]["properties"]["success_percent"]
    assert (percent["type"], percent["minimum"], percent["maximum"]) == ("integer", 0, 100)


async def test_more_candidates_than_one_call_rates_go_in_several_calls() -> None:
    candidates = profiles(ESTIMATES_PER_CALL + 2)
    first, rest = candidates[:ESTIMATES_PER_CALL], candidates[ESTIMATES_PER_CALL:]
    model = ScriptedModel(rating(*(p.agent_id for p in first)), rating(*(p.agent_id for p in rest)))
    estimates = MarketEstimates(model, SPEC)

    answers = await estimate_all(estimates, candidates)

    assert all(isinstance(a, CandidateEstimate) for a in answers)
    assert estimates.bill.model_calls == 2


async def test_an_answer_out_of_schema_is_asked_again_with_what_was_wrong() -> None:
    candidates = profiles(2)
    model = ScriptedModel(rating("agent-0", "agent-1", percent=-1), rating("agent-0", "agent-1"))
    estimates = MarketEstimates(model, SPEC)

    answers = await estimate_all(estimates, candidates)

    assert all(isinstance(a, CandidateEstimate) and a.success_prob == 0.7 for a in answers)
    again = model.asked[1]
    assert again[-2].role == "assistant" and '"success_percent": -1' in again[-2].content
    assert again[-1].role == "user" and "greater than or equal to 0" in again[-1].content
    assert estimates.bill.model_calls == 2


async def test_no_valid_answer_within_the_attempts_leaves_each_candidate_a_reason() -> None:
    model = ScriptedModel(*(["I think they are all great."] * ESTIMATE_ATTEMPTS))
    estimates = MarketEstimates(model, SPEC)

    answers = await estimate_all(estimates, profiles(3))

    reasons = [a.reason for a in answers if isinstance(a, NoEstimate)]
    assert len(reasons) == 3
    assert all(f"no estimate after {ESTIMATE_ATTEMPTS} attempt(s)" in reason for reason in reasons)
    assert "holds no JSON object" in reasons[0]
    assert estimates.bill.model_calls == ESTIMATE_ATTEMPTS


async def test_a_model_that_cannot_be_reached_is_not_asked_again() -> None:
    model = ScriptedModel()  # no answer: every call raises ModelUnavailable
    estimates = MarketEstimates(model, SPEC)

    [answer] = await estimate_all(estimates, profiles(1))

    assert isinstance(answer, NoEstimate) and "no answer left" in answer.reason
    assert estimates.bill.model_calls == 1


async def test_a_candidate_the_answer_leaves_out_gets_a_reason_and_strangers_are_ignored() -> None:
    model = ScriptedModel(
        json.dumps(
            {
                "agent-0": {"success_percent": 70, "steps": 3},
                "someone-else": {"success_percent": 90, "steps": 1},
            }
        )
    )
    estimates = MarketEstimates(model, SPEC)

    rated, left_out = await estimate_all(estimates, profiles(2))

    assert isinstance(rated, CandidateEstimate) and rated.agent_id == "agent-0"
    assert isinstance(left_out, NoEstimate) and "did not rate this agent" in left_out.reason


async def test_the_offline_model_rates_every_candidate() -> None:
    candidates = profiles(3)
    estimates = MarketEstimates(OfflineModelClient(), SPEC)

    answers = await estimate_all(estimates, candidates)

    assert [a.agent_id for a in answers if isinstance(a, CandidateEstimate)] == [
        p.agent_id for p in candidates
    ]
    assert all(0.0 <= a.success_prob <= 1.0 for a in answers if isinstance(a, CandidateEstimate))


async def test_one_per_call_asks_for_each_candidate_in_a_call_of_its_own() -> None:
    candidates = profiles(3)
    model = FunctionModel(lambda messages: rating(*re.findall(r"^- (\S+): ", messages[1].content, re.M)))
    estimates = MarketEstimates(model, SPEC, per_call=1)

    answers = await estimate_all(estimates, candidates)

    assert all(isinstance(a, CandidateEstimate) for a in answers)
    assert [len(re.findall(r"^- ", asked[1].content, re.M)) for asked in model.asked] == [1, 1, 1]
    assert estimates.bill.model_calls == 3
