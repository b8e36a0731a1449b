"""`agora plan ...`: submitting plan requests (from a file, each validated first), a plan as a
tree of waves (watched until it ends), and the plans, newest first."""

from __future__ import annotations

import argparse
import time

from agora.cli.files import load_models
from agora.cli.listings import created, listing_summary, page_query
from agora.cli.text import shorten
from agora.cli.transport import invoke
from agora.core.plans.record import FINAL_STATES, PlanAccepted, PlanList, PlanRecord
from agora.core.plans.request import PlanRequest, PlanSubmission
from agora.planner.view import plan_lines

__all__ = ["cmd_plan_list", "cmd_plan_show", "cmd_plan_submit", "plan_list_lines"]


def cmd_plan_submit(args: argparse.Namespace) -> int:
    requests = load_models(args.file, PlanRequest, "plan_id")
    for request in requests:
        submission = PlanSubmission.model_validate(request.model_dump(exclude={"plan_id"}))
        accepted = invoke(
            args, "PUT", f"v1/plans/{request.plan_id}", PlanAccepted, submission, service="planner"
        )
        state = "submitted" if accepted.created else f"already exists ({accepted.state})"
        print(f"{request.plan_id}: {state}")
    return 0


def cmd_plan_show(args: argparse.Namespace) -> int:
    shown: list[str] = []
    while True:
        record = invoke(args, "GET", f"v1/plans/{args.plan_id}", PlanRecord, service="planner")
        if args.json:
            print(record.model_dump_json(indent=2))
            return 0
        lines = plan_lines(record)
        if lines != shown:
            print("\n".join(lines), flush=True)
            shown = lines
        if not args.watch or record.state in FINAL_STATES:
            return 0
        time.sleep(1.0)


def plan_list_lines(listing: PlanList, offset: int, limit: int) -> list[str]:
    lines = []
    for record in listing.plans:
        version = f"v{record.plan.version}" if record.plan else "--"
        lines.append(
            f"{record.plan_id:<32} {record.state:<17} {version:<4} {created(record.created_at)}  "
            f"{shorten(record.request.task, 50)}"
        )
    state = str(listing.state) if listing.state is not None else None
    return [*lines, listing_summary("plan", state, len(listing.plans), listing.total, offset, limit)]


def cmd_plan_list(args: argparse.Namespace) -> int:
    query = page_query("v1/plans", args.limit, args.offset, state=args.state)
    listing = invoke(args, "GET", query, PlanList, service="planner")
    print("\n".join(plan_list_lines(listing, args.offset, args.limit)))
    return 0
