"""What the inbox and an escalation's page show of the escalation records: the values their
templates render, the state an open page polls, and the sentence a refused decision gets."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from pydantic import AwareDatetime, BaseModel

from agora.console.boards import link
from agora.console.decision_form import EXTENSIONS, FIELD_LABELS, actions_for, prompt_of
from agora.console.inbox import INBOX_PAGE_SIZE, InboxFilter, age_text
from agora.console.pages import path_part, when
from agora.core.escalation.digest import context_digest, encode_field_digests, field_digests
from agora.core.escalation.listing import ListingFilter, confidence_of
from agora.core.escalation.record import EscalationRecord, EscalationStatus, WaitingPartyKind

__all__ = [
    "BELONGS_TO_PAGES",
    "EscalationState",
    "belongs_to",
    "escalation_href",
    "escalation_values",
    "inbox_values",
    "refusal",
]


class EscalationState(BaseModel):
    """`GET /escalations/{id}/state`: what an open escalation page compares with what it shows."""

    escalation_id: str
    status: EscalationStatus
    context_digest: str
    decided_by: str | None = None
    decided_at: AwareDatetime | None = None
    action: str | None = None

    @classmethod
    def of(cls, record: EscalationRecord) -> EscalationState:
        return cls(
            escalation_id=record.escalation_id,
            status=record.status,
            context_digest=context_digest(record),
            decided_by=record.decided_by,
            decided_at=record.decided_at,
            action=str(record.decision.action) if record.decision is not None else None,
        )


def escalation_href(escalation_id: str) -> str:
    return "/escalations/" + path_part(escalation_id)


def inbox_values(
    rows: list[EscalationRecord], total: int, shown: InboxFilter, now: datetime
) -> dict[str, Any]:
    """The inbox's rows (one page of `shown`) and its links to the pages beside it."""
    return {
        "rows": [
            {
                "record": r,
                "age": age_text(r.created_at, now),
                "confidence": confidence_of(r),
                "href": escalation_href(r.escalation_id),
            }
            for r in rows
        ],
        "total": total,
        "first": shown.page * INBOX_PAGE_SIZE + 1,
        "filter": shown,
        "filtered": shown.listing != ListingFilter(),
        "query": urlencode(shown.query()),
        "newer": urlencode(shown.query(shown.page - 1)) if shown.page > 0 else None,
        "older": urlencode(shown.query(shown.page + 1)) if len(rows) == INBOX_PAGE_SIZE else None,
    }


def escalation_values(
    record: EscalationRecord,
    *,
    problems: Mapping[str, str] | None = None,
    notice: str | None = None,
    changed: list[str] | None = None,
    form: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An escalation's page: its context, the decision form (with the digests it is sent
    with), and what a refused form said (`problems` by field, a `notice`, the fields `changed`
    since the page was shown, the `form` as it was filled in)."""
    return {
        "record": record,
        "context": record.context,
        "confidence": confidence_of(record),
        "prompt": prompt_of(record),
        "actions": actions_for(record),
        "digest": context_digest(record),
        "fields": encode_field_digests(field_digests(record)),
        "deadline_iso": record.deadline.isoformat() if record.deadline is not None else None,
        "problems": problems or {},
        "labels": FIELD_LABELS,
        "extensions": EXTENSIONS,
        "notice": notice,
        "changed": changed or [],
        "form": form or {},
        "href": escalation_href(record.escalation_id),
        "belongs_to": belongs_to(record),
    }


def refusal(current: EscalationRecord) -> str:
    """Why a request on an escalation was not applied, as `current` shows it."""
    if not current.waiting and current.decision is not None:
        return (
            f"Not applied: this escalation was already decided "
            f"({current.decision.action}) by {current.decided_by or '-'} at {when(current.decided_at)}."
        )
    return "Not applied: this escalation changed since you opened it. Look at it again before deciding."


BELONGS_TO_PAGES = {
    WaitingPartyKind.TASK: "tasks",
    WaitingPartyKind.PLAN_STEP: "plans",
    WaitingPartyKind.DEBATE: "debates",
}


def belongs_to(record: EscalationRecord) -> str | None:
    """The console's page of what waits (a session has none)."""
    pages = BELONGS_TO_PAGES.get(record.waiting_party.kind)
    return link(pages, record.waiting_party.id) if pages is not None else None
