"""The `Reputation` actor: one per agent id, holding its ReputationRecord.

Outcomes for one agent are applied one at a time by the actor runtime (turn-based), so
concurrent outcomes never lose an update; each task's outcome is applied once.
"""

from typing import Any

from dapr.actor import ActorInterface, actormethod
from pydantic import BaseModel, Field

from agora.core.contracts import OutcomeReport
from agora.core.market import Bid, ReputationRecord
from agora.core.reputation import apply_outcome
from agora.runtime.actor import PydanticActor, actor_endpoint

RECENT_OUTCOMES_KEPT = 1000
PENDING_BIDS_KEPT = 200


class ReputationState(BaseModel):
    record: ReputationRecord = Field(default_factory=ReputationRecord)
    pending_costs: dict[str, float] = Field(default_factory=dict)
    """Estimated cost of this agent's winning bid per task id, until the task's outcome."""
    recent_outcomes: list[str] = Field(default_factory=list)
    """Task ids whose outcome was applied (bounded), so a redelivered outcome is not counted twice."""


class ReputationActorInterface(ActorInterface):
    @actormethod(name="get_record")
    async def get_record(self) -> dict[str, Any]: ...

    @actormethod(name="record_bid")
    async def record_bid(self, bid: dict[str, Any]) -> dict[str, Any]: ...

    @actormethod(name="apply_outcome")
    async def apply_outcome(self, report: dict[str, Any]) -> dict[str, Any]: ...


class Reputation(PydanticActor[ReputationState], ReputationActorInterface):
    state_model = ReputationState

    async def _on_activate(self) -> None:
        await super()._on_activate()
        if not self.state.record.agent_id:
            self.state.record = self.state.record.model_copy(update={"agent_id": self.id.id})

    @actor_endpoint
    async def get_record(self) -> ReputationRecord:
        return self.state.record

    @actor_endpoint
    async def record_bid(self, bid: dict[str, Any]) -> ReputationRecord:
        """Remember the self-report and cost estimate of a winning bid until its outcome."""
        placed = Bid.model_validate(bid)
        pending = dict(self.state.record.pending_self_reports)
        pending[placed.task_id] = placed.self_reported_success_prob
        self.state.pending_costs[placed.task_id] = placed.estimated_cost_usd
        for stale in list(pending)[:-PENDING_BIDS_KEPT]:
            pending.pop(stale, None)
            self.state.pending_costs.pop(stale, None)
        self.state.record = self.state.record.model_copy(update={"pending_self_reports": pending})
        await self.commit()
        return self.state.record

    @actor_endpoint
    async def apply_outcome(self, report: dict[str, Any]) -> ReputationRecord:
        parsed = OutcomeReport.model_validate(report)
        task_id = parsed.outcome.task_id
        if task_id in self.state.recent_outcomes:
            return self.state.record
        self.state.record = apply_outcome(
            self.state.record,
            parsed.outcome,
            estimated_cost_usd=self.state.pending_costs.pop(task_id, None),
            self_reported=None,  # taken from the record's pending self-reports
            counts_as_success=parsed.counts_as_success,
        )
        self.state.recent_outcomes = [*self.state.recent_outcomes, task_id][-RECENT_OUTCOMES_KEPT:]
        await self.commit()
        return self.state.record


ACTOR_TYPE = Reputation.__name__  # the Dapr actor type is the class name
