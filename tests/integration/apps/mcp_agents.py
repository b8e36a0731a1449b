"""The agents the MCP tool tests put on the market, each with tools from the test MCP server
(tests/integration/apps/mcp_tools.py) and the offline model with a small policy:

- `mcp-adder` (skill `mcp_arithmetic`) reaches the server as the Dapr app `mcp-tools` through
  its own sidecar: "What is A + B?" calls `add`; "Refuse WHY" calls `refuse`, whose error the
  model reads and answers with.
- `stamper` (skill `durable_stamp`) reaches it through the `MCPServer` resource `tools` of its
  daprd: "Stamp LABEL" calls `stamp` (four seconds), each call a durable Dapr workflow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from agora.core.models import CapabilityProfile
from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import Agent, McpServer, ModelRouter, ModelSpec, ModelTier
from agora.sdk.runner import AgentRunner
from agora.sdk.tools import ToolExecutor

STAMP_SECONDS = 4.0


def _step(**fields: object) -> str:
    return json.dumps(fields)


def policy(messages: Sequence[ChatMessage]) -> str | None:
    last = messages[-1].content
    if last.startswith("Result of tool"):
        return _step(
            thought="the tool answered", action="final", answer=last.split(": ", 1)[1], confidence=0.9
        )
    task = next((m.content for m in messages if m.role == "user"), "")
    if task.startswith("Stamp "):
        label = task.split()[1]
        return _step(
            thought="stamp it",
            action="tool",
            tool="stamp",
            arguments={"label": label, "seconds": STAMP_SECONDS},
        )
    if task.startswith("Refuse "):
        return _step(thought="ask", action="tool", tool="refuse", arguments={"reason": task.split(" ", 1)[1]})
    numbers = re.findall(r"-?\d+(?:\.\d+)?", task)
    if len(numbers) >= 2:
        arguments = {"a": float(numbers[0]), "b": float(numbers[1])}
        return _step(thought="add them", action="tool", tool="add", arguments=arguments)
    return _step(thought="nothing to do", action="final", answer="nothing to do")


MODEL = ModelSpec(
    model_id="offline-mcp", tier=ModelTier.BALANCED, input_usd_per_1k=0.01, output_usd_per_1k=0.02
)


def runner(tools: ToolExecutor) -> AgentRunner:
    client = OfflineModelClient(model=MODEL.model_id, overrides=policy)
    return AgentRunner(ModelRouter([MODEL], {MODEL.model_id: client}), tools)


agents = [
    Agent.from_profile(
        CapabilityProfile(
            agent_id="mcp-adder",
            agent_name="MCP adder",
            skill_tags=["mcp_arithmetic"],
            cost_per_step_usd=0.001,
            max_steps=4,
        ),
        runner=runner(ToolExecutor([McpServer.app("mcp-tools", only={"add", "refuse"})])),
        instructions="You compute exactly; use the tools.",
    ),
    Agent.from_profile(
        CapabilityProfile(
            agent_id="stamper",
            agent_name="Stamper",
            skill_tags=["durable_stamp"],
            cost_per_step_usd=0.001,
            max_steps=4,
        ),
        runner=runner(ToolExecutor([McpServer.resource("tools", timeout_s=60, only={"stamp"})])),
        instructions="You stamp what you are asked to.",
    ),
]
