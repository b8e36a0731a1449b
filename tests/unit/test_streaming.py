"""An answer's text as it arrives: the model clients pass it on piece by piece within
`streaming_text` (a backend that cannot stream as one piece), and the runner passes a run's
pieces, steps, tool results and end on to whoever watches it, `Agent.stream` among them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import TypeAdapter

import agora.sdk._agent
from agora.core.errors import MaxIterationsExceeded
from agora.core.models import ModelTier
from agora.llm import (
    ChatMessage,
    Completion,
    MeteredModel,
    ModelClient,
    ModelError,
    ModelUnavailable,
    OfflineModelClient,
    OpenAICompatibleClient,
    TracedModelClient,
    Usage,
)
from agora.llm.client import AnswerStream, streaming_text
from agora.sdk import Agent, ModelRouter, ModelSpec, tool
from agora.sdk.runner import (
    AgentDefinition,
    AgentRunner,
    AgentState,
    ExecutionResult,
    InMemoryStateStore,
    ReactStep,
    RunEnded,
    RunEvent,
    RunnerConfig,
    RunStatus,
    StepCheck,
    StepDecided,
    StepRejected,
    TextDiscarded,
    TextPiece,
    ToolCalled,
)
from agora.sdk.testing import ScriptedModel, TextPieces, call_tool, final
from agora.sdk.tools import ToolExecutor

ASK = [ChatMessage(role="user", content="Name one colour.")]


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


class PieceByPieceModel(TracedModelClient):
    """A backend that streams: each answer given as pieces, `pause_s` before each one; one
    listed in `breaks_after` passes that many pieces, then fails as a broken stream does.
    `produced` counts the pieces it passed on, `streamed` whether each call was asked to stream."""

    backend = "piece-by-piece"
    streams = True

    def __init__(
        self,
        *answers: list[str],
        model: str = "pieces",
        pause_s: float = 0.0,
        breaks_after: int | None = None,
    ) -> None:
        self.model = model
        self.answers = list(answers)
        self.pause_s = pause_s
        self.breaks_after = breaks_after
        self.produced = 0
        self.streamed: list[bool] = []

    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None,
        temperature: float,
        max_tokens: int | None,
        answer: AnswerStream | None = None,
    ) -> Completion:
        pieces = self.answers.pop(0)
        self.streamed.append(answer is not None)
        for index, piece in enumerate(pieces):
            if self.breaks_after is not None and index == self.breaks_after:
                raise ModelUnavailable(f"{self.model}: the stream broke")
            await asyncio.sleep(self.pause_s)
            if answer is not None:
                await answer.text(piece)
            self.produced += 1
        text = "".join(pieces)
        return Completion(text=text, model=self.model, backend=self.backend, usage=Usage(completion_tokens=3))


def chat_span(spans: InMemorySpanExporter) -> Any:
    [span] = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    return span


# -- the model clients ---------------------------------------------------------------------------


async def test_a_backend_that_cannot_stream_passes_its_whole_answer_as_one_piece(
    spans: InMemorySpanExporter,
) -> None:
    pieces = TextPieces()
    with streaming_text(pieces):
        completion = await OfflineModelClient(latency_s=0.05).complete(ASK)

    assert pieces.pieces == [completion.text] and completion.text
    assert completion.time_to_first_token_s is not None and completion.time_to_first_token_s >= 0.05
    attributes = chat_span(spans).attributes
    assert attributes["gen_ai.request.stream"] is False
    assert attributes["gen_ai.response.time_to_first_chunk"] == completion.time_to_first_token_s


async def test_a_call_outside_streaming_text_records_no_first_token_and_keeps_its_json(
    spans: InMemorySpanExporter,
) -> None:
    completion = await OfflineModelClient().complete(ASK)

    assert completion.time_to_first_token_s is None
    assert "time_to_first_token_s" not in completion.model_dump(mode="json")
    attributes = chat_span(spans).attributes
    assert "gen_ai.request.stream" not in attributes
    assert "gen_ai.response.time_to_first_chunk" not in attributes


async def test_wrappers_that_only_forward_complete_pass_the_pieces_on_unchanged() -> None:
    class Forwarding:
        """A wrapper as an app's own may be: it knows nothing of streaming."""

        backend = "forwarding"
        supports_tools = False

        def __init__(self, model: ModelClient) -> None:
            self.model = model

        async def complete(self, messages: Sequence[ChatMessage], **options: Any) -> Completion:
            return await self.model.complete(messages, **options)

        async def aclose(self) -> None:
            return None

    inner = PieceByPieceModel(["Bl", "ue"])
    metered = MeteredModel(Forwarding(inner))  # type: ignore[arg-type]
    pieces = TextPieces()
    with streaming_text(pieces):
        completion = await metered.complete(ASK)

    assert pieces.pieces == ["Bl", "ue"] and completion.text == "Blue"
    assert metered.completion_tokens == 3


async def test_a_backend_wrapping_another_passes_the_answer_once() -> None:
    class Delegating(TracedModelClient):
        backend = "delegating"

        def __init__(self) -> None:
            self.inner = PieceByPieceModel(["Gr", "een"])

        async def _complete(
            self,
            messages: list[ChatMessage],
            *,
            json_schema: dict[str, Any] | None,
            temperature: float,
            max_tokens: int | None,
        ) -> Completion:
            return await self.inner.complete(messages)

    pieces = TextPieces()
    with streaming_text(pieces):
        completion = await Delegating().complete(ASK)

    assert pieces.pieces == ["Green"] == [completion.text]


async def test_a_streaming_backend_s_first_piece_is_its_time_to_first_token() -> None:
    pieces = TextPieces()
    model = PieceByPieceModel(["Re", "d", "dish"], pause_s=0.1)
    started = time.monotonic()
    with streaming_text(pieces):
        completion = await model.complete(ASK)
    took = time.monotonic() - started

    assert pieces.pieces == ["Re", "d", "dish"]
    assert completion.time_to_first_token_s is not None
    assert 0.1 <= completion.time_to_first_token_s < took - 0.15  # the first of three pauses, not all
    assert pieces.times[0] - started == pytest.approx(completion.time_to_first_token_s, abs=0.05)


async def test_a_streaming_backend_s_text_it_did_not_pass_is_passed_after_it() -> None:
    class Late(PieceByPieceModel):
        async def _complete(self, messages: list[ChatMessage], **options: Any) -> Completion:
            completion = await super()._complete(messages, **options)
            return completion.model_copy(update={"text": completion.text + " and more"})

    pieces = TextPieces()
    with streaming_text(pieces):
        completion = await Late(["Vio", "let"]).complete(ASK)

    assert pieces.pieces == ["Vio", "let", " and more"]
    assert "".join(pieces.pieces) == completion.text


# -- the OpenAI-compatible client over server-sent events ------------------------------------------


@dataclass
class SseReply:
    """A reply of the stub: `events` (each the data of one server-sent event) sent as a chunked
    stream, `pause_s` between them; `broken`: the connection closes before the stream's end.
    A `status` other than 200 is a JSON error instead."""

    events: list[Any] = field(default_factory=list)
    status: int = 200
    pause_s: float = 0.0
    broken: bool = False


class SseVendor:
    def __init__(self) -> None:
        self.replies: list[SseReply] = []
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                stub.requests.append(json.loads(self.rfile.read(length)))
                reply = stub.replies.pop(0)
                if reply.status != 200:
                    payload = b'{"error": {"message": "busy"}}'
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for event in reply.events:
                    data = event if isinstance(event, str) else json.dumps(event)
                    frame = f"data: {data}\n\n".encode()
                    self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
                    self.wfile.flush()
                    time.sleep(reply.pause_s)
                if reply.broken:
                    self.close_connection = True  # no last chunk: the body ends unfinished
                    return
                self.wfile.write(b"0\r\n\r\n")

            def handle(self) -> None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    super().handle()  # a client that stopped reading, or closed its idle connection

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)


def text_chunk(content: str | None, finish_reason: str | None = None, **delta: Any) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "model": "vendor-model-2025",
        "choices": [{"index": 0, "delta": {"content": content, **delta}, "finish_reason": finish_reason}],
    }


USAGE_CHUNK = {
    "object": "chat.completion.chunk",
    "model": "vendor-model-2025",
    "choices": [],
    "usage": {"prompt_tokens": 21, "completion_tokens": 3, "total_tokens": 24},
}


@pytest.fixture
def vendor() -> Iterator[SseVendor]:
    stub = SseVendor()
    stub.thread.start()
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


def client_for(vendor: SseVendor) -> OpenAICompatibleClient:
    return OpenAICompatibleClient(
        vendor.base_url, None, "gpt-test", timeout_s=5, backoff_s=0.01, max_retries=2
    )


async def test_a_streamed_call_passes_each_delta_and_takes_the_server_s_usage(vendor: SseVendor) -> None:
    vendor.replies = [
        SseReply(
            [text_chunk(None, role="assistant"), text_chunk("Blue"), text_chunk(" is"), text_chunk(" calm"),
             text_chunk(None, "stop"), USAGE_CHUNK, "[DONE]"],
            pause_s=0.05,
        )
    ]  # fmt: skip
    client = client_for(vendor)
    pieces = TextPieces()
    try:
        with streaming_text(pieces):
            completion = await client.complete(ASK, max_tokens=16)
    finally:
        await client.aclose()

    [request] = vendor.requests
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert pieces.pieces == ["Blue", " is", " calm"] and completion.text == "Blue is calm"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (21, 3)
    assert completion.finish_reason == "stop" and completion.model == "vendor-model-2025"
    assert completion.time_to_first_token_s is not None
    assert pieces.times[-1] - pieces.times[0] >= 0.08  # they came as the server sent them


async def test_tool_call_deltas_are_put_together_by_their_index(vendor: SseVendor) -> None:
    def call_delta(index: int, **fields: Any) -> dict[str, Any]:
        chunk = text_chunk(None)
        chunk["choices"][0]["delta"] = {"tool_calls": [{"index": index, **fields}]}
        return chunk

    vendor.replies = [
        SseReply(
            [call_delta(0, id="c-a", type="function", function={"name": "add", "arguments": '{"a"'}),
             call_delta(1, id="c-b", type="function", function={"name": "add", "arguments": ""}),
             call_delta(0, function={"arguments": ": 2}"}),
             call_delta(1, function={"arguments": '{"b": 3}'}),
             text_chunk(None, "tool_calls"), USAGE_CHUNK, "[DONE]"]
        )
    ]  # fmt: skip
    client = client_for(vendor)
    pieces = TextPieces()
    try:
        with streaming_text(pieces):
            completion = await client.complete(ASK)
    finally:
        await client.aclose()

    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("c-a", "add", '{"a": 2}'),
        ("c-b", "add", '{"b": 3}'),
    ]
    assert completion.text == "" and pieces.pieces == []
    assert completion.finish_reason == "tool_calls" and completion.time_to_first_token_s is not None


async def test_a_stream_refused_before_its_first_piece_is_retried(vendor: SseVendor) -> None:
    vendor.replies = [
        SseReply(status=503),
        SseReply([text_chunk("Red"), text_chunk(None, "stop"), "[DONE]"]),
    ]
    client = client_for(vendor)
    pieces = TextPieces()
    try:
        with streaming_text(pieces):
            completion = await client.complete(ASK)
    finally:
        await client.aclose()
    assert len(vendor.requests) == 2 and pieces.pieces == ["Red"] == [completion.text]


async def test_a_stream_that_breaks_after_its_first_piece_is_not_retried(vendor: SseVendor) -> None:
    vendor.replies = [
        SseReply([text_chunk("Ye"), text_chunk("ll")], broken=True),
        SseReply([text_chunk("Yellow"), text_chunk(None, "stop"), "[DONE]"]),
    ]
    client = client_for(vendor)
    pieces = TextPieces()
    try:
        with (
            streaming_text(pieces),
            pytest.raises(ModelUnavailable, match="the stream broke after its answer began"),
        ):
            await client.complete(ASK)
    finally:
        await client.aclose()
    assert len(vendor.requests) == 1 and pieces.pieces == ["Ye", "ll"]


async def test_a_stream_that_ends_without_finishing_is_a_typed_failure(vendor: SseVendor) -> None:
    vendor.replies = [SseReply([text_chunk("Pu")])]  # ends cleanly, but neither finished nor [DONE]
    client = client_for(vendor)
    try:
        with (
            streaming_text(TextPieces()),
            pytest.raises(ModelUnavailable, match="stream ended before the answer"),
        ):
            await client.complete(ASK)
    finally:
        await client.aclose()


async def test_a_text_sink_s_own_failure_ends_the_call_with_it_and_is_not_retried(vendor: SseVendor) -> None:
    vendor.replies = [SseReply([text_chunk("Teal"), text_chunk(None, "stop"), "[DONE]"])]

    async def refuses(piece: str) -> None:
        # A transport error of the caller's own connection, which is not the model's stream's
        raise httpx.ReadError("the reader's connection is gone")

    client = client_for(vendor)
    try:
        with streaming_text(refuses), pytest.raises(httpx.ReadError, match="the reader's connection is gone"):
            await client.complete(ASK)
    finally:
        await client.aclose()
    assert len(vendor.requests) == 1


async def test_a_call_outside_streaming_text_does_not_ask_for_a_stream(vendor: SseVendor) -> None:
    vendor.replies = [SseReply(status=400)]
    client = client_for(vendor)
    try:
        with pytest.raises(ModelError, match="HTTP 400"):
            await client.complete(ASK)
    finally:
        await client.aclose()
    assert "stream" not in vendor.requests[0]


# -- the runner's events -----------------------------------------------------------------------


class Watcher:
    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    async def __call__(self, event: RunEvent) -> None:
        self.events.append(event)


def runner_of(model: ModelClient | ModelRouter, **config: Any) -> AgentRunner:
    options = {"max_iterations": 4, "learn_from_outcomes": False, **config}
    return AgentRunner(model, ToolExecutor([add]), config=RunnerConfig(**options))


async def test_a_watched_run_passes_on_its_text_steps_tool_results_and_end_in_order() -> None:
    model = ScriptedModel(call_tool("add", a=2, b=3, thought="adding"), final("5"))
    watcher = Watcher()

    result = await runner_of(model).run(
        AgentDefinition(name="calc"), "2 + 3?", session_id="s-1", events=watcher
    )

    kinds = [(e.kind, getattr(e, "step", None)) for e in watcher.events]
    assert kinds == [("text", 1), ("step", 1), ("tool_result", 1), ("text", 2), ("step", 2), ("end", None)]
    text_1, decided_1, tool_1, text_2, decided_2, ended = watcher.events
    assert isinstance(text_1, TextPiece) and isinstance(text_2, TextPiece)
    said = [m.content for m in result.messages if m.role == "assistant"]
    assert [text_1.text, text_2.text] == said and text_1.model == "scripted"  # one piece per answer
    assert isinstance(decided_1, StepDecided) and decided_1.decision.tool == "add"
    assert decided_1.decision.thought == "adding"
    assert isinstance(tool_1, ToolCalled) and tool_1.result.output == "5.0"
    assert isinstance(decided_2, StepDecided) and decided_2.decision.answer == "5"
    assert isinstance(ended, RunEnded) and ended.status is RunStatus.COMPLETED and ended.output == "5"
    assert ended.result == result
    times = [e.at for e in watcher.events]
    assert times == sorted(times)


async def test_a_run_nobody_watches_asks_its_model_for_no_stream() -> None:
    model = PieceByPieceModel(['{"action": "final", ', '"answer": "ok"}'])

    result = await runner_of(model).run(AgentDefinition(name="a"), "task", session_id="s-1")

    assert result.output == "ok" and model.streamed == [False]


async def test_an_answer_that_is_no_step_is_passed_on_as_rejected() -> None:
    model = ScriptedModel("no JSON here", final("done"))
    watcher = Watcher()

    await runner_of(model).run(AgentDefinition(name="a"), "task", session_id="s-1", events=watcher)

    [rejected] = [e for e in watcher.events if isinstance(e, StepRejected)]
    assert rejected.step == 1 and "not one JSON object" in rejected.reason
    assert [e.step for e in watcher.events if isinstance(e, StepDecided)] == [2]


async def test_a_run_that_raises_ends_its_events_failed_and_still_raises() -> None:
    model = ScriptedModel(*[call_tool("add", a=1, b=1)] * 2)
    watcher = Watcher()

    with pytest.raises(MaxIterationsExceeded):
        await runner_of(model, max_iterations=2).run(
            AgentDefinition(name="a"), "task", session_id="s-1", events=watcher
        )

    ended = watcher.events[-1]
    assert isinstance(ended, RunEnded) and ended.status is RunStatus.FAILED and ended.result is None
    assert ended.reason.startswith("MaxIterationsExceeded")
    assert [e.kind for e in watcher.events].count("tool_result") == 2


async def test_a_sink_that_fails_stops_the_events_but_not_the_run() -> None:
    seen: list[RunEvent] = []

    async def breaks(event: RunEvent) -> None:
        seen.append(event)
        raise RuntimeError("the watcher went away")

    model = ScriptedModel(call_tool("add", a=1, b=2), final("3"))
    result = await runner_of(model).run(AgentDefinition(name="a"), "task", session_id="s-1", events=breaks)

    assert result.status is RunStatus.COMPLETED and result.output == "3"
    assert len(seen) == 1 and model.remaining == 0


async def test_a_broken_stream_s_pieces_are_discarded_when_the_router_falls_back() -> None:
    first = PieceByPieceModel(['{"action": ', '"fi', 'nal"}'], model="first", breaks_after=2)
    second = PieceByPieceModel(['{"action": "final", ', '"answer": "ok"}'], model="second")
    router = ModelRouter(
        [
            ModelSpec(model_id="first", tier=ModelTier.BALANCED),
            ModelSpec(model_id="second", tier=ModelTier.FAST),
        ],
        {"first": first, "second": second},
    )
    watcher = Watcher()

    result = await runner_of(router).run(AgentDefinition(name="a"), "task", session_id="s-1", events=watcher)

    assert result.output == "ok" and first.streamed == second.streamed == [True]
    streamed = [(e.kind, getattr(e, "model", None)) for e in watcher.events if e.kind.startswith("text")]
    assert streamed == [("text", "first"), ("text", "first"), ("text_discarded", "first"),
                        ("text", "second"), ("text", "second")]  # fmt: skip
    second_pieces = [e.text for e in watcher.events if isinstance(e, TextPiece) and e.model == "second"]
    assert "".join(second_pieces) == result.messages[-1].content


async def test_a_watched_run_without_the_react_loop_passes_its_answer_on() -> None:
    watcher = Watcher()
    model = PieceByPieceModel(["Four", "."])

    result = await runner_of(model, react_pattern=False).run(
        AgentDefinition(name="a"), "2 + 2?", session_id="s-1", events=watcher
    )

    assert [e.kind for e in watcher.events] == ["text", "text", "step", "end"]
    assert (
        isinstance(watcher.events[2], StepDecided)
        and watcher.events[2].decision.answer == result.output == "Four."
    )


async def test_a_resumed_run_passes_on_the_events_of_its_new_turn() -> None:
    class PauseFirstStep:
        async def check(self, state: AgentState, step: ReactStep) -> StepCheck:
            if state.iterations == 1:
                return StepCheck(action="pause", escalation_id="esc-1", reason="unsure")
            return StepCheck()

    store = InMemoryStateStore()
    model = ScriptedModel(final("maybe"), final("surely"))
    runner = AgentRunner(
        model, state_store=store, monitor=PauseFirstStep(), config=RunnerConfig(learn_from_outcomes=False)
    )
    first, second = Watcher(), Watcher()

    await runner.run(AgentDefinition(name="a"), "task", session_id="s-1", events=first)
    await runner.resume("a", "s-1", "go on", events=second)

    paused = first.events[-1]
    assert isinstance(paused, RunEnded) and paused.status is RunStatus.WAITING_FOR_HUMAN
    assert [e.kind for e in second.events] == ["text", "step", "end"]
    assert isinstance(second.events[1], StepDecided) and second.events[1].step == 2
    assert isinstance(second.events[-1], RunEnded) and second.events[-1].output == "surely"


def test_events_read_back_from_their_json_as_the_same_events() -> None:
    adapter: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)
    events: list[RunEvent] = [
        TextPiece(step=1, text='{"act', model="m"),
        TextDiscarded(step=1, model="m"),
        StepDecided(step=1, decision=ReactStep(action="tool", tool="add", arguments={"a": 1})),
        StepRejected(step=2, reason="empty"),
        RunEnded(status=RunStatus.FAILED, reason="gave up"),
    ]
    assert [adapter.validate_json(adapter.dump_json(e)) for e in events] == events


# -- Agent.stream --------------------------------------------------------------------------------


async def test_agent_stream_gives_the_pieces_while_the_run_goes_on_and_ends_with_its_result() -> None:
    model = PieceByPieceModel(['{"action": "final", ', '"answer": ', '"blue"}'], pause_s=0.05)
    agent = Agent("painter", model, skills=["colour"])
    arrived: list[tuple[RunEvent, float]] = []

    async for event in agent.stream("Name one colour."):
        arrived.append((event, time.monotonic()))

    events = [e for e, _ in arrived]
    ended = events[-1]
    assert isinstance(ended, RunEnded) and isinstance(ended.result, ExecutionResult)
    assert ended.result.output == "blue"
    pieces = [(e, at) for e, at in arrived if isinstance(e, TextPiece)]
    assert len(pieces) == 3
    assert arrived[-1][1] - pieces[0][1] >= 0.08  # the first piece came well before the end


async def test_agent_stream_raises_the_run_s_error_after_its_failed_end() -> None:
    agent = Agent("calc", ScriptedModel(call_tool("add", a=1, b=1)), tools=[add])
    kinds: list[str] = []

    with pytest.raises(ModelUnavailable, match="no answer left"):
        async for event in agent.stream("1 + 1?"):
            kinds.append(event.kind)

    assert kinds[-1] == "end"


async def test_agent_stream_holds_a_bounded_number_of_events_for_a_slow_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(agora.sdk._agent, "STREAM_BUFFER_EVENTS", 4)
    model = PieceByPieceModel(['{"action": "final", "answer": "', *["a"] * 40, '"}'])
    agent = Agent("slow", model, skills=["waiting"])
    taken = 0

    stream = agent.stream("Say a lot.")
    async for _ in stream:
        taken += 1
        if taken == 2:
            await asyncio.sleep(0.2)  # the run has all the time it needs, and must wait anyway
            # taken, the ones buffered, and the one the run waits to put
            assert model.produced <= taken + 4 + 1
    assert model.produced == 42


async def test_leaving_agent_stream_early_cancels_the_run() -> None:
    model = PieceByPieceModel(["a"] * 50, pause_s=0.01)
    agent = Agent("chatty", model, skills=["talking"], max_steps=1)

    stream = agent.stream("Talk.")
    async for _ in stream:
        break
    await stream.aclose()
    produced = model.produced
    await asyncio.sleep(0.1)

    assert produced < 50 and model.produced == produced
