"""Model routing: each step goes to the cheapest capable model.

Models are registered with a tier (fast, balanced, powerful) and prices. A step's name picks
its tier by the routing rules (the first rule whose substring the name contains wins; BALANCED
when none matches). A call that fails goes down the fallback chain of tiers (by default
BALANCED, FAST, POWERFUL, each tried once), so one vendor's outage does not stop an agent.
A call may have its answer's text passed on as it arrives (`on_text`), each piece with the
model that wrote it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agora.core.models import ModelTier
from agora.llm import (
    ChatMessage,
    Completion,
    ModelClient,
    ModelError,
    ModelPrice,
    ToolChoice,
    ToolSpec,
    priced_calls,
)
from agora.llm.client import streaming_text

__all__ = [
    "DEFAULT_FALLBACK_CHAIN",
    "ModelRouter",
    "ModelSpec",
    "ModelTier",
    "RoutedCompletion",
    "RoutedTextSink",
    "RoutingRule",
]


DEFAULT_FALLBACK_CHAIN = (ModelTier.BALANCED, ModelTier.FAST, ModelTier.POWERFUL)


class ModelSpec(BaseModel):
    """A model a router may use: its id (the key of its client), tier and prices."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_id: str = Field(min_length=1, max_length=200)
    tier: ModelTier
    input_usd_per_1k: float = Field(default=0.0, ge=0.0, description="USD per 1,000 input tokens.")
    output_usd_per_1k: float = Field(default=0.0, ge=0.0, description="USD per 1,000 output tokens.")

    @property
    def price(self) -> ModelPrice:
        return ModelPrice(self.input_usd_per_1k, self.output_usd_per_1k)

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        return self.price.cost_usd(input_tokens, output_tokens)


class RoutingRule(BaseModel):
    """Steps whose name contains `contains` go to a model of `tier`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    contains: str = Field(min_length=1, max_length=200)
    tier: ModelTier


class RoutedCompletion(BaseModel):
    """A completion and the model that gave it (after any fallback)."""

    completion: Completion
    model: ModelSpec
    attempts: int = Field(ge=1, description="Models tried, the answering one included.")


RoutedTextSink = Callable[[str, "ModelSpec"], Awaitable[None]]
"""Takes each piece of an answer's text as it arrives, with the model writing it."""


class ModelRouter:
    """Picks a model per step and falls back down the chain of tiers when a call fails."""

    def __init__(
        self,
        models: Sequence[ModelSpec],
        clients: Mapping[str, ModelClient],
        routing_rules: Sequence[RoutingRule] | None = None,
        fallback_chain: Sequence[ModelTier] | None = None,
    ) -> None:
        if not models:
            raise ValueError("a router needs at least one model")
        missing = [m.model_id for m in models if m.model_id not in clients]
        if missing:
            raise ValueError(f"no client for model(s) {', '.join(missing)}")
        self._models = list(models)
        self._clients = dict(clients)
        self._rules = list(routing_rules or [])
        self._chain = list(fallback_chain or DEFAULT_FALLBACK_CHAIN)

    @classmethod
    def single(cls, client: ModelClient, model: ModelSpec | None = None) -> ModelRouter:
        """A router over one model (every tier goes to it)."""
        spec = model or ModelSpec(model_id=getattr(client, "model", client.backend), tier=ModelTier.BALANCED)
        return cls([spec], {spec.model_id: client})

    def supports_tools(self, step_name: str) -> bool:
        """Whether every model a step may go to takes native tools (a fallback that does not
        would be handed tool messages it cannot read)."""
        return all(self._clients[spec.model_id].supports_tools for spec in self.candidates(step_name))

    def tier_for(self, step_name: str) -> ModelTier:
        rule = next((r for r in self._rules if r.contains in step_name), None)
        return rule.tier if rule is not None else ModelTier.BALANCED

    def candidates(self, step_name: str) -> list[ModelSpec]:
        """The models to try for a step, in order: the first registered of the step's tier,
        then the first of each tier of the fallback chain; a tier without a model is passed
        over; with none of those tiers registered, every model in registration order."""
        order: list[ModelSpec] = []
        for tier in [self.tier_for(step_name), *self._chain]:
            found = next((m for m in self._models if m.tier is tier), None)
            if found is not None and found not in order:
                order.append(found)
        return order or list(self._models)

    async def complete(
        self,
        step_name: str,
        messages: Sequence[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice = "auto",
        on_text: RoutedTextSink | None = None,
    ) -> RoutedCompletion:
        """Ask the step's model; on a `ModelError`, the next model of the chain. The last
        model's error is raised when every one failed. Each call is priced at its model's
        prices: its `chat` span carries the cost (`agora.cost_usd`). With `on_text`, the
        answer's text is passed on as it arrives (`agora.llm.client.streaming_text`), each
        piece with its model: pieces of a model whose stream broke are followed by the next
        model's."""
        failure: ModelError | None = None
        for attempt, spec in enumerate(self.candidates(step_name), start=1):
            try:
                with priced_calls(spec.price), self._streamed(on_text, spec):
                    completion = await self._clients[spec.model_id].complete(
                        messages,
                        json_schema=json_schema,
                        temperature=temperature,
                        max_tokens=max_tokens,
                        tools=tools,
                        tool_choice=tool_choice,
                    )
            except ModelError as exc:
                failure = exc
                continue
            return RoutedCompletion(completion=completion, model=spec, attempts=attempt)
        assert failure is not None
        raise failure

    @staticmethod
    def _streamed(on_text: RoutedTextSink | None, spec: ModelSpec) -> AbstractContextManager[None]:
        if on_text is None:
            return nullcontext()

        async def from_this_model(piece: str) -> None:
            await on_text(piece, spec)

        return streaming_text(from_this_model)
