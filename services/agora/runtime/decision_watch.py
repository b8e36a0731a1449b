"""The watch over runs waiting for a person whose decision is on record but was not taken.

A person's decision reaches the run it paused as a workflow event, raised once when its
announcement arrives (`Decisions.relay`), and the run reads its escalation's record now and
then meanwhile, at intervals that double up to ten minutes (`Decisions.wait`). The event can be
lost inside the workflow engine: Dapr 1.18.2 pairs a workflow step with the worker's answer by
instance id alone, so when a state store outage cuts a step short, the answer that comes late
is taken for the next step's, and the events that next step delivered are consumed unseen
(docs/guarantees.md, "A decision the engine lost"). The run would then wait for its next read
of the record, up to ten minutes after the decision.

Each replica of the planner and of the debate service looks every `every_s` at the runs
listed as waiting; for one whose escalation has been decided for at least `grace_s`, the
decision is raised to the run again. Raising it again is harmless: the run waits for the event
of that escalation once, and an event nobody waits for is never read."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from pydantic import BaseModel

from agora.core.limits import MAX_PAGE_SIZE
from agora.core.messages import EscalationResolved
from agora.runtime.clients import EscalationActors
from agora.runtime.pubsub import RejectMessage
from agora.runtime.workflows import Decisions, RunRecord, RunRecords, WorkflowHost, decision_event

log = logging.getLogger(__name__)

DECISION_WATCH_EVERY_S = 20.0
"""How often a replica looks at the runs waiting for a person."""
DECISION_GRACE_S = 20.0
"""How long a decision on record may go untaken before it is raised to its run again: its own
announcement normally gets there within a second."""

R = TypeVar("R", bound=RunRecord)
D = TypeVar("D", bound=BaseModel)


class DecisionWatch(Generic[R, D]):
    """Raise again the decisions on record that waiting runs have not taken (see the module)."""

    def __init__(
        self,
        records: RunRecords[R],
        waiting_state: str,
        run_id_of: Callable[[R], str],
        escalation_of: Callable[[R], str | None],
        decisions: Decisions[D],
        host: WorkflowHost,
        escalations: EscalationActors,
        *,
        grace_s: float = DECISION_GRACE_S,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.records = records
        self.waiting_state = waiting_state
        self.run_id_of = run_id_of
        self.escalation_of = escalation_of
        self.decisions = decisions
        self.host = host
        self.escalations = escalations
        self.grace = timedelta(seconds=grace_s)
        self.now = now

    async def sweep(self) -> list[str]:
        """One look at every waiting run: the ids of the runs whose decision was raised again."""
        raised: list[str] = []
        offset = 0
        while True:
            total, page = await self.records.page(self.waiting_state, MAX_PAGE_SIZE, offset)
            for record in page:
                if await self._raise_again(record):
                    raised.append(self.run_id_of(record))
            offset += MAX_PAGE_SIZE
            if offset >= total:
                return raised

    async def _raise_again(self, record: R) -> bool:
        escalation_id = self.escalation_of(record)
        if escalation_id is None or self.now() - record.updated_at < self.grace:
            # A run saves its record before it waits: a decision on it is younger than the record.
            return False
        escalation = await self.escalations(escalation_id).get()
        decided_at = escalation.decided_at
        if escalation.decision is None or decided_at is None or self.now() - decided_at < self.grace:
            return False
        try:
            data = self.decisions.carried(EscalationResolved.of(escalation))
        except RejectMessage:
            return False  # a decision the run cannot take: its announcement was refused too
        run_id = self.run_id_of(record)
        log.warning(
            "a decision on record was not taken by its run: raised to it again",
            extra={"run_id": run_id, "escalation_id": escalation_id},
        )
        await self.host.client.raise_workflow_event(
            run_id, decision_event(escalation_id), data=data.model_dump(mode="json")
        )
        return True

    async def watch_forever(self, every_s: float = DECISION_WATCH_EVERY_S) -> None:
        """`sweep` every `every_s` for the app's lifetime; a sweep that fails is tried at the next."""
        while True:
            await asyncio.sleep(every_s)
            try:
                await self.sweep()
            except Exception as exc:  # a store or sidecar not answering: the next sweep tries again
                log.warning(
                    "the decision watch could not look at the waiting runs", extra={"error": repr(exc)}
                )
