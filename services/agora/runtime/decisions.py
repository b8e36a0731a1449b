"""Checking an announced escalation decision against the escalation's own record.

`agora.escalation.resolved` tells a waiting party to go on, so a party acts on a decision only
after the `Escalation` actor that holds the record confirms it: topic scopes keep other apps
from publishing on the topic, and this check also refuses what slips past them (a message
injected into the broker, a replay altered on the way).
"""

from __future__ import annotations

from agora.core.escalation.record import EscalationRecord, UnverifiedDecision
from agora.core.messages import EscalationResolved
from agora.runtime.clients import EscalationActors


async def verified(escalations: EscalationActors, event: EscalationResolved) -> EscalationRecord:
    """The escalation's record when it holds exactly the announced decision; else
    `UnverifiedDecision` (and `NotFound` for an escalation that does not exist), both
    permanent, so the message is dead-lettered with the reason."""
    record = await escalations(event.escalation_id).get()
    disagreement = event.disagreement_with(record)
    if disagreement is not None:
        raise UnverifiedDecision(f"decision refused: {disagreement}")
    return record
