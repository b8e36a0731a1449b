"""Which model backend a service uses, from the environment (AGORA_MODEL_*), and the factory
that turns those settings into a `ModelClient`.

The default is the deterministic offline model, so a fresh checkout runs end to end with no
vendor account; `dapr` goes through the sidecar's Conversation API and `openai` straight to an
OpenAI-compatible endpoint.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from agora.llm.client import ModelClient
from agora.llm.dapr_conversation import DaprConversationClient
from agora.llm.offline import OfflineModelClient, Override
from agora.llm.openai_compatible import DEFAULT_MAX_TOKENS, OpenAICompatibleClient
from agora.runtime.sidecar import DaprSidecar

OFFLINE_MODEL = "offline-deterministic"


class ModelSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGORA_MODEL_", extra="ignore", populate_by_name=True)

    backend: Literal["offline", "dapr", "openai"] = "offline"
    model: str = OFFLINE_MODEL
    """The model name: a label for the `dapr` backend (its component picks the model), the
    `model` field of requests for `openai`."""
    conversation_component: str = "agora-llm"
    openai_base_url: str | None = None
    openai_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("AGORA_MODEL_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    timeout_s: float = 30
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, ge=1, le=32768)
    """The output limit of a call whose caller names none (`openai`; a `dapr` component sets its
    own in its metadata)."""
    required_call_opening: str | None = Field(default=None, max_length=64)
    required_call_closing: str | None = Field(default=None, max_length=64)
    """For a model that calls a tool it must call only when its answer is begun for it: the
    opening its answer is begun with and the closing it stops at (both, or neither). `dapr`
    sends the opening only (its API has no stop sequences)."""


def model_client_from_settings(
    settings: ModelSettings, sidecar: DaprSidecar | None, *, offline_answers: Override | None = None
) -> ModelClient:
    """Build the configured client; a ValueError names the setting that is missing.
    `offline_answers` teaches the offline model a service's own prompts (it answers the rest
    from their JSON Schemas)."""
    if settings.backend == "offline":
        return OfflineModelClient(model=settings.model, overrides=offline_answers)
    if settings.backend == "dapr":
        if sidecar is None:
            raise ValueError("AGORA_MODEL_BACKEND=dapr needs a DaprSidecar (the service's sidecar client)")
        return DaprConversationClient(
            sidecar,
            settings.conversation_component,
            model=None if settings.model == OFFLINE_MODEL else settings.model,
            timeout_s=settings.timeout_s,
            # The alpha2 API has no stop sequences: the opening goes, the closing cannot.
            required_call_opening=settings.required_call_opening,
        )
    if not settings.openai_base_url:
        raise ValueError(
            "AGORA_MODEL_BACKEND=openai needs AGORA_MODEL_OPENAI_BASE_URL (e.g. https://api.openai.com/v1)"
        )
    if settings.model == OFFLINE_MODEL:
        raise ValueError("AGORA_MODEL_BACKEND=openai needs AGORA_MODEL_MODEL (the vendor's model name)")
    return OpenAICompatibleClient(
        settings.openai_base_url,
        settings.openai_api_key,
        settings.model,
        timeout_s=settings.timeout_s,
        max_tokens=settings.max_tokens,
        required_call_prefill=_prefill(settings),
    )


def _prefill(settings: ModelSettings) -> tuple[str, str] | None:
    opening, closing = settings.required_call_opening, settings.required_call_closing
    if (opening is None) != (closing is None):
        raise ValueError(
            "AGORA_MODEL_REQUIRED_CALL_OPENING and AGORA_MODEL_REQUIRED_CALL_CLOSING go together"
        )
    return (opening, closing) if opening is not None and closing is not None else None
