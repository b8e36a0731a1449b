"""The `SessionUncertainty` actor parking its session with the escalation service, on the SDK's
mock actor runtime (the escalation service played by the core's own `park`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from agora.core.contracts import StepReport, StepVerdict
from agora.core.escalation.record import EscalationRecord, ParkRequest, park
from agora.core.messages import EscalationResolved
from agora.runtime.actor_client import ActorClient
from agora.runtime.actor_interface import wire_name
from agora.runtime.interfaces import EscalationInterface
from agora.uncertainty.actors import SessionUncertainty, UncertaintyDeps
from tests.unit.helpers import answer_of, hosted

UNSURE = StepReport(
    step_id="1", text="Two entries do not match. Confidence: 19%", prompt="Reconcile the ledger"
)


class EscalationService(ActorClient):
    """`Escalation` actors' `park`, as the escalation service answers it (a park under an id
    already used with another context is refused): the actor client every proxy calls through."""

    def __init__(self) -> None:
        self.records: dict[str, EscalationRecord] = {}

    async def call(self, actor_type: str, actor_id: str, method: str, payload: Any = None) -> Any:
        assert method == wire_name(EscalationInterface.park) and isinstance(payload, ParkRequest)
        record = park(
            actor_id, payload.waiting_party, payload.context, now=datetime.now(UTC),
            who=payload.who, why=payload.why, existing=self.records.get(actor_id),
        )  # fmt: skip
        self.records[actor_id] = record
        return record.model_dump(mode="json")


def session(service: EscalationService) -> SessionUncertainty:
    return hosted(SessionUncertainty, "s1", UncertaintyDeps(actors=service))


def result(answer: object) -> BaseModel:
    found = answer_of(answer)
    assert found.error is None, found.error
    assert isinstance(found.result, BaseModel)
    return found.result


def skip(escalation_id: str) -> EscalationResolved:
    return EscalationResolved.model_validate(
        {"escalation_id": escalation_id, "waiting_party": {"kind": "session", "id": "s1"},
         "decision": {"kind": "escalation", "action": "skip"}, "decided_by": "ops@example.com",
         "status": "RESOLVED"}
    )  # fmt: skip


async def test_a_step_reported_again_after_its_decision_is_parked_under_a_new_escalation() -> None:
    """A run started again from its first step (its worker crashed) reports a step whose pause
    a person already decided: it waits under a new escalation, not the decided one."""
    service = EscalationService()
    monitor = session(service)
    await monitor._on_activate()

    first = result(await monitor.observe_llm_response(UNSURE))
    assert isinstance(first, StepVerdict) and first.escalation_id == "s1.1"
    result(await monitor.apply_decision(skip("s1.1")))

    rerun = StepReport(
        step_id="1", text="The entries still differ. Confidence: 50%", prompt="Reconcile the ledger"
    )
    again = result(await monitor.observe_llm_response(rerun))
    assert isinstance(again, StepVerdict) and again.status == "WAITING_FOR_HUMAN"
    assert again.escalation_id == "s1.1.2"
    assert sorted(service.records) == ["s1.1", "s1.1.2"]
    assert service.records["s1.1"].context != service.records["s1.1.2"].context
