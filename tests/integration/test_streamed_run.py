"""Streaming on the real local model (llama.cpp's server, serving SmolLM2-135M): the
OpenAI-compatible client passes the model's text on as the server writes it, with the server's
own usage and the time to the first token; Dapr's Conversation API, which cannot stream, gives
its answer as one piece; and an SDK agent's run, watched through `Agent.stream`, passes its
text, steps and tool results on before it ends. Nothing here depends on the model's wording."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agora.harness import LocalCluster
from agora.harness.cluster import LOCAL_MODEL, LOCAL_MODEL_CALL_PREFILL
from agora.llm import ChatMessage, DaprConversationClient, OpenAICompatibleClient
from agora.llm.client import streaming_text
from agora.runtime.sidecar import DaprSidecar
from agora.sdk import Agent, tool
from agora.sdk.runner import (
    AgentRunner,
    RunEnded,
    RunEvent,
    RunnerConfig,
    RunStatus,
    StepDecided,
    TextPiece,
    ToolCalled,
)
from agora.sdk.testing import TextPieces
from agora.sdk.tools import ToolExecutor
from tests.integration.helpers import local_model_client

STORY = [ChatMessage(role="user", content="Tell me a short story about a red fox.")]
ASK = [ChatMessage(role="user", content="Name one colour.")]
"""A question the model answers briefly (Dapr's Conversation API sets no output limit)."""


@pytest.fixture
async def model(model_system: LocalCluster) -> AsyncIterator[OpenAICompatibleClient]:
    client = local_model_client(model_system, max_tokens=32)
    yield client
    await client.aclose()


async def test_the_openai_backend_passes_the_model_s_text_on_as_the_server_writes_it(
    model: OpenAICompatibleClient, spans: InMemorySpanExporter
) -> None:
    pieces = TextPieces()
    asked_at = time.monotonic()
    with streaming_text(pieces):
        completion = await model.complete(STORY)
    answered_at = time.monotonic()

    assert len(pieces.pieces) >= 5 and "".join(pieces.pieces) == completion.text
    # The server's own counts: the prompt went through the chat template; each piece is at
    # least one of the answer's tokens.
    assert completion.usage.prompt_tokens > len(STORY[0].content.split())
    assert len(pieces.pieces) <= completion.usage.completion_tokens <= 32
    assert completion.finish_reason in ("stop", "length") and completion.model == LOCAL_MODEL
    # Written token by token: the pieces came over a stretch of time, the first one well before
    # the answer was whole.
    assert pieces.times == sorted(pieces.times) and pieces.times[-1] - pieces.times[0] > 0.05
    first = completion.time_to_first_token_s
    assert first is not None and 0 < first < answered_at - asked_at
    assert pieces.times[0] - asked_at == pytest.approx(first, abs=0.05)
    [span] = [s for s in spans.get_finished_spans() if s.name == f"chat {LOCAL_MODEL}"]
    assert span.attributes is not None
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.response.time_to_first_chunk"] == first
    assert span.attributes["gen_ai.usage.output_tokens"] == completion.usage.completion_tokens


async def test_the_dapr_backend_which_cannot_stream_gives_its_answer_as_one_piece(
    model_sidecar: DaprSidecar,
) -> None:
    client = DaprConversationClient(model_sidecar, "agora-llm", model=LOCAL_MODEL, timeout_s=60)
    pieces = TextPieces()
    with streaming_text(pieces):
        completion = await client.complete(ASK)
    assert completion.text.strip() and pieces.pieces == [completion.text]
    assert completion.time_to_first_token_s is not None


async def test_an_sdk_agent_s_answer_arrives_piece_by_piece_before_its_run_ends(
    model: OpenAICompatibleClient,
) -> None:
    agent = Agent(
        "storyteller",
        runner=AgentRunner(model, config=RunnerConfig(react_pattern=False, learn_from_outcomes=False)),
        skills=["stories"],
    )
    arrived: list[tuple[RunEvent, float]] = []

    async for event in agent.stream(STORY[0].content):
        arrived.append((event, time.monotonic()))

    ended, ended_at = arrived[-1]
    assert isinstance(ended, RunEnded) and ended.status is RunStatus.COMPLETED and ended.result is not None
    pieces = [(e.text, at) for e, at in arrived if isinstance(e, TextPiece)]
    assert len(pieces) >= 5 and "".join(text for text, _ in pieces) == ended.result.output
    times = [at for _, at in arrived]
    assert times == sorted(times)
    first_at, last_at = pieces[0][1], pieces[-1][1]
    assert last_at - first_at > 0.05  # written over time, not handed over at the end
    assert first_at < last_at <= ended_at
    # The step, made of the whole answer, comes after its last piece, and the end after it.
    kinds = [e.kind for e, _ in arrived]
    last_piece = len(kinds) - 1 - kinds[::-1].index("text")
    assert kinds[last_piece + 1 :] == ["step", "end"]


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


async def test_a_watched_native_tool_run_passes_its_call_result_and_answer_on_in_order(
    model_system: LocalCluster,
) -> None:
    model = local_model_client(model_system, max_tokens=64, required_call_prefill=LOCAL_MODEL_CALL_PREFILL)
    runner = AgentRunner(
        model,
        ToolExecutor([multiply]),
        config=RunnerConfig(max_iterations=3, tool_choice="required", learn_from_outcomes=False),
    )
    agent = Agent("calc", runner=runner, skills=["arithmetic"])
    events: list[RunEvent] = []
    try:
        async for event in agent.stream("What is 17 times 23? Use the multiply tool."):
            events.append(event)
    finally:
        await model.aclose()

    ended = events[-1]
    assert isinstance(ended, RunEnded)
    assert ended.status is RunStatus.COMPLETED, ended.reason
    [(called_at, call)] = [
        (i, e) for i, e in enumerate(events) if isinstance(e, StepDecided) and e.decision.action == "tool"
    ]
    [(result_at, result)] = [(i, e) for i, e in enumerate(events) if isinstance(e, ToolCalled)]
    [(answered_at, answer)] = [
        (i, e) for i, e in enumerate(events) if isinstance(e, StepDecided) and e.decision.action == "final"
    ]
    assert call.decision.tool == "multiply" and result.result.name == "multiply" and result.step == call.step
    assert called_at < result_at < answered_at == len(events) - 2
    # The answer's text came after the tool's result, piece by piece, before the step it made.
    answer_pieces = [
        (i, e) for i, e in enumerate(events) if isinstance(e, TextPiece) and e.step == answer.step
    ]
    assert answer_pieces and all(result_at < i < answered_at for i, _ in answer_pieces)
    assert "".join(piece.text for _, piece in answer_pieces).strip() == ended.output
