"""A run waiting for a person reads its escalation's record now and then, so a decision whose
announcement never reaches it (held up in the broker) still lets it go on; a run begun before
that change waits for the announcement alone, as its history recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.escalation.record import EscalationRecord, WaitingParty, WaitingPartyKind, park, resolve
from agora.core.plans.workflow import PlanDecision
from agora.planner.workflow import DRAFT, PLAN_DECISIONS, READ_DECISION, plan_run
from agora.runtime.patches import PATCHES, PLAN_DECISION_ON_RECORD
from agora.runtime.workflows import DecisionOnRecord
from tests.unit.test_plan_workflow import unplannable, unplanned_start
from tests.unit.workflow_replay import NEVER, Scheduled, ScriptedContext

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
RETRY = EscalationResponse(action=EscalationAction.MODIFY_PROMPT, modified_prompt="a smaller task")


def announcement_lost(readings_before_decided: int) -> Callable[[Scheduled], Any]:
    """The plan gets no plan at first and stops for a person; the decision's event never comes;
    the record holds no decision for the first `readings_before_decided` readings, then RETRY."""
    planned = unplannable([])
    readings: list[str] = []

    def answer(step: Scheduled) -> Any:
        if step.kind == "event":
            return NEVER
        if step.kind == "timer":
            return None
        if step.name == READ_DECISION.name:
            readings.append(step.argument.escalation_id)
            if len(readings) <= readings_before_decided:
                return None
            decided = PlanDecision(
                escalation_id=step.argument.escalation_id, response=RETRY, decided_by="pat"
            )
            return decided.model_dump(mode="json")
        return planned(step)

    return answer


def test_a_plan_whose_decision_announcement_is_lost_goes_on_with_the_decision_on_record() -> None:
    ctx = ScriptedContext(announcement_lost(readings_before_decided=2))
    result = ctx.run(plan_run, unplanned_start())

    waits = [[(s.kind, s.name) for s in wait] for wait in ctx.waits]
    # One waiter for the event, then timers doubling from a minute, each followed by a reading.
    timers = [name for wait in waits for kind, name in wait if kind == "timer"]
    assert timers == [str(timedelta(minutes=1)), str(timedelta(minutes=2)), str(timedelta(minutes=4))]
    assert sum(kind == "event" for wait in waits for kind, _ in wait) == 1
    readings = ctx.activities(READ_DECISION.name)
    assert [r.escalation_id for r in readings] == ["plan.p1.stop1"] * 3
    assert [d.task for d in ctx.activities(DRAFT.name)] == ["", "a smaller task"], "the decision applied"
    assert result is not None


def test_a_plan_begun_before_the_record_was_read_waits_for_the_announcement_alone() -> None:
    earlier = frozenset(p.name for p in PATCHES if p is not PLAN_DECISION_ON_RECORD)
    ctx = ScriptedContext(unplannable([RETRY]), patched=earlier)
    ctx.run(plan_run, unplanned_start())

    assert all(s.kind != "timer" for wait in ctx.waits for s in wait)
    assert ctx.activities(READ_DECISION.name) == []
    assert [d.task for d in ctx.activities(DRAFT.name)] == ["", "a smaller task"]


class Escalation:
    def __init__(self, record: EscalationRecord) -> None:
        self.record = record

    async def get(self) -> EscalationRecord:
        return self.record


def stop_record() -> EscalationRecord:
    context = EscalationContext(
        job_id="p1", step=1, validation_results=[], confidence=0.0, retry_count=0, error_history=[],
        prompt_used="a task", output_summary="no plan",
    )  # fmt: skip
    return park("plan.p1.stop1", WaitingParty(kind=WaitingPartyKind.PLAN_STEP, id="p1"), context, now=NOW)


def test_the_reading_gives_the_decision_the_record_holds_and_none_before() -> None:
    record = stop_record()
    read = PLAN_DECISIONS.reading(lambda escalation_id: Escalation(record))  # type: ignore[arg-type]
    lookup = DecisionOnRecord(escalation_id="plan.p1.stop1")

    assert asyncio.run(read(lookup)) is None, "waiting: nothing to go on with"
    record = resolve(record, RETRY, "pat", "try a smaller task", NOW + timedelta(minutes=3))
    decided = asyncio.run(read(lookup))
    assert decided == PlanDecision(escalation_id="plan.p1.stop1", response=RETRY, decided_by="pat")
