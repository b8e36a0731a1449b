"""The agents the agent-app tests put on the market: the example calculator, an agent whose app
is slow to bid (it thinks for two seconds, past any bid deadline the tests set) but does its
work, an agent whose runs take four seconds (time to kill its app mid-run), a cautious agent
whose first step is unsure (the uncertainty monitor pauses it for a person), and a stubborn
one that gives up until a person tells it how (its runner hands the run to a person), and two
survey agents, one that pauses and one a person can hand its task to."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from agora.core.contracts import BidOffer
from agora.core.escalation.ladder import EscalationConfig
from agora.core.market import TaskSpec
from agora.core.messages import TaskAwarded
from agora.core.models import CapabilityProfile
from agora.core.uncertainty.policy import REFLECTION_PROMPT
from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import Agent
from agora.sdk.app import AgentLoad, HandlerResult
from agora.sdk.runner import AgentRunner, RecoveryPolicy

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "agents" / "calculator.py"


def _example_agents() -> list[Agent]:
    spec = importlib.util.spec_from_file_location("calculator_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.agents)


async def ponder(spec: TaskSpec, load: AgentLoad) -> BidOffer:
    await asyncio.sleep(2)
    return BidOffer(self_reported_success_prob=0.9, estimated_cost_usd=0.0, estimated_steps=1)


async def count_words(award: TaskAwarded) -> HandlerResult:
    return HandlerResult(success=True, summary=str(len(award.spec.description.split())), steps=1)


RUNS_LOG = "MARKET_AGENTS_RUNS"
"""A file the slow counter notes each run's start in (`start <task id>`): a test kills the app
once the run is under way, not after a guessed time."""


async def count_slowly(award: TaskAwarded) -> HandlerResult:
    if runs := os.environ.get(RUNS_LOG):
        with open(runs, "a") as log:
            log.write(f"start {award.task_id}\n")
    await asyncio.sleep(4)  # long enough for a test to kill the app mid-run
    return HandlerResult(success=True, summary=str(len(award.spec.description.split())), steps=3)


slow = Agent.from_profile(
    CapabilityProfile(agent_id="ponderer", agent_name="Ponderer", skill_tags=["word_count"], max_steps=2),
    handler=count_words,
    estimate=ponder,
)

steady = Agent.from_profile(
    CapabilityProfile(agent_id="plodder", agent_name="Plodder", skill_tags=["slow_count"], max_steps=3),
    handler=count_slowly,
)


def hesitate(messages: Sequence[ChatMessage]) -> str | None:
    """Unsure until a person answers; then it follows the person's prompt. Asked to bid, it
    estimates the task itself (its model bids for it)."""
    if "asked to bid" in messages[0].content:
        return json.dumps({"estimated_steps": 2, "self_reported_success_prob": 0.6,
                           "rationale": "a careful migration"})  # fmt: skip
    answered = [m.content for m in messages if m.role == "user" and m.content.startswith("A person answered")]
    if not answered:
        return json.dumps({"thought": "I am really not sure this migration is safe", "action": "final",
                           "answer": "drop the old table", "confidence": 0.1})  # fmt: skip
    prompt = answered[-1].split("Use this prompt instead:\n", 1)[-1].splitlines()[0]
    # The monitor's reflection prompt, given before the pause, reaches this call: the answer
    # says so, for the test to see.
    reflected = any(m.role == "system" and m.content == REFLECTION_PROMPT for m in messages)
    answer = f"done as asked: {prompt}" + (" (after reflecting)" if reflected else "")
    return json.dumps({"thought": "The capital of France is Paris", "action": "final",
                       "answer": answer, "confidence": 0.95})  # fmt: skip


cautious = Agent.from_profile(
    CapabilityProfile(agent_id="cautious", agent_name="Cautious", skill_tags=["migration"], max_steps=4),
    runner=AgentRunner(OfflineModelClient(overrides=hesitate)),
    estimate="model",
)


def give_up_until_told(messages: Sequence[ChatMessage]) -> str | None:
    if any(m.role == "user" and m.content.startswith("A person answered") for m in messages):
        return json.dumps({"thought": "now I see", "action": "final", "answer": "done with help",
                           "confidence": 0.9})  # fmt: skip
    return json.dumps({"thought": "I cannot find the data", "action": "final", "answer": "no data",
                       "succeeded": False, "confidence": 0.9})  # fmt: skip


stubborn = Agent.from_profile(
    CapabilityProfile(agent_id="stubborn", agent_name="Stubborn", skill_tags=["archaeology"], max_steps=4),
    runner=AgentRunner(
        OfflineModelClient(overrides=give_up_until_told),
        recovery=RecoveryPolicy(
            ladder=EscalationConfig(retry_limit=1, agent_analysis_attempts=0, notify_attempts=0)
        ),
    ),
)


def sure_of(probability: float) -> Callable[[TaskSpec, AgentLoad], BidOffer]:
    def estimate(spec: TaskSpec, load: AgentLoad) -> BidOffer:
        return BidOffer(self_reported_success_prob=probability, estimated_cost_usd=0.01, estimated_steps=2)

    return estimate


async def survey(award: TaskAwarded) -> HandlerResult:
    return HandlerResult(success=True, summary=f"surveyed: {award.spec.description}", steps=1)


# Two bidders for surveys: the hesitant one is sure of itself and wins, then pauses on its first
# step; the finisher doubts itself below the tests' threshold, so only a person hands it a task.
hesitant = Agent.from_profile(
    CapabilityProfile(agent_id="hesitant", agent_name="Hesitant", skill_tags=["survey"], max_steps=4),
    runner=AgentRunner(OfflineModelClient(overrides=hesitate)),
    estimate=sure_of(0.9),
)
finisher = Agent.from_profile(
    CapabilityProfile(agent_id="finisher", agent_name="Finisher", skill_tags=["survey"], max_steps=2),
    handler=survey,
    estimate=sure_of(0.1),
)

agents = [*_example_agents(), slow, steady, cautious, stubborn, hesitant, finisher]
