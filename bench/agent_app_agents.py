"""The agents of the agent-side bidding benchmark's agent app (`bench/market_agent_bids.py`):
the reference worker's agents (`agora/worker/sample_agents.yaml`: the same ids, skills, prices
and step allowances), each bidding for itself with the SDK's default estimate. An award is done
at once: the handler reports success at the agent's bid (its steps at its step price), so the
app's work per task is taking the award, its run workflow and the outcome."""

from __future__ import annotations

from pathlib import Path

import yaml

import agora.worker
from agora.core.messages import TaskAwarded
from agora.core.models import CapabilityProfile
from agora.sdk import Agent, HandlerResult

PROFILES = Path(agora.worker.__file__).with_name("sample_agents.yaml")


async def report_the_bid(award: TaskAwarded) -> HandlerResult:
    return HandlerResult(
        success=True,
        summary=f"{award.agent_id} did {award.spec.task_id}",
        cost_usd=award.bid.estimated_cost_usd,
        steps=award.bid.estimated_steps,
    )


def worker_agents() -> list[Agent]:
    profiles = [CapabilityProfile.model_validate(item) for item in yaml.safe_load(PROFILES.read_text())]
    return [Agent(profile, handler=report_the_bid, max_concurrent_runs=16) for profile in profiles]


agents = worker_agents()
