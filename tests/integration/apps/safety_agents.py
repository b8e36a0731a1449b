"""The agents the safety-gate tests put on the market, each leaving a line in the ledger file
(`SAFETY_LEDGER`) when its tool runs, so a test sees whether a tool ran:

* `janitor` deletes the records of the table its task names, at 0.7 confidence: medium
  uncertainty, before a tool the monitor counts as one that cannot be undone;
* `operator` powers off the host its task names, sure of itself, and its runner asks a person
  before any step of a task that says "decommission" (a checkpoint trigger of the app's own).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from agora.core.escalation.checkpoints import CheckpointTrigger
from agora.core.models import CapabilityProfile
from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import Agent, tool
from agora.sdk.runner import AgentRunner, RunnerConfig
from agora.sdk.tools import ToolExecutor


def _note(line: str) -> None:
    with Path(os.environ["SAFETY_LEDGER"]).open("a") as ledger:
        ledger.write(line + "\n")


@tool
def delete_records(table: str) -> str:
    """Delete every record of a table (cannot be undone)."""
    _note(f"delete_records {table}")
    return f"deleted {table}"


@tool
def power_off(host: str) -> str:
    """Power a host off."""
    _note(f"power_off {host}")
    return f"{host} is off"


def _acting(tool_name: str, argument: str, confidence: float) -> Callable[[Sequence[ChatMessage]], str]:
    """The model of an agent that calls `tool_name` on the task's last word, then answers with
    the tool's result (or says it left the thing alone, when the call did not run)."""

    def answer(messages: Sequence[ChatMessage]) -> str:
        target = next(m.content for m in messages if m.role == "user").split()[-1]
        said = [m.content for m in messages if m.role == "user"]
        if any(s.startswith(f"Result of tool {tool_name}:") for s in said):
            return json.dumps({"thought": "done", "action": "final", "answer": f"{tool_name} {target} done",
                               "confidence": 0.9})  # fmt: skip
        if any("did not run" in s for s in said):
            return json.dumps({"thought": "left alone", "action": "final", "answer": f"left {target} alone",
                               "confidence": 0.9})  # fmt: skip
        return json.dumps({"thought": f"{tool_name} it", "action": "tool", "tool": tool_name,
                           "arguments": {argument: target}, "confidence": confidence})  # fmt: skip

    return answer


janitor = Agent.from_profile(
    CapabilityProfile(agent_id="janitor", agent_name="Janitor", skill_tags=["cleanup"], max_steps=4),
    runner=AgentRunner(
        OfflineModelClient(overrides=_acting("delete_records", "table", 0.7)), ToolExecutor([delete_records])
    ),
)

operator = Agent.from_profile(
    CapabilityProfile(agent_id="operator", agent_name="Operator", skill_tags=["operations"], max_steps=4),
    runner=AgentRunner(
        OfflineModelClient(overrides=_acting("power_off", "host", 0.95)),
        ToolExecutor([power_off]),
        config=RunnerConfig(
            checkpoints=[
                CheckpointTrigger(
                    name="decommission",
                    prompt_contains=["decommission"],
                    message="A decommission needs a person",
                )
            ]
        ),
    ),
)

agents = [janitor, operator]
