"""The agents the run-deadline tests put on the market, each on a priced model so that what a
run spends shows: a dawdler that never finishes (every step calls a tool, every model call takes
0.3 s, up to 200 steps: a minute), and a quitter that gives up twice and then hands its run to a
person (its recovery ladder), who never answers in time."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from agora.core.escalation.ladder import EscalationConfig
from agora.core.models import CapabilityProfile
from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import Agent, ModelRouter, ModelSpec, ModelTier, tool
from agora.sdk.runner import AgentRunner, RecoveryPolicy, RunnerConfig
from agora.sdk.tools import ToolExecutor

STEP_PRICE_USD = 0.001
MODEL = ModelSpec(
    model_id="offline-priced", tier=ModelTier.BALANCED, input_usd_per_1k=0.01, output_usd_per_1k=0.02
)


@tool
def wait_a_moment() -> str:
    """Nothing happens yet."""
    return "not yet"


def keeps_waiting(messages: Sequence[ChatMessage]) -> str:
    return json.dumps({"thought": "not yet", "action": "tool", "tool": "wait_a_moment", "arguments": {},
                       "confidence": 0.95})  # fmt: skip


def gives_up(messages: Sequence[ChatMessage]) -> str:
    return json.dumps({"thought": "I cannot find the records", "action": "final", "answer": "no records",
                       "succeeded": False, "confidence": 0.9})  # fmt: skip


def router(latency_s: float, answers: Callable[[Sequence[ChatMessage]], str]) -> ModelRouter:
    client = OfflineModelClient(model=MODEL.model_id, latency_s=latency_s, overrides=answers)
    return ModelRouter([MODEL], {MODEL.model_id: client})


dawdler = Agent.from_profile(
    CapabilityProfile(
        agent_id="dawdler",
        agent_name="Dawdler",
        skill_tags=["patience"],
        max_steps=200,
        cost_per_step_usd=STEP_PRICE_USD,
    ),
    runner=AgentRunner(
        router(0.3, keeps_waiting), ToolExecutor([wait_a_moment]), config=RunnerConfig(max_iterations=200)
    ),
)

quitter = Agent.from_profile(
    CapabilityProfile(
        agent_id="quitter",
        agent_name="Quitter",
        skill_tags=["records"],
        max_steps=4,
        cost_per_step_usd=STEP_PRICE_USD,
    ),
    runner=AgentRunner(
        router(0.0, gives_up),
        recovery=RecoveryPolicy(
            ladder=EscalationConfig(retry_limit=1, agent_analysis_attempts=0, notify_attempts=0)
        ),
    ),
)

agents = [dawdler, quitter]
