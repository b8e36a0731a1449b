"""An agent built with dapr-agents, on Agora's market beside the team's other agents.

The Archivist is a plain dapr-agents `DurableAgent`: its prompt, its model client (here Dapr's
Conversation API, the `agora-llm` component) and its own workflow state, as the team wrote
them. `market_agent` puts it on the market: it registers with the skill it offers, bids for
tasks that need it, and runs each task it wins as a run of its own workflow.

    pip install 'agora[dapr-agents]'
    agora-agent run examples/agents/archivist.py
"""

from dapr_agents import DurableAgent
from dapr_agents.agents.configs import AgentExecutionConfig, AgentStateConfig
from dapr_agents.llm import DaprChatClient
from dapr_agents.storage.daprstores.stateservice import StateStoreService

from agora.sdk.dapr_agents import market_agent

archivist = DurableAgent(
    name="Archivist",
    role="Archivist",
    goal="Find the records a question is about and say what they hold",
    instructions=["Answer from the records you know of; say so when there are none."],
    llm=DaprChatClient(component_name="agora-llm"),
    state=AgentStateConfig(store=StateStoreService(store_name="agora-state", key_prefix="archivist:")),
    execution=AgentExecutionConfig(max_iterations=4),
)

agents = [market_agent(archivist, skills=["archive_search"], cost_per_step_usd=0.002)]
