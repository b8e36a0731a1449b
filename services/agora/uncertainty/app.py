"""The uncertainty monitor app: hosts `SessionUncertainty` actors, answers step reports and
continues sessions when their escalation is decided."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from fastapi import FastAPI
from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

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
from agora.core.limits import MAX_ITEMS
from agora.core.messages import EscalationResolved
from agora.core.uncertainty.model import ConfidenceModel, ModelMessage
from agora.core.uncertainty.policy import UncertaintyPolicy
from agora.llm import ChatMessage, ModelClient, ModelSettings, ModelUnavailable, model_client_from_settings
from agora.runtime import decisions
from agora.runtime.actor_client import ActorClient, Actors
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

CONFIDENCE_CALL_SECONDS = 3.0
"""How long one of the monitor's own model calls (P(True), a sample) may take. An agent's runner
waits for a step's verdict as long as its sidecar client waits (AGORA_SIDECAR_TIMEOUT_SECONDS,
10 s by default), and a step makes at most three rounds of calls one after the other (P(True),
then two batches of samples): three times this fits."""
CONFIDENCE_ANSWER_TOKENS = 128
"""Output limit of those calls: P(True)'s JSON comes first in its answer, and a sample's first
words carry its gist (samples are compared by their words)."""


class UncertaintySettings(ServiceSettings):
    """The monitor's policy (`UncertaintyPolicy`, the reference's names and defaults) and the
    checkpoints it checks before every step, from the environment (`AGORA_<FIELD>`)."""

    app_id: str = APP_ID
    low_threshold: float = Field(default=0.80, ge=0.0, le=1.0)
    """AGORA_LOW_THRESHOLD: the confidence from which a step is of low uncertainty (proceeds)."""
    medium_threshold: float = Field(default=0.60, ge=0.0, le=1.0)
    """AGORA_MEDIUM_THRESHOLD: from here, medium (proceeds with a log; before an irreversible
    tool it waits for a person)."""
    high_threshold: float = Field(default=0.40, ge=0.0, le=1.0)
    """AGORA_HIGH_THRESHOLD: from here, high (waits for a person); below it, critical (aborts)."""
    enable_p_true: bool = True
    """AGORA_ENABLE_P_TRUE: ask the model how likely each answer is right (one call per step)."""
    enable_semantic_sampling: bool = False
    """AGORA_ENABLE_SEMANTIC_SAMPLING: re-ask the model (2 to 5 more calls) on a step in the
    sampling zone, and take the answers' agreement into account. Off by default, as in the
    reference: it multiplies a step's model calls."""
    irreversible_tool_names: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """AGORA_IRREVERSIBLE_TOOL_NAMES: comma-separated (or a JSON list) parts of tool names that
    cannot be undone (ignoring case): such a tool waits for a person at medium uncertainty,
    before it runs. None by default, as in the reference; its example, and the Helm chart's
    value, is `send_email,delete,deploy`."""
    inject_reflection_on_high: bool = True
    """AGORA_INJECT_REFLECTION_ON_HIGH: at high uncertainty, flag the step for a reflection
    (`REFLECTION_PROMPT`), which the agent's runner adds to its next model call."""
    checkpoints_file: Path | None = None
    """AGORA_CHECKPOINTS_FILE: YAML list of CheckpointTriggers checked before every step."""
    checkpoints: list[CheckpointTrigger] = Field(default_factory=list, max_length=MAX_ITEMS)
    """AGORA_CHECKPOINTS: a JSON list of CheckpointTriggers checked before every step, after
    those of the file."""
    confidence_call_seconds: float = Field(default=CONFIDENCE_CALL_SECONDS, gt=0, le=60)
    """AGORA_CONFIDENCE_CALL_SECONDS: how long one of the monitor's own model calls (P(True), a
    sample) may take; a call that takes longer is left out of the step's estimate, as a failed
    one is (`signal_errors`)."""

    @field_validator("irreversible_tool_names", mode="before")
    @classmethod
    def _names_from_the_environment(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value.strip().startswith("["):
            return json.loads(value)
        return [name for name in (part.strip() for part in value.split(",")) if name]

    @model_validator(mode="after")
    def _policy_holds(self) -> UncertaintySettings:
        self.policy()  # thresholds out of order fail at start-up, saying which
        return self

    def policy(self) -> UncertaintyPolicy:
        return UncertaintyPolicy(
            low_threshold=self.low_threshold,
            medium_threshold=self.medium_threshold,
            high_threshold=self.high_threshold,
            enable_p_true=self.enable_p_true,
            enable_semantic_sampling=self.enable_semantic_sampling,
            irreversible_tool_names=self.irreversible_tool_names,
            inject_reflection_on_high=self.inject_reflection_on_high,
        )

    def triggers(self) -> list[CheckpointTrigger]:
        """The configured checkpoint triggers: the file's, then `AGORA_CHECKPOINTS`."""
        return [*load_triggers(self.checkpoints_file), *self.checkpoints]


def load_triggers(path: Path | None) -> list[CheckpointTrigger]:
    if path is None:
        return []
    return [CheckpointTrigger.model_validate(t) for t in yaml.safe_load(path.read_text()) or []]


def confidence_model(client: ModelClient, timeout_s: float = CONFIDENCE_CALL_SECONDS) -> ConfidenceModel:
    """Adapt the model client to the estimator's `ConfidenceModel` port: each call's answer at
    most `CONFIDENCE_ANSWER_TOKENS` long, and `ModelUnavailable` when it takes longer than
    `timeout_s` (the client's own retries included), so a slow model never holds a step's
    verdict past what the agent's runner waits."""

    async def ask(messages: list[ModelMessage], *, temperature: float) -> str:
        chat = [ChatMessage(role=m.role, content=m.content) for m in messages]
        asked = client.complete(chat, temperature=temperature, max_tokens=CONFIDENCE_ANSWER_TOKENS)
        try:
            async with asyncio.timeout(timeout_s):
                return (await asked).text
        except TimeoutError:
            raise ModelUnavailable(f"the model did not answer within {timeout_s:g}s") from None

    return ask


def uncertainty_module(settings: UncertaintySettings | None = None) -> ServiceModule:
    settings = settings or UncertaintySettings()

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        actors = ActorClient(ctx.sidecar)
        ctx.host_actor(
            SessionUncertainty,
            UncertaintyDeps(
                actors,
                ctx.publisher,
                settings.policy(),
                tuple(settings.triggers()),
                confidence_model(
                    model_client_from_settings(ModelSettings(), ctx.sidecar), settings.confidence_call_seconds
                ),
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
