"""Serving agents and graphs as a Dapr app on the market (`agora-agent run my_agents.py`)."""

from agora.sdk._agent import AgentLoad, Estimator, Handler, HandlerResult
from agora.sdk._app import AgentAppSettings, serve_agents
from agora.sdk._app_files import load_agents

__all__ = [
    "AgentAppSettings",
    "AgentLoad",
    "Estimator",
    "Handler",
    "HandlerResult",
    "load_agents",
    "serve_agents",
]
