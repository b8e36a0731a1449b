"""The local model server (llama.cpp's, serving SmolLM2-135M) as a part of a local system, and
both model backends reaching it: `openai` straight to it, `dapr` through a sidecar whose
`agora-llm` component is `conversation.openai` pointed at it. Every answer here is the real
model's own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import BaseModel, Field

from agora.harness import LocalCluster
from agora.harness.cluster import LOCAL_MODEL, LOCAL_MODEL_CALL_PREFILL
from agora.llm import (
    ChatMessage,
    DaprConversationClient,
    ModelUnavailable,
    OpenAICompatibleClient,
    complete_json,
)
from agora.llm.client import ModelOutputInvalid
from agora.llm.settings import ModelSettings, model_client_from_settings
from agora.runtime.sidecar import DaprSidecar
from agora.sdk import tool
from agora.sdk.runner import AgentDefinition, AgentRunner, RunnerConfig, RunStatus
from agora.sdk.tools import ToolExecutor
from tests.integration.helpers import local_model_client

ASK = [ChatMessage(role="user", content="Name one colour.")]


@pytest.fixture
async def model(model_system: LocalCluster) -> AsyncIterator[OpenAICompatibleClient]:
    client = local_model_client(model_system, max_tokens=24)
    yield client
    await client.aclose()


def test_the_server_is_healthy_on_loopback_and_names_its_model(model_system: LocalCluster) -> None:
    assert model_system.model_url is not None and model_system.model_url.startswith("http://127.0.0.1:")
    models = httpx.get(f"{model_system.model_url}/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [LOCAL_MODEL]
    env = model_system.child_env()
    assert (env["AGORA_MODEL_BACKEND"], env["AGORA_MODEL_MODEL"]) == ("openai", LOCAL_MODEL)
    assert env["AGORA_MODEL_OPENAI_BASE_URL"] == model_system.model_url


async def test_the_openai_backend_gets_the_model_s_answer_within_its_output_limit(
    model: OpenAICompatibleClient,
) -> None:
    completion = await model.complete(ASK)
    assert completion.text.strip() and completion.model == LOCAL_MODEL
    # The server's own counts: the prompt went through the chat template, the answer is bounded.
    assert completion.usage.prompt_tokens > len(ASK[0].content.split())
    assert 0 < completion.usage.completion_tokens <= 24
    assert completion.finish_reason in ("stop", "length")


class Rating(BaseModel):
    colour: str = Field(min_length=1, max_length=20)
    stars: int = Field(ge=1, le=5)


async def test_a_schema_is_held_to_by_the_server_s_grammar(model_system: LocalCluster) -> None:
    ask = [ChatMessage(role="user", content="Rate the colour blue from 1 to 5 stars.")]
    client = local_model_client(model_system, max_tokens=64)
    try:
        rating, completion = await complete_json(client, ask, Rating)
    finally:
        await client.aclose()
    assert 1 <= rating.stars <= 5 and rating.colour
    assert completion.finish_reason == "stop"


async def test_json_cut_off_at_the_output_limit_is_a_typed_failure_naming_why(
    model_system: LocalCluster,
) -> None:
    ask = [ChatMessage(role="user", content="Rate the colour blue from 1 to 5 stars.")]
    client = local_model_client(model_system, max_tokens=3)
    try:
        with pytest.raises(ModelOutputInvalid, match="cut off at its output limit") as failed:
            await complete_json(client, ask, Rating)
    finally:
        await client.aclose()
    assert failed.value.text  # the partial answer is kept for the caller's log


async def test_the_dapr_backend_reaches_the_same_model_through_conversation_openai(
    model_system: LocalCluster, model_sidecar: DaprSidecar
) -> None:
    [caller] = model_system.replicas
    log = (model_system.logs / f"{caller.name}.daprd.log").read_text()
    assert "Component loaded: agora-llm (conversation.openai/v1)" in log
    client = DaprConversationClient(model_sidecar, "agora-llm", model=LOCAL_MODEL, timeout_s=60)
    completion = await client.complete(ASK)
    assert completion.text.strip() and completion.text != ASK[0].content  # an answer, not an echo
    assert completion.usage.completion_tokens > 0


async def test_services_configured_by_the_system_use_the_server(
    model_system: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in model_system.child_env().items():
        if name.startswith("AGORA_MODEL_"):
            monkeypatch.setenv(name, value)
    settings = ModelSettings()
    client = model_client_from_settings(settings, None)
    try:
        assert (await client.complete(ASK, max_tokens=8)).model == LOCAL_MODEL
    finally:
        await client.aclose()


async def test_a_server_that_is_gone_is_a_typed_failure(model_system: LocalCluster) -> None:
    assert model_system.model_url is not None
    client = OpenAICompatibleClient(
        model_system.model_url, None, LOCAL_MODEL, timeout_s=5, max_retries=1, backoff_s=0.01
    )
    server = model_system.infra("model-server")
    server.kill()
    try:
        with pytest.raises(ModelUnavailable, match="gave up after 2 attempt"):
            await client.complete(ASK)
    finally:
        await client.aclose()
        model_system.restart_infra("model-server")


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


async def test_an_sdk_agent_calls_its_tool_natively_and_answers_from_the_result(
    model_system: LocalCluster,
) -> None:
    assert model_system.model_url is not None
    model = OpenAICompatibleClient(
        model_system.model_url,
        None,
        LOCAL_MODEL,
        timeout_s=60,
        max_tokens=64,
        required_call_prefill=LOCAL_MODEL_CALL_PREFILL,
    )
    runner = AgentRunner(
        model, ToolExecutor([multiply]), config=RunnerConfig(max_iterations=3, tool_choice="required")
    )
    try:
        result = await runner.run(
            AgentDefinition(name="calc"), "What is 17 times 23? Use the multiply tool.", session_id="native-1"
        )
    finally:
        await model.aclose()
    assert result.status is RunStatus.COMPLETED, result.reason
    [call] = result.tool_results
    assert call.name == "multiply" and call.ok and call.output == str(int(call.output))
    # The conversation carries the call and its result natively, linked by the call's id.
    [asked] = [m for m in result.messages if m.tool_calls]
    [answered] = [m for m in result.messages if m.role == "tool"]
    assert asked.tool_calls[0].name == "multiply" and answered.tool_call_id == asked.tool_calls[0].id
    assert result.output  # the model's text after reading the result
