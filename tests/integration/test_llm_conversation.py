"""DaprConversationClient through a real sidecar's Conversation API (alpha2), using the
`agora-llm` component of components/common (conversation.echo, which answers with the text of
the request's messages)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from pydantic import BaseModel

from agora.harness import LocalCluster
from agora.llm import ChatMessage, DaprConversationClient, ModelError, ModelUnavailable, complete_json
from agora.llm.dapr_conversation import structured_output_schema
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprSidecar


@pytest.fixture
async def sidecar(default_cluster: LocalCluster) -> AsyncIterator[DaprSidecar]:
    registry = default_cluster.replicas[0]
    settings = ServiceSettings(app_id="agora-tests", dapr_http_port=registry.endpoints.dapr_http_port)
    client = DaprSidecar(settings)
    yield client
    await client.aclose()


class Choice(BaseModel):
    option: str
    score: int


def test_conversation_component_loads_cleanly(default_cluster: LocalCluster) -> None:
    registry = default_cluster.replicas[0]
    log = (default_cluster.logs / f"{registry.name}.daprd.log").read_text()
    assert "Component loaded: agora-llm (conversation.echo/v1)" in log
    problems = [line for line in log.splitlines() if "agora-llm" in line and "level=error" in line]
    assert not problems


async def test_complete_returns_the_echoed_conversation(
    sidecar: DaprSidecar, spans: InMemorySpanExporter
) -> None:
    client = DaprConversationClient(sidecar, "agora-llm")
    completion = await client.complete(
        [
            ChatMessage(role="system", content="You are terse."),
            ChatMessage(role="user", content="Which agent should take the task?"),
        ]
    )
    assert completion.text == "You are terse.\nWhich agent should take the task?"
    assert completion.backend == "dapr-conversation" and completion.model == "agora-llm"
    # echo approximates tokens by the answer's word count
    assert completion.usage.prompt_tokens == completion.usage.completion_tokens == 9

    [span] = [s for s in spans.get_finished_spans() if s.name == "chat agora-llm"]
    assert span.kind is SpanKind.CLIENT
    assert (
        dict(span.attributes or {}).items()
        >= {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "dapr-conversation",
            "gen_ai.provider.name": "dapr-conversation",
            "gen_ai.request.model": "agora-llm",
            "gen_ai.usage.input_tokens": 9,
            "gen_ai.usage.output_tokens": 9,
        }.items()
    )


async def test_json_schema_goes_to_the_sidecar_and_the_prompt(sidecar: DaprSidecar) -> None:
    """The sidecar accepts the structured-output schema, and the instruction reaches the model
    (echo returns it); the echoed answer leads with the user's JSON, so it validates."""
    client = DaprConversationClient(sidecar, "agora-llm", model="echo")
    choice, completion = await complete_json(
        client, [ChatMessage(role="user", content='{"option": "agent-7", "score": 3}')], Choice
    )
    assert choice == Choice(option="agent-7", score=3)
    assert "JSON Schema" in completion.text and '"title": "Choice"' in completion.text
    assert completion.model == "echo"


async def test_unknown_component_is_a_model_error_naming_it(sidecar: DaprSidecar) -> None:
    client = DaprConversationClient(sidecar, "no-such-llm")
    with pytest.raises(ModelError, match="no-such-llm") as raised:
        await client.complete([ChatMessage(role="user", content="hello")])
    assert "ERR_CONVERSATION_NOT_FOUND" in str(raised.value)
    assert not isinstance(raised.value, ModelUnavailable)


class Tree(BaseModel):
    label: str
    children: list[Tree] = []


async def test_schemas_daprd_cannot_convert_travel_in_the_prompt_only(sidecar: DaprSidecar) -> None:
    """daprd's structured-output converter needs a `type` on every node; a recursive model
    cannot be inlined, so no responseFormat is sent and the prompt carries the schema."""
    assert structured_output_schema(Tree.model_json_schema()) is None
    client = DaprConversationClient(sidecar, "agora-llm")
    completion = await client.complete(
        [ChatMessage(role="user", content="Build a tree.")], json_schema=Tree.model_json_schema()
    )
    assert completion.text.startswith("Build a tree.\n\nAnswer with a single JSON object")
    assert '"$defs"' in completion.text
