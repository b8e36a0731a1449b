"""The one interface every model call in Agora goes through.

Agents, the market and the benchmarks depend on `ModelClient` only, so the backend (Dapr's
Conversation API, an OpenAI-compatible endpoint, or the deterministic offline stand-in) is a
deployment choice rather than a code change. Tracing lives in `TracedModelClient`, the base
class of every backend, so each call produces the same OpenTelemetry GenAI span whichever
backend served it.

A caller that wants an answer's text as it arrives wraps its calls in `streaming_text`: the
backends that stream (the OpenAI-compatible client) pass each piece on as the server sends it,
and `TracedModelClient` passes on whatever a backend did not (all of it, for one that cannot
stream), so the pieces always add up to the completion's text. Wrappers that forward
`complete()` (routers, meters, an app's bound model) need not know of it.
"""

from __future__ import annotations

import functools
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic import BaseModel, Field, ValidationError

from agora.runtime.tracing import tracer

T = TypeVar("T", bound=BaseModel)

Role = Literal["system", "user", "assistant", "tool"]
ToolChoice = Literal["auto", "required", "none"]
"""Whether the model may call a tool (`auto`), must (`required`) or must not (`none`)."""


class ToolSpec(BaseModel):
    """A tool as a model is told of it: the function entry of an OpenAI `tools` list."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ModelToolCall(BaseModel):
    """A tool call as the model made it natively (`tool_calls`): `arguments` is the model's
    JSON text, unparsed, for the caller to validate like any input."""

    id: str
    name: str
    arguments: str = "{}"


class ChatMessage(BaseModel):
    role: Role
    content: str
    # Both left out of JSON when unset: a run's saved conversation stays as small as before, and
    # apps of an earlier version read it while a release rolls.
    tool_calls: list[ModelToolCall] = Field(default_factory=list, exclude_if=lambda calls: not calls)
    """An assistant's native tool calls."""
    tool_call_id: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """A `tool` message: the call it answers."""


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Completion(BaseModel):
    text: str
    model: str
    """The model that answered (the vendor's name for it when the backend reports one)."""
    backend: str
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    """Why the model stopped, as the backend says it: `stop`, `length` (cut off at the output
    limit), `tool_calls`...; None when the backend does not say."""
    tool_calls: list[ModelToolCall] = Field(default_factory=list)
    """The tools the model called natively (with `tools` given)."""
    time_to_first_token_s: float | None = Field(default=None, exclude_if=lambda value: value is None)
    """For a call made within `streaming_text`: seconds from the request until its first output
    (text or a tool call) arrived; for a backend that cannot stream, until the whole answer did.
    None for other calls."""

    @property
    def cut_off(self) -> bool:
        """The answer ran into the output limit, so it may end mid-sentence or mid-JSON."""
        return self.finish_reason == "length"


class ModelError(Exception):
    """A model call failed in a way retrying the same request will not fix."""


class ModelUnavailable(ModelError):
    """The backend could not be reached or kept failing (transport errors, 5xx) after retries."""


ANSWER_AGAIN = "Answer again with the JSON object only."
"""How a re-ask ends, unless its caller shows the shape it wants."""
ASKED_AGAIN_ANSWER_CHARS = 2048
"""How much of an invalid answer goes back to the model when it is asked again."""


class ModelOutputInvalid(ModelError):
    """The model answered, but not with what was asked for; `text` is the raw answer, `usage`
    what the answer cost (it was paid for all the same)."""

    def __init__(
        self,
        message: str,
        text: str,
        error: Exception | None = None,
        *,
        usage: Usage | None = None,
        cut_off: bool = False,
    ) -> None:
        super().__init__(message)
        self.text = text
        self.error = error
        self.usage = usage or Usage()
        self.cut_off = cut_off
        """The answer ran into its output limit (so its JSON may be unfinished)."""

    @property
    def problem(self) -> str:
        """What was wrong with the answer, as the model is told it when asked again: each field
        that does not fit (its name and why, five at most), cut off at the output limit (then:
        answer more briefly), or no JSON object."""
        if self.cut_off and not isinstance(self.error, ValidationError):
            return "it was cut off at the output limit before its JSON object ended. Answer more briefly."
        if isinstance(self.error, ValidationError):
            fields = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'the object'}: {error['msg']}"
                for error in self.error.errors()[:5]
            )
            return f"{fields}."
        return "it holds no JSON object."

    def asked_again(self, instruction: str = ANSWER_AGAIN) -> list[ChatMessage]:
        """The turns that ask the model again: its invalid answer, and what was wrong with it."""
        return [
            ChatMessage(role="assistant", content=self.text[:ASKED_AGAIN_ANSWER_CHARS]),
            ChatMessage(role="user", content=f"That answer is not valid: {self.problem} {instruction}"),
        ]


class ModelClient(Protocol):
    backend: str

    @property
    def supports_tools(self) -> bool:
        """Whether `tools` reach the model as native tool definitions (and calls come back as
        `Completion.tool_calls`); a client without is asked in text (the runner's JSON steps)."""
        ...

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice = "auto",
    ) -> Completion: ...

    async def aclose(self) -> None: ...


class MeteredModel:
    """A model client that adds up the calls made through it (one step's usage): how many, their
    tokens, and their wall time, failed calls included; the wrapped client stays its creator's
    to close."""

    def __init__(self, model: ModelClient) -> None:
        self._model = model
        self.backend = model.backend
        self.supports_tools = model.supports_tools
        self.calls = 0
        self.seconds = 0.0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice = "auto",
    ) -> Completion:
        started = time.monotonic()
        self.calls += 1
        try:
            completion = await self._model.complete(
                messages,
                json_schema=json_schema,
                temperature=temperature,
                max_tokens=max_tokens,
                tools=tools,
                tool_choice=tool_choice,
            )
        finally:
            self.seconds += time.monotonic() - started
        self.prompt_tokens += completion.usage.prompt_tokens
        self.completion_tokens += completion.usage.completion_tokens
        return completion

    async def aclose(self) -> None:
        return None


@dataclass(frozen=True)
class ModelPrice:
    """What a model's tokens cost, in USD per 1,000 (the router's `ModelSpec` prices)."""

    input_usd_per_1k: float
    output_usd_per_1k: float

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_usd_per_1k + output_tokens * self.output_usd_per_1k) / 1000


_PRICE: ContextVar[ModelPrice | None] = ContextVar("agora_model_price", default=None)


@contextmanager
def priced_calls(price: ModelPrice) -> Iterator[None]:
    """Model calls made within (in this task) are priced at `price`: each call's span carries
    its cost as `agora.cost_usd`. The caller that knows the prices (the SDK's router) sets it;
    the backends stay unaware of prices."""
    token = _PRICE.set(price)
    try:
        yield
    finally:
        _PRICE.reset(token)


TextSink = Callable[[str], Awaitable[None]]
"""Takes each piece of an answer's text, in order, as it arrives."""

_TEXT_SINK: ContextVar[TextSink | None] = ContextVar("agora_model_text_sink", default=None)


@contextmanager
def streaming_text(on_text: TextSink) -> Iterator[None]:
    """Model calls made within (in this task) pass their answer's text to `on_text` piece by
    piece as it arrives, and still return the whole `Completion`; the pieces add up to its
    text. A backend that cannot stream passes its whole answer as one piece. Each piece is
    awaited before the answer is read on, so a slow `on_text` slows the call (the server's
    stream waits) and nothing piles up; an exception it raises ends the call with it."""
    token = _TEXT_SINK.set(on_text)
    try:
        yield
    finally:
        _TEXT_SINK.reset(token)


class AnswerStream:
    """Where a backend that streams (`TracedModelClient.streams`) puts its answer as it
    arrives: `text` for each piece of text, `began` at its first output of any kind (a tool
    call's first chunk)."""

    def __init__(self, sink: TextSink) -> None:
        self._sink = sink
        self._started = time.monotonic()
        self._passed: list[str] = []
        self.time_to_first_output_s: float | None = None

    @property
    def passed_on(self) -> bool:
        """Whether any text reached the caller (after which a retry would repeat it)."""
        return bool(self._passed)

    def began(self) -> None:
        if self.time_to_first_output_s is None:
            self.time_to_first_output_s = time.monotonic() - self._started

    async def text(self, piece: str) -> None:
        if not piece:
            return
        self.began()
        self._passed.append(piece)
        await self._sink(piece)

    async def finish(self, text: str) -> None:
        """Pass on what of the answer's `text` has not been passed yet: all of it for a backend
        that does not stream, nothing for one that passed every piece."""
        self.began()
        passed = "".join(self._passed)
        if text.startswith(passed):
            await self.text(text[len(passed) :])


class TracedModelClient(ABC):
    """Base class of the backends: wraps `_complete` in a CLIENT span that follows the
    OpenTelemetry GenAI semantic conventions (`chat {model}`, gen_ai.* attributes: operation
    `chat`, the requested and the answering model, input and output tokens) and, for a call
    priced by `priced_calls`, its cost in USD (`agora.cost_usd`).

    Within `streaming_text`, a backend that `streams` gets an `AnswerStream` (`answer`) to pass
    its pieces to; any text it did not pass (all of it, for a backend that does not stream) is
    passed here, once, as one piece. The span then says whether the request streamed
    (`gen_ai.request.stream`) and when the first output arrived
    (`gen_ai.response.time_to_first_chunk`, seconds), as does `Completion.time_to_first_token_s`."""

    backend: str = "unknown"
    model: str = "unknown"
    supports_tools: bool = False
    streams: bool = False
    """Whether `_complete` takes `answer` (an `AnswerStream`) and passes its text on as it arrives."""

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice = "auto",
    ) -> Completion:
        attributes: dict[str, str | int | float] = {
            "gen_ai.operation.name": "chat",
            # `gen_ai.system` is the older name of `gen_ai.provider.name`; both are set so
            # backends (Jaeger queries, dashboards) built on either convention find the span.
            "gen_ai.system": self.backend,
            "gen_ai.provider.name": self.backend,
            "gen_ai.request.model": self.model,
            "gen_ai.request.temperature": temperature,
            "gen_ai.output.type": "json" if json_schema is not None else "text",
        }
        if max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = max_tokens
        if tools and self.supports_tools:
            attributes["agora.tools"] = len(tools)
            attributes["agora.tool_choice"] = tool_choice
        sink = _TEXT_SINK.get()
        streamed = sink is not None and self.streams
        if sink is not None:
            attributes["gen_ai.request.stream"] = streamed
        with tracer("agora.llm").start_as_current_span(
            f"chat {self.model}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=True,
            set_status_on_exception=False,
        ) as span:
            answer = AnswerStream(sink) if sink is not None else None
            # A backend's own model calls (a wrapped client's) are not this answer's pieces.
            token = _TEXT_SINK.set(None)
            try:
                completion = await self._complete(
                    list(messages),
                    json_schema=json_schema,
                    temperature=temperature,
                    max_tokens=max_tokens,
                    **({"tools": list(tools), "tool_choice": tool_choice} if self.supports_tools else {}),
                    **({"answer": answer} if streamed else {}),
                )
                if answer is not None:
                    await answer.finish(completion.text)
            except BaseException as exc:
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                raise
            finally:
                _TEXT_SINK.reset(token)
            if answer is not None and answer.time_to_first_output_s is not None:
                completion = completion.model_copy(
                    update={"time_to_first_token_s": answer.time_to_first_output_s}
                )
                span.set_attribute("gen_ai.response.time_to_first_chunk", answer.time_to_first_output_s)
            span.set_attribute("gen_ai.response.model", completion.model)
            span.set_attribute("gen_ai.usage.input_tokens", completion.usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", completion.usage.completion_tokens)
            if completion.finish_reason is not None:
                span.set_attribute("gen_ai.response.finish_reasons", [completion.finish_reason])
            price = _PRICE.get()
            if price is not None:
                span.set_attribute(
                    "agora.cost_usd",
                    price.cost_usd(completion.usage.prompt_tokens, completion.usage.completion_tokens),
                )
            return completion

    @abstractmethod
    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None,
        temperature: float,
        max_tokens: int | None,
    ) -> Completion:
        """Do the backend call; errors must be `ModelError`s. A backend that `supports_tools`
        also takes `tools` (a list of `ToolSpec`) and `tool_choice`; one that `streams` takes
        `answer` (an `AnswerStream`, given when the caller wants the text as it arrives)."""

    async def aclose(self) -> None:
        """Release connections; a no-op for backends that hold none."""
        return None


def extract_json_object(text: str, *, outermost: bool = False) -> dict[str, Any]:
    """The first JSON object in `text`. Models wrap JSON in code fences or explanations even
    when told not to, so this scans for the first `{` that starts a complete, valid object;
    with `outermost`, only the first `{` is tried (an object nested in an unfinished one is
    not taken for the answer)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            pass
        else:
            if isinstance(value, dict):
                return value
        if outermost:
            break
        start = text.find("{", start + 1)
    raise ValueError("no JSON object found in the model's answer")


def schema_instruction(json_schema: dict[str, Any]) -> str:
    """Prompt text asking for JSON matching `json_schema`, for backends without a structured
    output option (or whose structured output support is best-effort)."""
    return (
        "Answer with a single JSON object and nothing else. It must conform to this JSON Schema:\n"
        + json.dumps(json_schema, sort_keys=True)
    )


@functools.cache
def _schema_of(output_type: type[BaseModel]) -> dict[str, Any]:
    """An output model's JSON Schema, built once per model (building it costs more than an
    offline completion). Callers get it read-only."""
    return output_type.model_json_schema()


async def complete_json(
    client: ModelClient,
    messages: Sequence[ChatMessage],
    output_type: type[T],
    *,
    temperature: float = 0.0,
    json_schema: dict[str, Any] | None = None,
    max_tokens: int | None = None,
    attempts: int = 1,
    again: str = ANSWER_AGAIN,
) -> tuple[T, Completion]:
    """Ask for an `output_type` and validate the answer; `ModelOutputInvalid` if the model did
    not produce one (the caller decides whether to re-ask or fall back). With `attempts` > 1,
    an invalid answer is asked again, with what was wrong and `again` (the instruction that
    ends the re-ask), until the attempts are spent; the last attempt's `ModelOutputInvalid` is
    raised.
    `json_schema` replaces the type's own schema in the request when the caller knows a
    narrower one (the values this call may take), which a server that turns schemas into
    grammars holds the model to."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    asked = list(messages)
    for attempt in range(1, attempts + 1):
        try:
            return await _completed_json(client, asked, output_type, temperature, json_schema, max_tokens)
        except ModelOutputInvalid as exc:
            if attempt == attempts:
                raise
            asked = [*asked, *exc.asked_again(again)]
    raise AssertionError("unreachable: the last attempt returns or raises")


async def _completed_json(
    client: ModelClient,
    messages: Sequence[ChatMessage],
    output_type: type[T],
    temperature: float,
    json_schema: dict[str, Any] | None,
    max_tokens: int | None,
) -> tuple[T, Completion]:
    completion = await client.complete(
        messages,
        json_schema=json_schema if json_schema is not None else _schema_of(output_type),
        temperature=temperature,
        max_tokens=max_tokens,
    )
    try:
        # An answer cut off at its output limit has no object of its own to read: an object
        # found inside it is one of its parts (a subgoal of an unfinished plan), never the answer.
        raw = extract_json_object(completion.text, outermost=completion.cut_off)
    except ValueError as exc:
        reason = "was cut off at its output limit" if completion.cut_off else "holds no JSON object"
        raise ModelOutputInvalid(
            f"{client.backend} answer {reason} for {output_type.__name__}",
            completion.text,
            exc,
            usage=completion.usage,
            cut_off=completion.cut_off,
        ) from exc
    try:
        return output_type.model_validate(raw), completion
    except ValidationError as exc:
        raise ModelOutputInvalid(
            f"{client.backend} answer is not a valid {output_type.__name__}: {exc.error_count()} error(s)",
            completion.text,
            exc,
            usage=completion.usage,
            cut_off=completion.cut_off,
        ) from exc
