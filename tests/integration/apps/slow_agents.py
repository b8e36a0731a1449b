"""Agents whose runs take a while and who take two at once (`max_concurrent_runs=2`): the market
must keep the work they cannot take yet waiting. `SLOW_AGENTS` names which of them this app
runs (comma-separated). A run waits until the file `SLOW_GATE` exists (when it names one), then
takes `SLOW_RUN_SECONDS`: a test holds the runs until it has seen what it looks for."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agora.core.contracts import BidOffer
from agora.core.market import TaskSpec
from agora.core.messages import TaskAwarded
from agora.sdk import Agent
from agora.sdk.app import AgentLoad, HandlerResult

SKILL = "slow-work"
RUN_SECONDS = float(os.environ.get("SLOW_RUN_SECONDS", "1"))
GATE = Path(os.environ["SLOW_GATE"]) if os.environ.get("SLOW_GATE") else None
GATE_WAIT_SECONDS = 600
LIMIT = 2


async def work(award: TaskAwarded) -> HandlerResult:
    for _ in range(GATE_WAIT_SECONDS * 5):
        if GATE is None or GATE.exists():
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(RUN_SECONDS)
    return HandlerResult(success=True, summary=f"done: {award.spec.description}", steps=1, cost_usd=0.001)


async def bid(spec: TaskSpec, load: AgentLoad) -> BidOffer:
    return BidOffer(self_reported_success_prob=0.8, estimated_cost_usd=0.001, estimated_steps=1)


agents = [
    Agent(name, skills=[SKILL], handler=work, estimate=bid, max_concurrent_runs=LIMIT)
    for name in os.environ.get("SLOW_AGENTS", "slow-a,slow-b").split(",")
]
