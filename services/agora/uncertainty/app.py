"""The uncertainty monitor app: hosts `SessionUncertainty` actors, answers step reports and
continues sessions when their escalation is decided."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from fastapi import FastAPI

from agora.core import topics
from agora.core.contracts import (
    CheckpointAnswer,
    CheckpointRequest,
    SessionState,
    SessionSummary,
    StepReport,
    StepVerdict,
)
from agora.core.escalation.checkpoints import CheckpointTrigger
from agora.core.messages import EscalationResolved
from agora.core.uncertainty.model import ModelMessage
from agora.core.uncertainty.policy import UncertaintyPolicy
from agora.llm import ChatMessage, ModelClient, ModelSettings, model_client_from_settings
from agora.runtime import decisions
from agora.runtime.actor import ActorClient, Actors
from agora.runtime.clients import escalation_actors
from agora.runtime.interfaces import SessionUncertaintyInterface
from agora.runtime.service import (
    PathId,
    ServiceContext,
    ServiceModule,
    create_service_app,
    serve,
)
from agora.runtime.settings import ServiceSettings
from agora.uncertainty.actors import SessionUncertainty, UncertaintyDeps

M = TypeVar("M")

APP_ID = "uncertainty"


class UncertaintySettings(ServiceSettings):
    app_id: str = APP_ID
    enable_p_true: bool = True
    enable_semantic_sampling: bool = True
    checkpoints_file: Path | None = None
    """AGORA_CHECKPOINTS_FILE: YAML list of CheckpointTriggers checked before every step."""


def load_triggers(path: Path | None) -> list[CheckpointTrigger]:
    if path is None:
        return []
    return [CheckpointTrigger.model_validate(t) for t in yaml.safe_load(path.read_text()) or []]


def confidence_model(client: ModelClient) -> Any:
    """Adapt the model client to the estimator's `ConfidenceModel` port."""

    async def ask(messages: list[ModelMessage], *, temperature: float) -> str:
        chat = [ChatMessage(role=m.role, content=m.content) for m in messages]
        return (await client.complete(chat, temperature=temperature)).text

    return ask


def uncertainty_module(settings: UncertaintySettings | None = None) -> ServiceModule:
    settings = settings or UncertaintySettings()

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        actors = ActorClient(ctx.sidecar)
        policy = UncertaintyPolicy(
            enable_p_true=settings.enable_p_true, enable_semantic_sampling=settings.enable_semantic_sampling
        )
        ctx.host_actor(
            SessionUncertainty,
            UncertaintyDeps(
                actors,
                ctx.publisher,
                policy,
                tuple(load_triggers(settings.checkpoints_file)),
                confidence_model(model_client_from_settings(ModelSettings(), ctx.sidecar)),
                settings.retention_seconds,
            ),
        )

        sessions = Actors(actors, SessionUncertaintyInterface)

        @app.post("/v1/sessions/{session_id}/llm-responses", response_model=StepVerdict)
        async def llm_response(session_id: PathId, report: StepReport) -> StepVerdict:
            return await sessions(session_id).observe_llm_response(report)

        @app.post("/v1/sessions/{session_id}/tool-calls", response_model=StepVerdict)
        async def tool_call(session_id: PathId, report: StepReport) -> StepVerdict:
            return await sessions(session_id).observe_tool_call(report)

        @app.post("/v1/sessions/{session_id}/checkpoints", response_model=CheckpointAnswer)
        async def checkpoint(session_id: PathId, request: CheckpointRequest) -> CheckpointAnswer:
            return await sessions(session_id).checkpoint(request)

        @app.get("/v1/sessions/{session_id}", response_model=SessionState)
        async def show(session_id: PathId) -> SessionState:
            return await sessions(session_id).get_belief_state()

        @app.get("/v1/sessions/{session_id}/summary", response_model=SessionSummary)
        async def summary(session_id: PathId) -> SessionSummary:
            return await sessions(session_id).summary_metadata()

        @app.post("/v1/sessions/{session_id}/reset", response_model=SessionState)
        async def reset(session_id: PathId) -> SessionState:
            return await sessions(session_id).reset()

        async def on_resolved(event: EscalationResolved) -> None:
            if event.waiting_party.kind == "session":
                await decisions.verified(escalation_actors(actors), event)
                await sessions(event.waiting_party.id).apply_decision(event)

        ctx.subscriptions.subscribe(topics.ESCALATION_RESOLVED, on_resolved)

    return ServiceModule("uncertainty", setup=setup)


def create_app(settings: UncertaintySettings | None = None) -> FastAPI:
    settings = settings or UncertaintySettings()
    return create_service_app(settings, [uncertainty_module(settings)])


def main() -> None:
    settings = UncertaintySettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
