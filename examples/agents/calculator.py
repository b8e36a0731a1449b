"""An agent app with two real tools: a calculator and a reader of files in a sandbox folder.

    make run PROFILE=redis AGENTS=examples/agents/calculator.py   # its own app beside its own daprd

The model is the offline stand-in, given a small policy so the agent does something useful
without a vendor account: it reads the numbers of a "What is A + B?" task, calls `add`, and
answers with the tool's result; a "Read NAME" task reads a file from the sandbox. Point it at a
real model by building the runner with `agora.llm.model_client_from_settings` instead.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from agora.core.models import CapabilityProfile
from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import Agent, AgentRunner, ModelRouter, ModelSpec, ModelTier, ToolExecutor, tool

SANDBOX = Path(os.environ.get("AGORA_SANDBOX", Path(__file__).with_name("sandbox"))).resolve()


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool(timeout_s=5)
def read_file(name: str) -> str:
    """Read a text file from the sandbox folder (no path outside it)."""
    path = (SANDBOX / name).resolve()
    if SANDBOX not in path.parents:
        raise PermissionError(f"{name} is outside the sandbox")
    return path.read_text()[:4000]


def policy(messages: Sequence[ChatMessage]) -> str | None:
    """What the offline model answers this agent: a tool call for the task, then the answer."""
    last = messages[-1].content
    if last.startswith("Result of tool"):
        return json.dumps({"thought": "the tool answered", "action": "final",
                           "answer": last.split(": ", 1)[1], "confidence": 0.9})  # fmt: skip
    task = next((m.content for m in messages if m.role == "user"), "")
    numbers = re.findall(r"-?\d+(?:\.\d+)?", task)
    if "read" in task.lower():
        name = task.split()[-1].strip(".?")
        return json.dumps(
            {"thought": "read it", "action": "tool", "tool": "read_file", "arguments": {"name": name}}
        )
    if len(numbers) >= 2:
        arguments = {"a": float(numbers[0]), "b": float(numbers[1])}
        return json.dumps({"thought": "add them", "action": "tool", "tool": "add", "arguments": arguments})
    return json.dumps({"thought": "nothing to compute", "action": "final", "answer": "no numbers given"})


MODEL = ModelSpec(
    model_id="offline-calculator", tier=ModelTier.BALANCED, input_usd_per_1k=0.01, output_usd_per_1k=0.02
)
router = ModelRouter([MODEL], {MODEL.model_id: OfflineModelClient(model=MODEL.model_id, overrides=policy)})

agents = [
    Agent(
        CapabilityProfile(
            agent_id="calculator",
            agent_name="Calculator",
            skill_tags=["arithmetic", "read_files"],
            cost_per_step_usd=0.001,
            max_steps=4,
        ),
        runner=AgentRunner(router, ToolExecutor([add, read_file])),
        instructions="You compute exactly; use the tools.",
    )
]
