"""Serving agents and graphs as a Dapr app on the market (`agora-agent run my_agents.py`)."""

from agora.sdk._agent import AgentLoad, Estimator, Handler, HandlerResult
from agora.sdk._app import AgentAppSettings, load_agents, serve_agents

__all__ = [
    "AgentAppSettings",
    "AgentLoad",
    "Estimator",
    "Handler",
    "HandlerResult",
    "load_agents",
    "serve_agents",
]
