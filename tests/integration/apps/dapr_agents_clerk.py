"""A dapr-agents `DurableAgent` as dapr-agents' own examples write it: no `state=`, so
dapr-agents keeps one in-memory state for all its runs (the adapter counts each run's steps)."""

from dapr_agents import DurableAgent
from dapr_agents.agents.configs import AgentExecutionConfig
from dapr_agents.llm import DaprChatClient

from agora.sdk.dapr_agents import market_agent

clerk = DurableAgent(
    name="Clerk",
    role="Clerk",
    goal="File what it is given and say where",
    instructions=["Say where you filed it."],
    llm=DaprChatClient(component_name="agora-llm"),  # type: ignore[abstract]  # dapr-agents' typing
    execution=AgentExecutionConfig(max_iterations=4),
)

agents = [market_agent(clerk, skills=["filing"], cost_per_step_usd=0.002)]
