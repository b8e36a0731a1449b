"""What an agent app keeps in its Dapr state store (its runners' states, its agents' recent
outcomes), the escalation service its runners hand paused runs to, and the task board its runs'
progress notes go to."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from agora.core.escalation.record import ParkRequest
from agora.core.limits import MAX_NOTE_CHARS
from agora.core.messages import ProgressNote, TaskAwarded
from agora.core.outcomes.record import StepOutcome
from agora.runtime.batched_reads import BatchedReads
from agora.runtime.batched_writes import BatchedWrites
from agora.runtime.batching import KeyedMicroBatcher, group_commits
from agora.runtime.clients import EscalationActors
from agora.runtime.interfaces import TaskInterface
from agora.runtime.shared_calls import SharedCalls
from agora.runtime.state import StateRepository
from agora.sdk._learning import LEARNING_KEPT
from agora.sdk._runner import AgentState, RunStatus

__all__ = [
    "LEARNING_NAMESPACE",
    "STATE_NAMESPACE",
    "BoardProgress",
    "DaprAgentStateStore",
    "DaprOutcomeHistory",
    "EscalationService",
    "RecentOutcomes",
]

log = logging.getLogger(__name__)

STATE_NAMESPACE = "agent:state"
LEARNING_NAMESPACE = "agent:learning"


class RecentOutcomes(BaseModel):
    """An agent's recent runs, as its app keeps them (`agent:learning:<agent_id>`)."""

    outcomes: list[StepOutcome] = Field(default_factory=list, max_length=LEARNING_KEPT)


class DaprOutcomeHistory:
    """What an app's agents learn from, in its Dapr state store: one record per agent. Runs of
    one agent that end side by side are added in one write under the record's etag (a group
    commit per agent), and concurrent reads of one agent's history share one read."""

    def __init__(self, repository: StateRepository[RecentOutcomes]) -> None:
        self._repository = repository
        self._reads: SharedCalls[str, list[StepOutcome]] = SharedCalls()
        self._writes: KeyedMicroBatcher[str, StepOutcome, None] = group_commits(self._add, "learning")

    async def outcomes(self, agent_id: str) -> list[StepOutcome]:
        return list(await self._reads.call(agent_id, lambda: self._read(agent_id)))

    async def _read(self, agent_id: str) -> list[StepOutcome]:
        found = await self._repository.get(agent_id)
        return list(found.value.outcomes) if found is not None else []

    async def record(self, agent_id: str, outcome: StepOutcome) -> None:
        await self._writes.submit(agent_id, outcome)

    async def _add(self, agent_id: str, outcomes: list[StepOutcome]) -> None:
        # A run recorded twice counts once, as last told. The stored history is edited as JSON:
        # parsing and dumping its fifty outcomes on every write was most of what a write cost.
        latest = {o.outcome_id: o.model_dump(mode="json") for o in outcomes}

        def add(current: Any | None) -> dict[str, Any]:
            stored = current.get("outcomes", []) if isinstance(current, dict) else []
            kept = [o for o in stored if o.get("outcome_id") not in latest]
            return {"outcomes": [*kept, *latest.values()][-LEARNING_KEPT:]}

        await self._repository.update_json(agent_id, add)


class BoardProgress:
    """A run's progress notes, kept in its task's history on the board (`note_progress`). A note
    is news, not a step of the run: one the board refuses or cannot take now is logged and
    dropped, and the run goes on."""

    def __init__(self, tasks: Callable[[str], TaskInterface]) -> None:
        self._tasks = tasks

    async def note(self, award: TaskAwarded, text: str) -> None:
        note = ProgressNote(
            agent_id=award.agent_id, award_token=award.award_token, text=text[:MAX_NOTE_CHARS]
        )
        try:
            await self._tasks(award.task_id).note_progress(note)
        except Exception as exc:  # the board refusing or away: the note is lost, the run is not
            log.warning(
                "a progress note did not reach the task board",
                extra={"task_id": award.task_id, "agent_id": award.agent_id, "reason": repr(exc)[:300]},
            )


class EscalationService:
    """Hands a run to a person through the escalation service's `Escalation` actors."""

    def __init__(self, escalations: EscalationActors) -> None:
        self._escalations = escalations

    async def park(self, escalation_id: str, request: ParkRequest) -> None:
        await self._escalations(escalation_id).park(request)


class DaprAgentStateStore:
    """Runner state in the app's Dapr state store (`agent:state:<agent>|<session>`); a run that
    ended is kept for `retention_seconds` (a state TTL), one that runs or waits for as long."""

    def __init__(self, repository: StateRepository[AgentState], retention_seconds: int | None = None) -> None:
        self._reads = BatchedReads(repository)
        self._writes = BatchedWrites(repository)
        """Runs going on side by side load and save their states in shared bulk calls."""
        self._retention_seconds = retention_seconds

    async def load(self, agent_id: str, session_id: str) -> AgentState | None:
        found = await self._reads.get(f"{agent_id}|{session_id}")
        return found.value if found is not None else None

    async def save(self, state: AgentState) -> None:
        ended = state.status in (RunStatus.COMPLETED, RunStatus.FAILED)
        await self._writes.save(
            f"{state.agent_id}|{state.session_id}",
            state,
            ttl_seconds=self._retention_seconds if ended else None,
        )
