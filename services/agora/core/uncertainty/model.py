"""The one way the monitor calls a model: chat messages in (`ModelMessage`, or anything with a
role and a content), answer text out (`ConfidenceModel`), so the core imports no client."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

__all__ = ["ConfidenceModel", "MessageLike", "MessageRole", "ModelMessage", "to_model_messages"]

MessageRole = Literal["system", "user", "assistant", "tool"]


class ModelMessage(BaseModel):
    """One chat message sent to a `ConfidenceModel` (mirrors `agora.llm.ChatMessage`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: MessageRole
    content: str


class MessageLike(Protocol):
    """Anything with a role and a content, e.g. `agora.llm.ChatMessage`, accepted as a prompt."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


class ConfidenceModel(Protocol):
    """The one way the estimator calls a model: chat messages in, answer text out.

    Kept minimal so the core imports no client. A service adapts its `ModelClient`, and bounds
    each call: a step's verdict waits for them (the monitor's app:
    `agora.uncertainty.app.confidence_model`)::

        async def ask(messages: list[ModelMessage], *, temperature: float) -> str:
            chat = [ChatMessage(role=m.role, content=m.content) for m in messages]
            asked = client.complete(chat, temperature=temperature, max_tokens=128)
            async with asyncio.timeout(3.0):
                return (await asked).text

    A call that fails or times out raises; the estimator leaves its signal out.
    """

    async def __call__(self, messages: list[ModelMessage], *, temperature: float) -> str: ...


def to_model_messages(messages: Sequence[MessageLike]) -> list[ModelMessage]:
    """`messages` as `ModelMessage`s (those that are one already kept as they are)."""
    return [
        message
        if isinstance(message, ModelMessage)
        else ModelMessage.model_validate({"role": message.role, "content": message.content})
        for message in messages
    ]
