"""Service settings, read from the environment (the same variables Dapr and OTel use)."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGORA_", extra="ignore")

    app_id: str = Field(default="agora", validation_alias=AliasChoices("AGORA_APP_ID", "APP_ID"))
    app_host: str = "127.0.0.1"
    app_port: int = Field(default=8000, validation_alias=AliasChoices("AGORA_APP_PORT", "APP_PORT"))
    dapr_host: str = "127.0.0.1"
    dapr_http_port: int = Field(default=3500, validation_alias=AliasChoices("DAPR_HTTP_PORT"))
    dapr_grpc_port: int = Field(default=50001, validation_alias=AliasChoices("DAPR_GRPC_PORT"))
    """The sidecar's gRPC API, which Dapr Workflow's runtime and client use."""
    dapr_api_token: str | None = Field(default=None, validation_alias=AliasChoices("DAPR_API_TOKEN"))
    app_api_token: str | None = Field(default=None, validation_alias=AliasChoices("APP_API_TOKEN"))

    state_store: str = "agora-state"
    pubsub: str = "agora-pubsub"
    broadcast_pubsub: str = "agora-broadcast"
    """Pub/sub component on which every replica of a service gets every message."""
    dead_letter_topic: str = "agora.deadletter"

    sidecar_timeout_seconds: float = 10.0
    read_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    """AGORA_READ_TIMEOUT_SECONDS: how long a read answering a person's request (a task shown)
    waits for the actor holding the record before the app answers a typed 503."""
    sidecar_wait_seconds: float = 60.0
    shutdown_grace_seconds: float = 10.0
    dedupe_ttl_seconds: int = 24 * 3600
    retention_seconds: int = Field(default=7 * 24 * 3600, ge=60)
    """AGORA_RETENTION_SECONDS: how long a finished record (a task that reached its end, a
    decided escalation, an uncertainty session not waiting for a person) is kept before it is
    dropped from the store and its listing, so the store holds what is current plus this
    window. Its id may be used again afterwards."""
    actor_idle_seconds: int = Field(default=300, ge=10)
    """AGORA_ACTOR_IDLE_SECONDS: an actor not called for this long is deactivated (its state
    stays in the store; the next call reads it again), so an app and its sidecar hold the
    actors of the last few minutes' work, not of every task seen in the last hour (Dapr's
    default)."""
    log_level: str = "INFO"

    @property
    def dapr_http_endpoint(self) -> str:
        return f"http://{self.dapr_host}:{self.dapr_http_port}"
