"""Four pairs of agents for sums, each pair one that adds right and one that always answers wrong
and claims success all the same. The wrong one is also the surer bidder (it claims 0.95 against
the right one's 0.7), so it wins first, and only what its outcomes teach the market can turn the
work to the other. One pair takes the tasks that carry an expected-answer check
(`sums-checked`), one the tasks that carry none (`sums-unchecked`), and one the tasks a checker
app checks (`sums-by-app`, tests/integration/apps/sum_checker.py); one more takes tasks that pass to
the next bid when their check fails (`sums-next`)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable

from agora.core.contracts import BidOffer
from agora.core.market import TaskSpec
from agora.core.messages import TaskAwarded
from agora.core.models import CapabilityProfile
from agora.sdk import Agent
from agora.sdk.app import AgentLoad, HandlerResult

RIGHT_CLAIM = 0.7
WRONG_CLAIM = 0.95


def operands(description: str) -> tuple[int, int]:
    a, b = (int(n) for n in re.findall(r"\d+", description)[:2])
    return a, b


def bidding(claim: float) -> Callable[[TaskSpec, AgentLoad], Awaitable[BidOffer]]:
    async def bid(spec: TaskSpec, load: AgentLoad) -> BidOffer:
        return BidOffer(self_reported_success_prob=claim, estimated_cost_usd=0.001, estimated_steps=1)

    return bid


async def add_right(award: TaskAwarded) -> HandlerResult:
    a, b = operands(award.spec.description)
    acceptance = award.spec.acceptance
    if acceptance is not None and acceptance.check.kind == "json_schema":  # the sum as its check wants it
        return HandlerResult(success=True, summary=json.dumps({"total": a + b}), steps=1, cost_usd=0.001)
    return HandlerResult(success=True, summary=f"{a} + {b} = {a + b}", steps=1, cost_usd=0.001)


async def add_wrong(award: TaskAwarded) -> HandlerResult:
    a, b = operands(award.spec.description)
    return HandlerResult(success=True, summary=f"{a} + {b} = {a * b + 1}", steps=1, cost_usd=0.001)


def summer(agent_id: str, skill: str, right: bool) -> Agent:
    profile = CapabilityProfile(agent_id=agent_id, agent_name=agent_id, skill_tags=[skill], max_steps=2)
    return Agent.from_profile(
        profile,
        handler=add_right if right else add_wrong,
        estimate=bidding(RIGHT_CLAIM if right else WRONG_CLAIM),
        # The wrong one never looks: it claims success whatever its task's check would say.
        check_before_report=right,
    )


agents = [
    summer("adder-checked", "sums-checked", right=True),
    summer("bluffer-checked", "sums-checked", right=False),
    summer("adder-unchecked", "sums-unchecked", right=True),
    summer("bluffer-unchecked", "sums-unchecked", right=False),
    summer("adder-by-app", "sums-by-app", right=True),
    summer("bluffer-by-app", "sums-by-app", right=False),
    summer("adder-next", "sums-next", right=True),
    summer("bluffer-next", "sums-next", right=False),
    summer("adder-publisher", "sums-publisher", right=True),
    summer("bluffer-publisher", "sums-publisher", right=False),
    summer("adder-person", "sums-person", right=True),
    summer("bluffer-person", "sums-person", right=False),
    summer("adder-json", "sums-json", right=True),
    summer("bluffer-json", "sums-json", right=False),
]
