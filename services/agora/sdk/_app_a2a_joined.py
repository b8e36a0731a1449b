"""A2A agents a person puts on the market through a running agent app (`PUT /v1/a2a-agents/{id}`,
`agora a2a join`), beside the agents of its files and settings.

The list is kept in the state store, so every replica of the app serves the same agents: the
replica that takes a request changes the list and serves the change at once; the others read
the list at each renewal of their agents' leases. An agent taken off the list leaves the market
(its lease is cut to the shortest); a run of it under way finishes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from agora.core.contracts import MAX_JOINED_A2A_AGENTS, A2AAgentJoin, A2AAgentJoined, A2AAgentsJoined
from agora.core.errors import Conflict, InvalidArgument, NotFound
from agora.runtime.state import StateRepository
from agora.sdk._a2a import A2AAgent, CardUnreadable, read_card
from agora.sdk._agent import Agent

__all__ = ["JOINED_KEY", "JOINED_NAMESPACE", "JoinedA2AAgents"]

log = logging.getLogger(__name__)

JOINED_NAMESPACE = "a2a:joined"
JOINED_KEY = "agents"


class JoinedA2AAgents:
    """The A2A agents this app took on through its API: in the store, and served here."""

    def __init__(
        self,
        repository: StateRepository[A2AAgentsJoined],
        agents: dict[str, Agent],
        dapr_http_endpoint: str,
        equip: Callable[[Agent], None],
    ) -> None:
        self._repository = repository
        self._equip = equip
        """Gives an agent joined the app's stores and services, as its own agents have."""
        self._agents = agents
        """Every agent the app serves, by id (its runs look theirs up here)."""
        self._fixed = frozenset(agents)
        """The agents of the app's files and settings: not the API's to replace or remove."""
        self._endpoint = dapr_http_endpoint
        self._served: dict[str, A2AAgentJoined] = {}
        self._retired: set[str] = set()
        """Agents taken off the list: kept among the app's agents for their runs under way."""
        self.left: set[str] = set()
        """Agents taken off the list whose leases are not cut yet."""

    def serves(self, agent_id: str) -> bool:
        """Whether the agent is on the market from this app (not one taken off the list)."""
        return agent_id in self._agents and agent_id not in self._retired

    async def listed(self) -> A2AAgentsJoined:
        stored = await self._repository.get(JOINED_KEY)
        return stored.value if stored is not None else A2AAgentsJoined()

    async def join(self, agent_id: str, join: A2AAgentJoin) -> A2AAgentJoined:
        """Put the agent on the list (or change its entry), once its card can be read: a URL
        that cannot name a card, or a card that cannot be read now, is refused with why."""
        if agent_id in self._fixed:
            raise Conflict(f"agent {agent_id} is one of this app's own agents; choose another id")
        entry = A2AAgentJoined(agent_id=agent_id, **join.model_dump())
        agent = _agent_of(entry)
        try:
            await read_card(entry.card_url, self._endpoint)
        except CardUnreadable as exc:
            raise InvalidArgument(f"the Agent Card at {entry.card_url} cannot be read: {exc}") from None

        def joined(listed: A2AAgentsJoined | None) -> A2AAgentsJoined:
            others = [e for e in (listed or A2AAgentsJoined()).agents if e.agent_id != agent_id]
            if len(others) >= MAX_JOINED_A2A_AGENTS:
                raise InvalidArgument(f"this app serves {MAX_JOINED_A2A_AGENTS} A2A agents joined so already")
            return A2AAgentsJoined(agents=[*others, entry])

        await self._repository.update(JOINED_KEY, joined)
        self._serve(entry, agent)
        return entry

    async def leave(self, agent_id: str) -> A2AAgentJoined:
        """Take the agent off the list: it leaves the market at the next renewal."""
        found: list[A2AAgentJoined] = []

        def without(listed: A2AAgentsJoined | None) -> A2AAgentsJoined | None:
            entries = (listed or A2AAgentsJoined()).agents
            found[:] = [e for e in entries if e.agent_id == agent_id]
            if not found:
                raise NotFound(f"no A2A agent {agent_id} joined this app", agent_id=agent_id)
            return A2AAgentsJoined(agents=[e for e in entries if e.agent_id != agent_id])

        await self._repository.update(JOINED_KEY, without)
        self._retire(agent_id)
        return found[0]

    async def sync(self) -> None:
        """Serve the list as the store has it (another replica changed it)."""
        listed = {entry.agent_id: entry for entry in (await self.listed()).agents}
        for agent_id, entry in listed.items():
            if self._served.get(agent_id) != entry and agent_id not in self._fixed:
                try:
                    self._serve(entry, _agent_of(entry))
                except InvalidArgument as exc:  # an entry put in the store by other means
                    reason = {"agent_id": agent_id, "reason": exc.message}
                    log.warning("a joined A2A agent cannot be served", extra=reason)
        for agent_id in set(self._served) - set(listed):
            self._retire(agent_id)

    def _serve(self, entry: A2AAgentJoined, agent: Agent) -> None:
        # A run of the agent it replaces keeps its own object; new runs take this one.
        self._equip(agent)
        self._agents[entry.agent_id] = agent
        self._served[entry.agent_id] = entry
        self._retired.discard(entry.agent_id)
        self.left.discard(entry.agent_id)
        log.info(
            "an A2A agent joined the app", extra={"agent_id": entry.agent_id, "card_url": entry.card_url}
        )

    def _retire(self, agent_id: str) -> None:
        # It stays among the app's agents: a run of it under way finishes.
        if self._served.pop(agent_id, None) is not None:
            self._retired.add(agent_id)
            self.left.add(agent_id)
            log.info("an A2A agent left the app", extra={"agent_id": agent_id})


def _agent_of(entry: A2AAgentJoined) -> A2AAgent:
    try:
        return A2AAgent(
            entry.agent_id, entry.card_url, price_per_step=entry.price_per_step_usd, max_steps=entry.max_steps
        )
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
