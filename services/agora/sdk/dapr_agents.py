"""Agents built with dapr-agents on Agora's market: `market_agent(durable_agent, skills=[...])`
makes an agent of an agent app of a dapr-agents `DurableAgent`, so a team moves one agent at a
time. An optional extra: `pip install 'agora[dapr-agents]'`. See docs/sdk.md."""

try:
    import dapr_agents  # noqa: F401
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "agora.sdk.dapr_agents needs dapr-agents: pip install 'agora[dapr-agents]'"
    ) from missing

from agora.sdk._dapr_agents import agent_id_of, instance_of, market_agent, profile_of

__all__ = ["agent_id_of", "instance_of", "market_agent", "profile_of"]
