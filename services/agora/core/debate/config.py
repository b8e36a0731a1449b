"""Who debates and how: each debater's model, persona, vote weight and price (`DebaterConfig`,
and what a call of its model costs, `position_cost`), and a debate's config (`DebateConfig`:
the debaters, rounds, aggregation, convergence and escalate thresholds, adaptive routing, the
judge, the budget, the gate); a debater's model that cannot be used is refused
(`UnusableModel`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agora.core.errors import AgoraError
from agora.core.limits import Note
from agora.core.planning import TokenUsage

__all__ = [
    "MAX_DEBATERS",
    "MAX_ROUNDS",
    "AggregationStrategy",
    "DebateConfig",
    "DebaterConfig",
    "DebaterId",
    "UnusableModel",
    "position_cost",
]

MAX_DEBATERS = 8
MAX_ROUNDS = 10

DebaterId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


class AggregationStrategy(StrEnum):
    MAJORITY_VOTE = "MAJORITY_VOTE"
    """Largest cluster; its highest-confidence member is the answer."""
    WEIGHTED_VOTE = "WEIGHTED_VOTE"
    """Clusters scored by the sum of debater weight * confidence."""
    JUDGE = "JUDGE"
    """A separate judge model synthesizes all positions."""


class DebaterConfig(BaseModel):
    """One debater: its model (backend, model id, temperature), persona and vote weight."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    debater_id: DebaterId
    backend: Literal["offline", "dapr", "openai"] = Field(
        default="offline", description="The model backend (as AGORA_MODEL_BACKEND)."
    )
    model_id: str = Field(default="", max_length=256, description="The model; empty: the backend's default.")
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    role_hint: Note = Field(default="", description="An optional persona, e.g. a skeptical devil's advocate.")
    weight: float = Field(default=1.0, gt=0.0, le=100.0, description="Vote weight for WEIGHTED_VOTE.")
    usd_per_1k_tokens: float = Field(
        default=0.0,
        ge=0.0,
        le=1000.0,
        description="The model's price in USD per 1,000 tokens, for the cost budget.",
    )


class DebateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    debaters: list[DebaterConfig] = Field(min_length=2, max_length=MAX_DEBATERS)
    max_rounds: int = Field(default=3, ge=1, le=MAX_ROUNDS)
    aggregation: AggregationStrategy = AggregationStrategy.WEIGHTED_VOTE
    convergence_threshold: float = Field(
        default=0.8, ge=0.0, le=1.0, description="Stop early when this share agrees."
    )
    adaptive_routing: bool = Field(
        default=True, description="Skip the debate when the routing model is confident."
    )
    routing_confidence_threshold: float = Field(default=0.85, ge=0.0, le=1.0)
    routing_debater: DebaterConfig | None = Field(
        default=None, description="The model asked first (adaptive routing); None: the first debater."
    )
    judge_config: DebaterConfig | None = Field(default=None, description="The judge model, for JUDGE.")
    cost_budget_usd: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    escalate_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    gate: Literal["threshold", "conformal"] = Field(
        default="threshold",
        description="How to choose between acting and escalating: the convergence threshold "
        "(`escalate_threshold`), or the conformal gate calibrated on recorded debate outcomes.",
    )
    conformal_alpha: float = Field(
        default=0.1, gt=0.0, lt=1.0, description="The conformal gate's error rate (alpha)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> DebateConfig:
        ids = [d.debater_id for d in self.debaters]
        if len(set(ids)) != len(ids):
            raise ValueError("debater_id must be unique among the debaters")
        if self.aggregation is AggregationStrategy.JUDGE and self.judge_config is None:
            raise ValueError("JUDGE aggregation needs a judge_config")
        return self

    @property
    def router(self) -> DebaterConfig:
        return self.routing_debater or self.debaters[0]


class UnusableModel(AgoraError):
    """A debater's model cannot be used here (e.g. the openai backend without a model id)."""

    code = "UNUSABLE_MODEL"
    http_status = 422


def position_cost(debater: DebaterConfig, usage: TokenUsage) -> float:
    """What one call of `debater`'s model cost: its tokens at the debater's price."""
    return usage.total_tokens / 1000 * debater.usd_per_1k_tokens
