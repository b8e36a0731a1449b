"""An agent app with two real tools: a calculator and a reader of files in a sandbox folder.

    make run PROFILE=redis AGENTS=examples/agents/calculator.py   # its own app beside its own daprd

Its model is a function (`agora.sdk.testing.FunctionModel`), so the agent does something
useful without a model vendor: it reads the numbers of a "What is A + B?" task, calls `add`,
and answers with the tool's result; a "Read NAME" task reads a file from the sandbox. Leave
the model out (`Agent("calculator", tools=..., ...)`) and it runs on the model the environment
names (`AGORA_MODEL_*`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from agora.llm import ChatMessage
from agora.sdk import Agent, ModelRouter, ModelSpec, ModelTier, tool
from agora.sdk.testing import FunctionModel, ScriptedStep, call_tool, final

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


def decide(messages: Sequence[ChatMessage]) -> ScriptedStep:
    """This agent's steps without a model vendor: a tool call for the task, then the answer."""
    last = messages[-1].content
    if last.startswith("Result of tool"):
        return final(last.split(": ", 1)[1])
    task = next((m.content for m in messages if m.role == "user"), "")
    numbers = re.findall(r"-?\d+(?:\.\d+)?", task)
    if "read" in task.lower():
        return call_tool("read_file", name=task.split()[-1].strip(".?"))
    if len(numbers) >= 2:
        return call_tool("add", a=float(numbers[0]), b=float(numbers[1]))
    return final("no numbers given")


MODEL = ModelSpec(
    model_id="offline-calculator", tier=ModelTier.BALANCED, input_usd_per_1k=0.01, output_usd_per_1k=0.02
)
router = ModelRouter([MODEL], {MODEL.model_id: FunctionModel(decide, model=MODEL.model_id)})

agents = [
    Agent(
        "calculator",
        router,
        display_name="Calculator",
        instructions="You compute exactly; use the tools.",
        tools=[add, read_file],
        skills=["arithmetic", "read_files"],
        price_per_step=0.001,
        max_steps=4,
    )
]
