"""The console's settings, read from the environment (AGORA_CONSOLE_...)."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field

from agora.runtime.settings import ServiceSettings

__all__ = ["ConsoleSettings"]


class ConsoleSettings(ServiceSettings):
    app_id: str = Field(default="console", validation_alias=AliasChoices("AGORA_APP_ID", "APP_ID"))
    console_services_app_id: str | None = None
    """AGORA_CONSOLE_SERVICES_APP_ID: the one app hosting every service (`agora`, the embedded
    default); unset, each service is reached at its own app id (`escalation`, `taskboard`...)."""
    console_users_file: Path | None = None
    """AGORA_CONSOLE_USERS_FILE: people who may sign in (YAML `users: [{name, role,
    secret_hash}]`; `python -m agora.console.users` hashes a secret)."""
    console_token: str | None = None
    """AGORA_CONSOLE_TOKEN: a secret that signs in as `console_token_user` (any name typed)."""
    console_token_user: str = "operator"
    console_token_role: str = "decider"
    console_api_keys_file: Path | None = None
    """AGORA_CONSOLE_API_KEYS_FILE: keys programs act with at `/mcp` (YAML `keys: [{name, role,
    key_sha256}]`; `python -m agora.console.api_keys` makes one); the console token acts as its
    person too."""
    console_public_url: str | None = Field(default=None, max_length=2048)
    """AGORA_CONSOLE_PUBLIC_URL: where clients reach the console (named in its MCP server's
    authorization metadata as the issuer of its keys, and in its A2A Agent Card as the market's
    endpoint); unset, the console's own address and port (`public_url`)."""
    console_a2a_default_skills: str = Field(default="", max_length=1024)
    """AGORA_CONSOLE_A2A_DEFAULT_SKILLS: comma-separated skill tags an A2A message that names
    none is taken to need (a market whose clients do not know its tags); unset, such a message
    is a task REJECTED with what to send."""
    console_proxy_user_header: str | None = None
    """AGORA_CONSOLE_PROXY_USER_HEADER: trust this request header (e.g. X-Forwarded-User) to
    name the person; set it only behind an authenticating proxy that always sets it."""
    console_proxy_deciders: str = ""
    """AGORA_CONSOLE_PROXY_DECIDERS: comma-separated names (from the proxy header) who may
    decide; everyone else it names is a viewer."""
    console_session_key: str | None = None
    """AGORA_CONSOLE_SESSION_KEY: signs session cookies (share it between replicas); unset, a
    random key per process (sessions end when it restarts)."""
    console_session_hours: int = Field(default=12, ge=1, le=24 * 30)
    console_secure_cookies: bool = False
    """AGORA_CONSOLE_SECURE_COOKIES: mark the session cookie Secure (when served over HTTPS)."""
    console_refresh_seconds: float = Field(default=2.0, gt=0, le=60)
    """How often an open page asks for changes."""
    console_jaeger_url: str | None = None
    """AGORA_CONSOLE_JAEGER_URL: Jaeger's query API (e.g. http://127.0.0.1:16686), for a task's
    trace as a timeline; unset, the console shows no traces."""
    api_token: str | None = None
    """AGORA_API_TOKEN: sent as x-agora-token when deciding (when the escalation service
    requires it)."""

    def app_for(self, service: str) -> str:
        """The app id serving `service`'s API."""
        return self.console_services_app_id or service

    @property
    def deciders(self) -> list[str]:
        return [name.strip() for name in self.console_proxy_deciders.split(",") if name.strip()]

    @property
    def a2a_default_skills(self) -> list[str]:
        return [tag.strip() for tag in self.console_a2a_default_skills.split(",") if tag.strip()]

    @property
    def public_url(self) -> str:
        """Where clients reach the console: `console_public_url`, else its own address and port
        (a console listening on every interface names loopback)."""
        if self.console_public_url:
            return self.console_public_url.rstrip("/")
        host = "127.0.0.1" if self.app_host in ("0.0.0.0", "::", "") else self.app_host
        return f"http://{host}:{self.app_port}"
