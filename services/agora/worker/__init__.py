"""The reference worker: an agent app built on the agent SDK, running the agents of a YAML
file of capability profiles."""

__all__: list[str] = []
