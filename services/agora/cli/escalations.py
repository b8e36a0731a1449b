"""`agora escalations ...`: the escalations, newest first, one with its context and
suggestions, and deciding one that waits for a person."""

from __future__ import annotations

import argparse
import os

from pydantic import ValidationError

from agora.cli.listings import listing_summary, page_query
from agora.cli.problems import invalid_input
from agora.cli.transport import invoke
from agora.core.contracts import EscalationList, ResumeRequest
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.escalation.record import EscalationRecord
from agora.escalation.view import escalation_lines, escalation_row

__all__ = ["cmd_escalations_list", "cmd_escalations_resume", "cmd_escalations_show", "escalation_list_lines"]


def escalation_list_lines(listing: EscalationList, offset: int, limit: int) -> list[str]:
    rows = [escalation_row(record) for record in listing.escalations]
    status = str(listing.status) if listing.status is not None else None
    return [*rows, listing_summary("escalation", status, len(rows), listing.total, offset, limit)]


def cmd_escalations_list(args: argparse.Namespace) -> int:
    narrowed = {
        "status": args.status,
        "kind": args.kind,
        "older_than_minutes": None if args.older_than_minutes is None else str(args.older_than_minutes),
        "below_confidence": None if args.below_confidence is None else str(args.below_confidence),
    }
    query = page_query("v1/escalations", args.limit, args.offset, **narrowed)
    listing = invoke(args, "GET", query, EscalationList, service="escalation")
    if args.json:
        print(listing.model_dump_json(indent=2))
        return 0
    print("\n".join(escalation_list_lines(listing, args.offset, args.limit)))
    return 0


def cmd_escalations_show(args: argparse.Namespace) -> int:
    record = invoke(
        args, "GET", f"v1/escalations/{args.escalation_id}", EscalationRecord, service="escalation"
    )
    print(record.model_dump_json(indent=2) if args.json else "\n".join(escalation_lines(record)))
    return 0


def cmd_escalations_resume(args: argparse.Namespace) -> int:
    try:
        request = ResumeRequest(
            decision=EscalationResponse(
                action=EscalationAction(args.action),
                modified_prompt=args.prompt,
                guidance=args.guidance,
                reassign_to=args.to,
            ),
            who=args.who,
            why=args.why,
            context_digest=args.seen,
        )
    except ValidationError as exc:  # e.g. modify_prompt without a prompt: refused before it is sent
        raise invalid_input("the decision", exc) from None
    token = os.environ.get("AGORA_API_TOKEN")
    record = invoke(
        args,
        "POST",
        f"v1/escalations/{args.escalation_id}/resume",
        EscalationRecord,
        request,
        service="escalation",
        headers={"x-agora-token": token} if token else None,
    )
    action = record.decision.action if record.decision is not None else "-"
    print(f"{record.escalation_id}: {record.status} with {action} by {record.decided_by}")
    return 0
