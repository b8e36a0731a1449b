"""The allocator app: subscribes to the task intake and outcome topics."""

from __future__ import annotations

from fastapi import FastAPI
from pydantic import Field

from agora.allocator.estimates import ESTIMATES_PER_CALL, RATING_TOKENS
from agora.allocator.service import DEFAULT_AGENT_BID_MS, DEFAULT_MAX_IN_FLIGHT, MarketAllocator
from agora.core import topics
from agora.core.scoring import MARKET_EXPLORATION
from agora.llm import ModelSettings, model_client_from_settings
from agora.runtime.service import ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings

APP_ID = "allocator"


class AllocatorSettings(ServiceSettings):
    app_id: str = APP_ID
    registry_app_id: str = "registry"
    taskboard_app_id: str = "taskboard"
    bid_timeout_seconds: float = 10.0
    """AGORA_BID_TIMEOUT_SECONDS: how long a candidate's bid may take, whoever makes it (the
    agent's app, or the market's model); a bid not made by then is the profile-based fallback."""
    estimates_per_call: int = Field(default=ESTIMATES_PER_CALL, ge=1, le=ESTIMATES_PER_CALL)
    """AGORA_ESTIMATES_PER_CALL: candidates the market's model rates in one call. 1 is the
    reference design's call per candidate (a baseline for `bench.market_bill`)."""
    estimate_tokens: int = Field(default=RATING_TOKENS, ge=1, le=1024)
    """AGORA_ESTIMATE_TOKENS: output tokens a rating call may use per candidate (and once more
    for the answer's frame); raise it for a model that writes its JSON at length."""
    agent_bid_ms: int = Field(default=DEFAULT_AGENT_BID_MS, ge=1, le=60_000)
    """AGORA_AGENT_BID_MS: how long an agent's own app has to answer a bid solicitation (a task's
    `bid_deadline_ms` overrides it)."""
    exploration_weight: float = Field(default=MARKET_EXPLORATION, ge=0.0, allow_inf_nan=False)
    """AGORA_EXPLORATION_WEIGHT: multiplier on the UCB1 bonus; 1.0 is the plain UCB1 bonus."""
    reputation_cache_seconds: float = Field(default=1.0, ge=0.0, allow_inf_nan=False)
    """AGORA_REPUTATION_CACHE_SECONDS: how long an agent's reputation, once read, serves scoring
    (outcomes this replica applies count at once; other replicas' within this time)."""
    max_in_flight: int = Field(default=DEFAULT_MAX_IN_FLIGHT, ge=1, le=10_000)
    """AGORA_MAX_IN_FLIGHT: allocations under way at once in this replica. More tasks wait in
    the broker, unacknowledged (backpressure): raise it, or add replicas, when tasks wait
    there while this replica's CPU is idle."""
    sweep_seconds: float = 30.0
    """AGORA_SWEEP_SECONDS: how often to look for undecided tasks nobody is moving."""
    stale_after_seconds: float = 120.0
    """AGORA_STALE_AFTER_SECONDS: an undecided task unchanged this long is taken over."""


def allocator_module(settings: AllocatorSettings | None = None) -> ServiceModule:
    settings = settings or AllocatorSettings()
    holder: dict[str, MarketAllocator] = {}

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        model = model_client_from_settings(ModelSettings(), ctx.sidecar)
        allocator = holder["allocator"] = MarketAllocator(
            ctx,
            model,
            registry_app_id=settings.registry_app_id,
            taskboard_app_id=settings.taskboard_app_id,
            bid_timeout_s=settings.bid_timeout_seconds,
            exploration_weight=settings.exploration_weight,
            reputation_max_age_s=settings.reputation_cache_seconds,
            max_in_flight=settings.max_in_flight,
            agent_bid_ms=settings.agent_bid_ms,
            estimates_per_call=settings.estimates_per_call,
            estimate_tokens=settings.estimate_tokens,
        )
        # The `Task` actor admits one post and one outcome per task, and a reputation applies a
        # task's outcome once: redeliveries are recognised there.
        ctx.subscriptions.subscribe(topics.TASKS, allocator.on_task, idempotent=True)
        ctx.subscriptions.subscribe(topics.TASK_OUTCOME, allocator.on_outcome, idempotent=True)
        ctx.subscriptions.subscribe(
            topics.TASK_OUTCOME_RECORDED, allocator.on_outcome_recorded, idempotent=True
        )
        ctx.subscriptions.subscribe(
            topics.REGISTRY_CHANGED, allocator.on_registry_changed, pubsub=settings.broadcast_pubsub
        )

    async def warm_up(ctx: ServiceContext) -> None:
        allocator = holder["allocator"]
        # In the background: with a backlog, picking it all up waits for allocation slots.
        ctx.spawn(allocator.resume(), name="resume undecided tasks")
        ctx.spawn_daemon(
            allocator.sweep_forever(settings.sweep_seconds, settings.stale_after_seconds), name="stale sweep"
        )

    return ServiceModule("allocator", setup=setup, warm_up=warm_up)


def create_app(settings: AllocatorSettings | None = None) -> FastAPI:
    settings = settings or AllocatorSettings()
    return create_service_app(settings, [allocator_module(settings)])


def main() -> None:
    settings = AllocatorSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
