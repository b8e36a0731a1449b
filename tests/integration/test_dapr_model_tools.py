"""Native tool calls through Dapr's Conversation API (alpha2): a sidecar whose `agora-llm`
component is `conversation.openai` pointed at the local model server (llama.cpp's, serving
SmolLM2-135M). The tools, the tool choice, the assistant's calls and the tools' results go
through daprd to the server; every call and answer here is the real model's own."""

from __future__ import annotations

import json

from agora.harness import LocalCluster
from agora.harness.cluster import LOCAL_MODEL, LOCAL_MODEL_CALL_PREFILL
from agora.llm import ChatMessage, DaprConversationClient, ToolSpec
from agora.runtime.sidecar import DaprSidecar
from agora.sdk import tool
from agora.sdk.runner import AgentDefinition, AgentRunner, RunnerConfig, RunStatus
from agora.sdk.tools import ToolExecutor

OPENING = LOCAL_MODEL_CALL_PREFILL[0]
"""The alpha2 API takes no stop sequences, so of the local model's prefill only the opening
goes through Dapr; its answer runs on to its own end."""
TIMEOUT_S = 240
"""conversation.openai sets no output limit, so an answer may run on to the end of the slot's
context on a busy machine."""


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


MULTIPLY = ToolSpec(name="multiply", description="Multiply two integers.", parameters=multiply.parameters)


def model_through(model_sidecar: DaprSidecar) -> DaprConversationClient:
    return DaprConversationClient(
        model_sidecar, "agora-llm", model=LOCAL_MODEL, timeout_s=TIMEOUT_S, required_call_opening=OPENING
    )


async def test_a_required_call_comes_back_from_the_server_as_the_model_s_tool_call(
    model_system: LocalCluster, model_sidecar: DaprSidecar
) -> None:
    [caller] = model_system.replicas
    log = (model_system.logs / f"{caller.name}.daprd.log").read_text()
    assert "Component loaded: agora-llm (conversation.openai/v1)" in log
    ask = [ChatMessage(role="user", content="What is 17 times 23? Use the multiply tool.")]
    completion = await model_through(model_sidecar).complete(ask, tools=[MULTIPLY], tool_choice="required")
    # Only the tool definitions, `required` and the opening together make this model call a
    # tool: a call here is the server's parse of the model's own <tool_call> answer.
    assert completion.finish_reason == "tool_calls" and completion.tool_calls
    call = completion.tool_calls[0]
    arguments = json.loads(call.arguments)
    assert call.name == "multiply" and call.id
    assert isinstance(arguments, dict) and set(arguments) == {"a", "b"}
    assert completion.model == LOCAL_MODEL and completion.usage.completion_tokens > 0


async def test_an_sdk_agent_calls_its_tool_natively_through_dapr_and_answers_from_the_result(
    model_sidecar: DaprSidecar,
) -> None:
    model = model_through(model_sidecar)
    runner = AgentRunner(
        model, ToolExecutor([multiply]), config=RunnerConfig(max_iterations=3, tool_choice="required")
    )
    result = await runner.run(
        AgentDefinition(name="calc"),
        "What is 17 times 23? Use the multiply tool.",
        session_id="dapr-native-1",
    )
    assert result.status is RunStatus.COMPLETED, result.reason
    [call] = result.tool_results
    assert call.name == "multiply" and call.ok and call.output == str(int(call.output))
    # The conversation carries the call and its result natively, linked by the call's id (an
    # id the server gave the call, carried back to it through daprd as `toolId`).
    [asked] = [m for m in result.messages if m.tool_calls]
    [answered] = [m for m in result.messages if m.role == "tool"]
    assert asked.tool_calls[0].name == "multiply" and answered.tool_call_id == asked.tool_calls[0].id
    assert result.messages.index(answered) < len(result.messages) - 1
    # The model's text after reading the result carries it (asked without the tool, this
    # model answers 341), so the result reached it through daprd as a tool message.
    assert call.output in result.output
