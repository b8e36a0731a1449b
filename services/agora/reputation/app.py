"""The reputation app: hosts `Reputation` actors and shows their records, each with its current
UCB bonus over the market's outcome count."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI
from pydantic import Field

from agora.core.market import ReputationRecord
from agora.core.reputation import DEFAULT_UNCHECKED_WEIGHT, with_ucb_confidence
from agora.reputation.actors import Reputation, ReputationDeps
from agora.reputation.outcome_counts import NAMESPACE, AgentTotals, MarketOutcomes
from agora.runtime.actor_client import ActorClient
from agora.runtime.clients import reputation_actors
from agora.runtime.service import PathId, ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings

APP_ID = "reputation"


class ReputationSettings(ServiceSettings):
    app_id: str = APP_ID
    unchecked_outcome_weight: float = Field(default=DEFAULT_UNCHECKED_WEIGHT, ge=0.0, le=1.0)
    """`AGORA_UNCHECKED_OUTCOME_WEIGHT`: what an outcome without a check's verdict counts as in
    its agent's record, in outcomes (0: only checked outcomes count)."""


def reputation_module(settings: ReputationSettings) -> ServiceModule:
    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        outcomes = MarketOutcomes(ctx.repository(NAMESPACE, AgentTotals))
        ctx.host_actor(Reputation, ReputationDeps(outcomes, settings.unchecked_outcome_weight))
        reputations = reputation_actors(ActorClient(ctx.sidecar))

        @app.get("/v1/reputation/{agent_id}", response_model=ReputationRecord)
        async def show(agent_id: PathId) -> ReputationRecord:
            """The agent's record; `ucb_confidence` is its UCB bonus now, over the market's `N`."""
            record, market_total = await asyncio.gather(reputations(agent_id).get_record(), outcomes.total())
            return with_ucb_confidence(record, market_total)

    return ServiceModule("reputation", setup=setup)


def create_app(settings: ReputationSettings | None = None) -> FastAPI:
    settings = settings or ReputationSettings()
    return create_service_app(settings, [reputation_module(settings)])


def main() -> None:
    settings = ReputationSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
