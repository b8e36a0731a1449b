"""The decision watch: a run waiting for a person whose decision is on record but was not taken
(its event lost in the engine) gets the decision raised again, once it has been on record a
while; a run whose escalation is undecided, or decided a moment ago, is left alone."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.escalation.record import (
    EscalationRecord,
    WaitingParty,
    WaitingPartyKind,
    park,
    resolve,
)
from agora.core.plans.record import PlanRecord, PlanState, PlanStop, StopReason
from agora.planner.workflow import PLAN_DECISIONS
from agora.runtime.clients import EscalationActors
from agora.runtime.decision_watch import DECISION_GRACE_S, DecisionWatch
from agora.runtime.state import StateRepository
from agora.runtime.status_index import IdSet, StatusIndex
from agora.runtime.workflows import WorkflowHost
from tests.unit.test_run_records import T0, PlanStore, records_over, started
from tests.unit.test_status_index import MemoryStore


class Escalation:
    def __init__(self, record: EscalationRecord) -> None:
        self.record = record

    async def get(self) -> EscalationRecord:
        return self.record


class Raised:
    """The workflow client's `raise_workflow_event`, kept."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    async def raise_workflow_event(self, instance_id: str, event_name: str, *, data: Any = None) -> None:
        self.events.append((instance_id, event_name, data))


class Host:
    def __init__(self) -> None:
        self.client = Raised()


def waiting_on(escalation_id: str, plan_id: str, decided_at: datetime | None) -> EscalationRecord:
    party = WaitingParty(kind=WaitingPartyKind.PLAN_STEP, id=plan_id)
    context = EscalationContext(
        job_id=plan_id,
        step=1,
        validation_results=[],
        confidence=0.0,
        retry_count=0,
        error_history=["a subgoal failed"],
        prompt_used="Write the report",
        output_summary="",
    )
    record = park(escalation_id, party, context, now=T0)
    if decided_at is None:
        return record
    return resolve(record, EscalationResponse(action=EscalationAction.SKIP), "pat", "go on", decided_at)


async def test_a_decision_on_record_a_run_did_not_take_is_raised_to_it_again() -> None:
    store, index = PlanStore(), StatusIndex(cast(StateRepository[IdSet], MemoryStore()), shards=4)
    plans = records_over(store, index)
    now = T0 + timedelta(minutes=10)
    decided = {
        "plan-lost": now - timedelta(seconds=DECISION_GRACE_S + 1),
        "plan-just": now - timedelta(seconds=1),
        "plan-open": None,
    }
    escalations: dict[str, Escalation] = {}
    for minutes, (plan_id, at) in enumerate(decided.items()):
        await started(plans, plan_id, minutes, PlanState.RUNNING)
        escalation_id = f"plan.{plan_id}.stop1"
        stop = PlanStop(reason=StopReason.SUBGOAL_FAILED, escalation_id=escalation_id)
        record = store.values[plan_id]
        await plans.save(
            plan_id, record.model_copy(update={"state": PlanState.WAITING_FOR_HUMAN, "stop": stop}), "RUNNING"
        )
        escalations[escalation_id] = Escalation(waiting_on(escalation_id, plan_id, at))
    await started(plans, "plan-running", 5, PlanState.RUNNING)
    host = Host()
    watch: DecisionWatch[PlanRecord, Any] = DecisionWatch(
        plans,
        str(PlanState.WAITING_FOR_HUMAN),
        lambda record: record.plan_id,
        lambda record: record.stop.escalation_id if record.stop is not None else None,
        PLAN_DECISIONS,
        cast(WorkflowHost, host),
        cast(EscalationActors, escalations.__getitem__),
        now=lambda: now,
    )

    assert await watch.sweep() == ["plan-lost"]
    [(instance_id, event, data)] = host.client.events
    assert (instance_id, event) == ("plan-lost", "decision.plan.plan-lost.stop1")
    assert data["escalation_id"] == "plan.plan-lost.stop1" and data["response"]["action"] == "skip"
    assert data["decided_by"] == "pat"
