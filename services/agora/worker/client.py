"""Reaching a worker's agents from outside their turn: the `WorkerAgents` family, which calls
an agent's actor and registers its reminders before a run starts or a decision is applied."""

from __future__ import annotations

from agora.core.messages import EscalationResolved, TaskAwarded
from agora.runtime.actor import ActorClient, Actors
from agora.runtime.interfaces import WorkerAgentInterface
from agora.worker.reminders import RUN_WATCHDOG, decision_reminder, run_reminder

__all__ = ["WorkerAgents"]


class WorkerAgents(Actors[WorkerAgentInterface]):
    """`WorkerAgent` actors, one per agent this worker hosts: `agents(agent_id).execute(award)`,
    and the reminders registered on an agent from outside its turn."""

    def __init__(self, actors: ActorClient) -> None:
        super().__init__(actors, WorkerAgentInterface)

    async def watch(self, agent_id: str, award: TaskAwarded) -> None:
        """Register the run's reminder before the run starts (outside the agent's turn, which
        a running task may hold): from here a crash cannot lose the award."""
        name, state = run_reminder(award.task_id), award.model_dump_json().encode()
        await self._remind(agent_id, name, state)

    async def hold_decision(self, agent_id: str, resolved: EscalationResolved) -> None:
        """Keep the decision as a reminder on the agent before its delivery is acknowledged:
        it applies the decision within `RUN_WATCHDOG` unless `resume` did it first."""
        name, state = decision_reminder(resolved.escalation_id), resolved.model_dump_json().encode()
        await self._remind(agent_id, name, state)

    async def _remind(self, agent_id: str, name: str, state: bytes) -> None:
        actor_type = str(WorkerAgentInterface.actor_type)  # the host class's name, `WorkerAgent`
        await self.client.register_reminder(actor_type, agent_id, name, state, RUN_WATCHDOG, RUN_WATCHDOG)
