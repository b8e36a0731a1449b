"""Parts for testing agents and apps without a model vendor or a sidecar.

    from agora.sdk import Agent, tool
    from agora.sdk.testing import ScriptedModel, call_tool, final

    model = ScriptedModel(call_tool("add", a=2, b=3), final("5"))
    agent = Agent("calc", model, tools=[add], skills=["arithmetic"])
    assert agent.run_sync("What is 2 + 3?").output == "5"
    assert model.asked[1][-1].content.startswith("Result of tool add")

`ScriptedModel` answers a run's steps in order (each a `final` answer, a `call_tool`, a text,
or a function of the messages); `FunctionModel` answers every call with a function of the
messages; `RecordingPublisher` keeps what an app publishes;
`MemoryRepository` is a state repository in memory with the Dapr state API's etags.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel

from agora.core.topics import Channel
from agora.llm import ChatMessage, Completion, ModelUnavailable, TracedModelClient, Usage
from agora.runtime.sidecar import DaprError
from agora.runtime.state import StateRepository, Versioned

__all__ = [
    "FunctionModel",
    "MemoryRepository",
    "RecordingPublisher",
    "ScriptedModel",
    "ScriptedStep",
    "TextPieces",
    "call_tool",
    "final",
]

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class ScriptedStep:
    """One answer of a `ScriptedModel` to an agent's step: a tool call or a final answer."""

    action: str
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    answer: str = ""
    succeeded: bool = True
    confidence: float = 0.9
    thought: str = ""

    def text(self) -> str:
        """The step as the runner's step protocol (JSON) carries it."""
        step: dict[str, Any] = {"thought": self.thought, "action": self.action, "confidence": self.confidence}
        if self.action == "tool":
            step |= {"tool": self.tool, "arguments": self.arguments}
        else:
            step |= {"answer": self.answer, "succeeded": self.succeeded}
        return json.dumps(step)


def final(answer: str, *, succeeded: bool = True, confidence: float = 0.9, thought: str = "") -> ScriptedStep:
    """A final answer (`succeeded=False`: the agent says it could not do the task)."""
    return ScriptedStep("final", answer=answer, succeeded=succeeded, confidence=confidence, thought=thought)


def call_tool(name: str, /, *, thought: str = "", confidence: float = 0.9, **arguments: Any) -> ScriptedStep:
    """A call of tool `name` with `arguments`."""
    return ScriptedStep("tool", tool=name, arguments=arguments, confidence=confidence, thought=thought)


Answer = ScriptedStep | str | Callable[[Sequence[ChatMessage]], "ScriptedStep | str"]


class _AnsweringModel(TracedModelClient):
    """A model whose answers the test (or the example) gives: every request is kept in `asked`,
    the temperature it was asked at in `temperatures`."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.asked: list[list[ChatMessage]] = []
        self.temperatures: list[float] = []

    def _answer(self, messages: Sequence[ChatMessage], turn: int) -> ScriptedStep | str:
        raise NotImplementedError

    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None,
        temperature: float,
        max_tokens: int | None,
    ) -> Completion:
        turn = len(self.asked)
        self.asked.append(list(messages))
        self.temperatures.append(temperature)
        given = self._answer(messages, turn)
        text = given.text() if isinstance(given, ScriptedStep) else given
        prompt_tokens = sum(len(m.content.split()) for m in messages)
        return Completion(
            text=text,
            model=self.model,
            backend=self.backend,
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=len(text.split())),
        )


class ScriptedModel(_AnsweringModel):
    """A `ModelClient` that gives its answers in order, one per call, and keeps every request
    (`asked`). An answer is a `ScriptedStep`, a text, or a function of the messages that
    returns one. A call past the last answer raises `ModelUnavailable`, which a run reports as
    its failure: a test sees that its script was too short."""

    backend = "scripted"

    def __init__(self, *answers: Answer, model: str = "scripted") -> None:
        super().__init__(model)
        self._answers = list(answers)

    @property
    def remaining(self) -> int:
        """Answers not given yet."""
        return max(0, len(self._answers) - len(self.asked))

    def _answer(self, messages: Sequence[ChatMessage], turn: int) -> ScriptedStep | str:
        if turn >= len(self._answers):
            raise ModelUnavailable(f"the scripted model has no answer left ({len(self._answers)} given)")
        answer = self._answers[turn]
        return answer(messages) if callable(answer) else answer


class FunctionModel(_AnsweringModel):
    """A `ModelClient` whose every answer is `answer(messages)`: a `ScriptedStep` (`call_tool`,
    `final`) or a text. For an agent that must behave the same on every task without a model
    vendor (an example, a demo, a load test)."""

    backend = "function"

    def __init__(
        self, answer: Callable[[Sequence[ChatMessage]], ScriptedStep | str], *, model: str = "function"
    ) -> None:
        super().__init__(model)
        self._function = answer

    def _answer(self, messages: Sequence[ChatMessage], turn: int) -> ScriptedStep | str:
        return self._function(messages)


class TextPieces:
    """A text sink (`agora.llm.streaming_text`) that keeps each piece of an answer and when it
    came (`time.monotonic()`), for a test of what arrived and in what order."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.times: list[float] = []

    async def __call__(self, piece: str) -> None:
        self.pieces.append(piece)
        self.times.append(time.monotonic())


class RecordingPublisher:
    """An app's publisher that keeps what is published instead of sending it: `sent` holds
    (topic, payload, message id) in order, `replies_to` each publish's `reply_to`, `pubsubs` the
    component each went to (None: the app's default)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any, str | None]] = []
        self.replies_to: list[str | None] = []
        self.pubsubs: list[str | None] = []

    async def publish(
        self,
        channel: Channel[Any],
        payload: Any,
        *,
        pubsub: str | None = None,
        message_id: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        self.sent.append((channel.name, payload, message_id))
        self.replies_to.append(reply_to)
        self.pubsubs.append(pubsub)
        return message_id or ""

    def on(self, channel: Channel[Any]) -> list[Any]:
        """The payloads published on `channel`, in order."""
        return [payload for topic, payload, _ in self.sent if topic == channel.name]


class MemoryRepository(Generic[M]):
    """A `StateRepository` in memory, with etags, first writes (`only_if_absent`), transactions
    and TTLs as the Dapr state API has them (a TTL is noted in `ttls`, never applied). `values`
    holds what is stored (JSON and etag per key), `calls` counts the calls."""

    def __init__(self, model: type[M]) -> None:
        self.model = model
        self.values: dict[str, tuple[Any, str]] = {}
        self.calls = 0
        self.ttls: dict[str, int] = {}
        """The state TTL each key was last written with."""
        self._etags = itertools.count(1)

    def typed(self) -> StateRepository[M]:
        return cast(StateRepository[M], self)

    async def _call(self) -> None:
        self.calls += 1
        await asyncio.sleep(0)  # a real call yields; other work queues up meanwhile

    async def get(self, item_id: str) -> Versioned[M] | None:
        await self._call()
        found = self.values.get(item_id)
        return Versioned(self.model.model_validate(found[0]), found[1]) if found else None

    async def get_many(self, item_ids: Iterable[str]) -> dict[str, Versioned[M]]:
        raw = await self.get_many_raw(item_ids)
        return {i: Versioned(self.model.model_validate(data), etag) for i, (data, etag) in raw.items()}

    async def get_many_raw(self, item_ids: Iterable[str]) -> dict[str, tuple[Any, str | None]]:
        await self._call()
        # copies, as a store answers: a caller may change what it read
        return {i: copy.deepcopy(self.values[i]) for i in item_ids if i in self.values}

    def _expire(self, ttl_seconds: Mapping[str, int]) -> None:
        """Note each key's state TTL as the store would set it (the fake never expires a key)."""
        self.ttls.update(ttl_seconds)

    def _put(self, item_id: str, value: BaseModel, etag: str | None, only_if_absent: bool) -> None:
        stored = self.values.get(item_id)
        if only_if_absent and etag is None and stored is not None:
            raise DaprError(409, "ERR_STATE_SAVE", f"failed to set key {item_id}: it exists")
        if etag is not None and (stored is None or stored[1] != etag):
            raise DaprError(409, "ERR_STATE_SAVE", f"etag mismatch on {item_id}")
        self.values[item_id] = (value.model_dump(mode="json"), str(next(self._etags)))

    async def save(
        self,
        item_id: str,
        value: M,
        *,
        etag: str | None = None,
        only_if_absent: bool = False,
        ttl_seconds: int | None = None,
    ) -> None:
        await self._call()
        self._put(item_id, value, etag, only_if_absent)
        self._expire({item_id: ttl_seconds} if ttl_seconds is not None else {})

    async def save_many(
        self,
        values: dict[str, M],
        *,
        only_if_absent: bool = False,
        ttl_seconds: Mapping[str, int] | None = None,
    ) -> None:
        await self._call()
        self._expire(ttl_seconds or {})
        refused = []
        for item_id, value in values.items():
            try:
                self._put(item_id, value, None, only_if_absent)
            except DaprError:
                refused.append(item_id)
        if refused:
            raise DaprError(409, "ERR_STATE_SAVE", f"failed to set keys {refused}")

    async def transact(
        self, values: dict[str, M], *, etags: dict[str, str], ttl_seconds: Mapping[str, int] | None = None
    ) -> None:
        await self.transact_json(
            {key: value.model_dump(mode="json") for key, value in values.items()},
            etags=etags,
            ttl_seconds=ttl_seconds,
        )

    async def transact_json(
        self, values: dict[str, Any], *, etags: dict[str, str], ttl_seconds: Mapping[str, int] | None = None
    ) -> None:
        await self._call()
        self._expire(ttl_seconds or {})
        assert set(etags) == set(values), "every key of a transaction is guarded by its etag"
        for key, etag in etags.items():
            stored = self.values.get(key)
            if stored is None or stored[1] != etag:
                raise DaprError(409, "ERR_STATE_TRANSACTION", f"etag mismatch on {key}")
        for key, value in values.items():
            # stored as a copy, as a store would: the caller's value may be changed after
            self.values[key] = (copy.deepcopy(value), str(next(self._etags)))

    async def delete(self, item_id: str, *, etag: str | None = None) -> None:
        await self._call()
        self.values.pop(item_id, None)
