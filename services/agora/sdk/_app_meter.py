"""What each run going on in an agent app has spent so far, metered from its runner's cost
events."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from agora.core.messages import CostEvent
from agora.core.topics import Channel
from agora.sdk._cost import EventPublisher
from agora.sdk._runner import AgentState

__all__ = ["RunMeter", "Spend"]


@dataclass
class Spend:
    """What a run spent: its model calls' cost (at their prices) and tokens, its steps, and the
    tools it called."""

    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    steps: int = 0
    tools_called: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, state: AgentState) -> Spend:
        """What a run's saved state says it spent."""
        return cls(state.cost_usd, state.input_tokens, state.output_tokens, state.iterations,
                   list(state.tools_called))  # fmt: skip


class RunMeter:
    """What each run going on in this app has spent so far, from its runner's cost events (the
    app's runners publish through it): a runner saves its state when a turn ends, so a run
    stopped mid-turn (at its deadline) has nothing newer saved than its earlier turns. A turn
    begins with what the run's earlier turns saved (`begin`); each call's cost and tokens add to
    it, and each model call of a step (`<agent_id>.step`) counts a step. Calls that cost nothing
    are not announced, so neither are they counted here."""

    def __init__(self, publisher: EventPublisher) -> None:
        self._publisher = publisher
        self._turns: dict[tuple[str, str], Spend] = {}

    async def publish(self, channel: Channel[Any], payload: Any, *, message_id: str | None = None) -> str:
        if isinstance(payload, CostEvent):
            spend = self._turns.get((payload.agent_id, payload.session_id))
            if spend is not None:
                spend.cost_usd += payload.cost_usd
                spend.input_tokens += payload.input_tokens
                spend.output_tokens += payload.output_tokens
                if payload.step_name == f"{payload.agent_id}.step":
                    spend.steps += 1
        return await self._publisher.publish(channel, payload, message_id=message_id)

    def begin(self, agent_id: str, session_id: str, earlier: AgentState | None = None) -> None:
        """A turn of the run begins: a fresh run's (nothing spent), or a resumed one's (what its
        earlier turns saved)."""
        self._turns[(agent_id, session_id)] = Spend.of(earlier) if earlier is not None else Spend()

    def spent(self, agent_id: str, session_id: str) -> Spend | None:
        """What the run has spent, if a turn of it goes on (or was stopped) in this process."""
        found = self._turns.get((agent_id, session_id))
        return None if found is None else replace(found, tools_called=list(found.tools_called))

    def forget(self, agent_id: str, session_id: str) -> None:
        self._turns.pop((agent_id, session_id), None)
