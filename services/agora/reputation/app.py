"""The reputation app: hosts `Reputation` actors."""

from __future__ import annotations

from fastapi import FastAPI

from agora.core.market import ReputationRecord
from agora.reputation.actors import Reputation
from agora.runtime.actor import ActorClient
from agora.runtime.clients import reputation_actors
from agora.runtime.service import PathId, ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings

APP_ID = "reputation"


class ReputationSettings(ServiceSettings):
    app_id: str = APP_ID


def reputation_module() -> ServiceModule:
    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        ctx.host_actor(Reputation, None)
        reputations = reputation_actors(ActorClient(ctx.sidecar))

        @app.get("/v1/reputation/{agent_id}", response_model=ReputationRecord)
        async def show(agent_id: PathId) -> ReputationRecord:
            return await reputations(agent_id).get_record()

    return ServiceModule("reputation", setup=setup)


def create_app(settings: ReputationSettings | None = None) -> FastAPI:
    return create_service_app(settings or ReputationSettings(), [reputation_module()])


def main() -> None:
    settings = ReputationSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
