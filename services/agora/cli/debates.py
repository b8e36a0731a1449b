"""`agora debate ...`: starting a debate on a question (three offline debaters unless a file
names others), a debate round by round (watched until it ends or waits for a person), and the
debates, newest first."""

from __future__ import annotations

import argparse
import time
import uuid

from pydantic import ValidationError

from agora.cli.files import load_models
from agora.cli.listings import created, listing_summary, page_query
from agora.cli.problems import invalid_input
from agora.cli.text import shorten
from agora.cli.transport import invoke
from agora.core.debate.config import AggregationStrategy, DebateConfig, DebaterConfig
from agora.core.debate.record import (
    FINAL_DEBATE_STATES,
    DebateAccepted,
    DebateList,
    DebateRecord,
    DebateState,
)
from agora.core.debate.request import DebateSubmission
from agora.debate.view import debate_lines

__all__ = ["DEFAULT_DEBATERS", "cmd_debate_ask", "cmd_debate_list", "cmd_debate_show", "debate_list_lines"]


DEFAULT_DEBATERS = [
    DebaterConfig(debater_id="d0", role_hint="You answer carefully."),
    DebaterConfig(debater_id="d1", role_hint="You are a skeptical devil's advocate."),
    DebaterConfig(debater_id="d2", role_hint="You look for what the others missed."),
]


def cmd_debate_ask(args: argparse.Namespace) -> int:
    debaters = load_models(args.debaters, DebaterConfig, "debater_id") if args.debaters else DEFAULT_DEBATERS
    try:
        submission = DebateSubmission(
            question=args.question,
            options=args.option or [],
            config=DebateConfig(
                debaters=debaters,
                max_rounds=args.max_rounds,
                aggregation=AggregationStrategy(args.aggregation),
                adaptive_routing=not args.no_routing,
            ),
        )
    except ValidationError as exc:
        raise invalid_input("the debate", exc) from None
    debate_id = args.id or f"debate-{uuid.uuid4().hex[:8]}"
    accepted = invoke(args, "PUT", f"v1/debates/{debate_id}", DebateAccepted, submission, service="debate")
    print(f"{debate_id}: {'started' if accepted.created else f'already exists ({accepted.state})'}")
    if args.wait:
        args.debate_id, args.watch, args.json = debate_id, True, False
        return cmd_debate_show(args)
    return 0


def cmd_debate_show(args: argparse.Namespace) -> int:
    shown: list[str] = []
    while True:
        record = invoke(args, "GET", f"v1/debates/{args.debate_id}", DebateRecord, service="debate")
        if args.json:
            print(record.model_dump_json(indent=2))
            return 0
        lines = debate_lines(record)
        if lines != shown:
            print("\n".join(lines), flush=True)
            shown = lines
        if (
            not args.watch
            or record.state in FINAL_DEBATE_STATES
            or record.state is DebateState.WAITING_FOR_HUMAN
        ):
            return 0
        time.sleep(0.5)


def debate_list_lines(listing: DebateList, offset: int, limit: int) -> list[str]:
    lines = []
    for record in listing.debates:
        answer = shorten(record.final_answer or "", 30)
        lines.append(
            f"{record.debate_id:<32} {record.state:<17} {created(record.created_at)}  {answer:<30} "
            f"{shorten(record.question, 40)}"
        )
    state = str(listing.state) if listing.state is not None else None
    return [*lines, listing_summary("debate", state, len(listing.debates), listing.total, offset, limit)]


def cmd_debate_list(args: argparse.Namespace) -> int:
    query = page_query("v1/debates", args.limit, args.offset, state=args.state)
    listing = invoke(args, "GET", query, DebateList, service="debate")
    print("\n".join(debate_list_lines(listing, args.offset, args.limit)))
    return 0
