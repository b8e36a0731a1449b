"""An agent app's settings (from its environment)."""

from __future__ import annotations

from pydantic import AliasChoices, Field

from agora.core.messages import MAX_LEASE_SECONDS, MIN_LEASE_SECONDS
from agora.runtime.settings import ServiceSettings

__all__ = ["AgentAppSettings"]


class AgentAppSettings(ServiceSettings):
    app_id: str = Field(default="agents", validation_alias=AliasChoices("AGORA_APP_ID", "APP_ID"))
    """The app's Dapr app id (`dapr run --app-id` sets APP_ID); its agents' bids are asked here."""
    registry_app_id: str = "registry"
    taskboard_app_id: str = "taskboard"
    planner_app_id: str = "planner"
    """Where a graph's planning nodes read their plans (`GET /v1/plans/{id}`)."""
    debate_app_id: str = "debate"
    """Where a graph's debate nodes read their debates (`GET /v1/debates/{id}`)."""
    agents_file: str | None = None
    """AGORA_AGENTS_FILE: the Python file defining the agents and graphs, or several separated
    like PATH entries (`agora-agent run FILE...` names them instead)."""
    a2a_agents: str | None = None
    """AGORA_A2A_AGENTS: A2A agents the app puts on the market beside its files' agents, as
    `name=card-url` entries separated by commas (`A2AAgent(name, card_url)` each)."""
    agent_lease_seconds: int = Field(default=60, ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)
    inline_run_seconds: float = Field(default=5.0, ge=0.0, le=10.0)
    """AGORA_INLINE_RUN_SECONDS: how long an award's run goes on in the award's delivery before
    the workflow engine takes it over (0: every run is a workflow from its start), and at most
    a third of the award's acknowledgment window. A run that ends within it costs no workflow
    and no acknowledgment: its outcome, recorded on the board, acknowledges the award. Until
    then only the board's watch holds the award, so a run lost in a crash is not waited for:
    when the window ends the task passes to the next-best bid. It stays well below the
    broker's redelivery timeout (`processingTimeout`, 15 s)."""
    max_runs_in_flight: int = Field(default=16, ge=1, le=10_000)
    """AGORA_MAX_RUNS_IN_FLIGHT: runs this app works on at once; the workflow engine holds the
    others' next steps until a slot frees."""
    uncertainty_app_id: str | None = None
    """AGORA_UNCERTAINTY_APP_ID: the uncertainty monitor that checks every step of the app's
    runners (and may pause a run for a person); unset: no per-step checks."""
