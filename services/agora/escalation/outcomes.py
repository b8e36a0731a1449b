"""What happened after past escalations, kept in the Dapr state store, so a new escalation can
show the person similar past cases and what worked (`historical_suggestions`)."""

from __future__ import annotations

import asyncio

from agora.core.checks import RecordedError
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.record import EscalationRecord
from agora.core.outcomes.record import OutcomeStatus, StepOutcome
from agora.runtime.state import StateRepository
from agora.runtime.status_index import IdSet, StatusIndex

OUTCOME_NAMESPACE = "escalation:outcome"
OUTCOME_INDEX_NAMESPACE = "escalation:outcome-index"
ALL = "all"
OUTCOMES_KEPT = 1000
"""Learning records kept: the most recent ones (older ones are dropped as new ones come), so
every question about the history reads a bounded number of records."""


class DaprOutcomeStore:
    """`OutcomeStore` over Dapr state: one key per outcome, ids in a sharded index. A record
    is kept for `retention_seconds` (a state TTL) and only among the `kept` most recent."""

    def __init__(
        self,
        outcomes: StateRepository[StepOutcome],
        index: StateRepository[IdSet],
        *,
        retention_seconds: int | None = None,
        kept: int = OUTCOMES_KEPT,
    ) -> None:
        self._outcomes = outcomes
        self._index = StatusIndex(index)
        self._retention = retention_seconds
        self._kept = kept

    async def add(self, outcome: StepOutcome) -> None:
        await self._outcomes.save(outcome.outcome_id, outcome, ttl_seconds=self._retention)
        await self._index.move(outcome.outcome_id, None, ALL)

    async def all(self) -> list[StepOutcome]:
        ids = await self._index.list(ALL)
        found = await self._outcomes.get_many(ids)
        outcomes = sorted((v.value for v in found.values()), key=lambda o: o.timestamp)
        expired = [outcome_id for outcome_id in ids if outcome_id not in found]
        surplus = outcomes[: max(0, len(outcomes) - self._kept)]
        if expired or surplus:
            await self._drop(expired, [o.outcome_id for o in surplus])
        return outcomes[len(surplus) :]

    async def _drop(self, expired: list[str], surplus: list[str]) -> None:
        """Unlist records whose TTL ended, and delete (then unlist) the oldest beyond `kept`."""
        await asyncio.gather(*(self._outcomes.delete(outcome_id) for outcome_id in surplus))
        await asyncio.gather(*(self._index.discard(outcome_id, ALL) for outcome_id in [*expired, *surplus]))

    async def recent(self, n: int) -> list[StepOutcome]:
        return (await self.all())[-n:] if n > 0 else []


def query_for(context: EscalationContext) -> dict[str, str]:
    return {"text": " ".join([context.prompt_used, context.output_summary, *context.error_history])}


def outcome_of(record: EscalationRecord, succeeded: bool) -> StepOutcome | None:
    """The learning record of a decided escalation: its context, the decision, and whether the
    waiting party then got on (for skip and abort: whether it was skipped or aborted)."""
    context, decision = record.context, record.decision
    if not isinstance(context, EscalationContext) or decision is None:
        return None
    action = str(decision.action)
    status = {
        "abort": OutcomeStatus.ABORTED,
        "skip": OutcomeStatus.SKIPPED,
    }.get(action, OutcomeStatus.COMPLETED if succeeded else OutcomeStatus.FAILED)
    # Only what the escalation knows: no timing, completion mode or validation figures.
    return StepOutcome(
        outcome_id=f"escalation-{record.escalation_id}",
        step_id=str(context.step),
        job_id=context.job_id,
        retry_count=context.retry_count,
        final_status=status,
        success_without_retry=succeeded and context.retry_count == 0,
        # Similarity compares error messages: what went wrong, and what the party produced.
        error_history=[
            RecordedError(message=m) for m in [*context.error_history, context.output_summary[:500]]
        ],
        stdout_tail=context.output_summary[-500:],
        escalation_action=decision.action,  # type: ignore[arg-type]
        escalation_guidance=decision.guidance,
        escalation_confidence=context.confidence,
        escalation_id=record.escalation_id,
    )
