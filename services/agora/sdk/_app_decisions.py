"""How a person's decision (`agora.escalation.resolved`) reaches what waits on it in an agent
app: a paused run of one of its agents, or a paused graph run of the app, each in its workflow."""

from __future__ import annotations

from collections.abc import Callable

from agora.core.errors import NotFound
from agora.core.escalation.record import WaitingPartyKind
from agora.core.messages import EscalationResolved
from agora.runtime.clients import EscalationActors
from agora.runtime.interfaces import TaskInterface
from agora.runtime.workflows import WorkflowHost
from agora.sdk._agent import Agent
from agora.sdk._app_run import RUN_DECISIONS, run_instance
from agora.sdk._graph_runs import GRAPH_DECISIONS, GraphRuns, graph_instance

__all__ = ["DecisionRelay"]


class DecisionRelay:
    """Raises each decision for this app to the workflow that waits on it; a decision for
    anything else is someone else's to continue."""

    def __init__(
        self,
        agents: dict[str, Agent],
        tasks: Callable[[str], TaskInterface],
        host: WorkflowHost,
        escalations: EscalationActors,
        graph_runs: GraphRuns,
    ) -> None:
        self._agents = agents
        self._tasks = tasks
        self._host = host
        self._escalations = escalations
        self._graph_runs = graph_runs

    async def on_resolved(self, event: EscalationResolved) -> None:
        if event.waiting_party.kind is WaitingPartyKind.GRAPH_RUN:
            await self.graph_decided(event)
            return
        if event.waiting_party.kind not in (WaitingPartyKind.SESSION, WaitingPartyKind.TASK):
            return
        # A paused run waits in the workflow of the task it runs, when one of this app's
        # agents holds that task on the board; anything else is someone else's to continue.
        try:
            board = await self._tasks(event.waiting_party.id).get_task()
        except NotFound:
            return
        holder = board.allocation.winning_agent_id if board.allocation else None
        if holder not in self._agents or board.outcome is not None:
            return  # not this app's, or its run ended (at its deadline, say): nothing waits
        run = run_instance(event.waiting_party.id, len(board.awards))
        await RUN_DECISIONS.relay(self._host, self._escalations, event, run)

    async def graph_decided(self, event: EscalationResolved) -> None:
        """A decision for a graph run of this app that waits on it goes to its workflow."""
        if await self._graph_runs.waits_here(event.waiting_party.id, event.escalation_id):
            run = graph_instance(event.waiting_party.id)
            await GRAPH_DECISIONS.relay(self._host, self._escalations, event, run)
