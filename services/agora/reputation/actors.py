"""The `Reputation` actor: one per agent id, holding its ReputationRecord.

Outcomes for one agent are applied one at a time by the actor runtime (turn-based), so
concurrent outcomes never lose an update; each task's outcome is applied once. After applying,
the actor notes its agent's total in the market's outcome count (`MarketOutcomes`, the `N` of
the UCB bonus), on every call, so a call retried after its note failed notes it again.
"""

from dataclasses import dataclass

from pydantic import BaseModel, Field

from agora.core.contracts import OutcomeReport, OutcomeReports
from agora.core.errors import InvalidArgument
from agora.core.market import ReputationRecord
from agora.core.reputation import (
    DEFAULT_UNCHECKED_WEIGHT,
    CountedOutcome,
    apply_outcome,
    correct_outcome,
    counted_outcome,
)
from agora.reputation.outcome_counts import MarketOutcomes
from agora.runtime.actor_host import PydanticActor, actor_endpoint
from agora.runtime.interfaces import ReputationInterface

RECENT_OUTCOMES_KEPT = 1000


class ReputationState(BaseModel):
    record: ReputationRecord = Field(default_factory=ReputationRecord)
    recent_outcomes: list[str] = Field(default_factory=list)
    """Task ids whose outcome was applied (bounded), so a redelivered outcome is not counted twice."""
    counted: dict[str, CountedOutcome] = Field(default_factory=dict)
    """How each of those outcomes was counted, so a dispute's revision corrects it once."""


@dataclass(frozen=True)
class ReputationDeps:
    """What every `Reputation` actor works with."""

    outcomes: MarketOutcomes | None = None
    """The market's outcome count (None: no count is kept)."""
    unchecked_weight: float = DEFAULT_UNCHECKED_WEIGHT
    """What an outcome without a verdict counts as (`agora.core.reputation.outcome_weight`)."""


class Reputation(PydanticActor[ReputationState, ReputationDeps], ReputationInterface):
    """Built with the market's outcome count and the weight of an unchecked outcome."""

    state_model = ReputationState

    async def _on_activate(self) -> None:
        await super()._on_activate()
        if not self.state.record.agent_id:
            self.state.record = self.state.record.model_copy(update={"agent_id": self.id.id})

    @actor_endpoint
    async def get_record(self) -> ReputationRecord:
        return self.state.record

    @actor_endpoint
    async def apply_outcome(self, report: OutcomeReport) -> ReputationRecord:
        if self._apply(report):
            await self.commit()
        await self._note_total()
        return self.state.record

    @actor_endpoint
    async def apply_outcomes(self, batch: OutcomeReports) -> ReputationRecord:
        """Several outcomes of this agent's tasks in one turn and one write."""
        strangers = sorted({r.outcome.agent_id for r in batch.reports} - {self.id.id})
        if strangers:
            raise InvalidArgument(f"outcomes of other agents than {self.id.id}: {', '.join(strangers)}")
        applied = [self._apply(report) for report in batch.reports]
        if any(applied):
            await self.commit()
        await self._note_total()
        return self.state.record

    async def _note_total(self) -> None:
        if self.deps.outcomes is not None:
            await self.deps.outcomes.note(self.id.id, self.state.record.total_tasks)

    def _apply(self, report: OutcomeReport) -> bool:
        """Count one task's outcome (once), or correct it by a later revision (once); whether it
        changed anything."""
        task_id = report.outcome.task_id
        # A fallback bid's numbers come from the agent's profile, not from the agent: they say
        # nothing about how well it estimates itself.
        bid = report.winning_bid if report.winning_bid and not report.winning_bid.fallback else None
        verdict = report.verdict.status if report.verdict else None
        confidence = (
            report.verdict.confidence if report.verdict and report.verdict.confidence is not None else 1.0
        )
        now = counted_outcome(
            report.outcome,
            report.counts_as_success,
            verdict,
            self.deps.unchecked_weight,
            report.revision,
            confidence,
        )
        if task_id in self.state.recent_outcomes:
            before = self.state.counted.get(task_id)
            if before is None or now.revision <= before.revision:
                return False  # the same outcome again, or one counted before outcomes were kept so
            self.state.record = correct_outcome(
                self.state.record,
                before,
                now,
                self_reported=bid.self_reported_success_prob if bid else None,
            )
            self.state.counted = {**self.state.counted, task_id: now}
            return True
        self.state.record = apply_outcome(
            self.state.record,
            report.outcome,
            estimated_cost_usd=bid.estimated_cost_usd if bid else None,
            self_reported=bid.self_reported_success_prob if bid else None,
            counts_as_success=report.counts_as_success,
            verdict=verdict,
            unchecked_weight=self.deps.unchecked_weight,
            confidence=confidence,
        )
        kept = [*self.state.recent_outcomes, task_id][-RECENT_OUTCOMES_KEPT:]
        self.state.recent_outcomes = kept
        still = set(kept)
        self.state.counted = {t: c for t, c in {**self.state.counted, task_id: now}.items() if t in still}
        return True


ACTOR_TYPE = Reputation.__name__  # the Dapr actor type is the class name
