"""`agora graph ...`: starting a run of a graph an agent app serves (its input as the state's
`input`) and showing a run: its status, the nodes it ran, where it waits and what it wrote."""

from __future__ import annotations

import argparse
import time
import uuid

from agora.cli.text import shorten
from agora.cli.transport import invoke
from agora.sdk import GraphState
from agora.sdk._graph_runs import GraphRunAccepted, GraphRunRecord, GraphRunState

__all__ = ["cmd_graph_show", "cmd_graph_start", "graph_run_lines"]

SETTLED = {
    GraphRunState.WAITING_FOR_HUMAN,
    GraphRunState.COMPLETED,
    GraphRunState.ABORTED,
    GraphRunState.FAILED,
}
"""A run in one of these states does not move on its own."""


def graph_run_lines(record: GraphRunRecord) -> list[str]:
    """A run as people read it: status and path, then where it waits, what it waits for, what
    it wrote and why it ended."""
    lines = [
        f"{record.graph_id}/{record.run_id}: {record.status}  {' → '.join(record.path) or '(not started)'}"
    ]
    if record.escalation_id is not None:
        lines.append(f"  waits at {record.waiting_at} for a person: escalation {record.escalation_id}")
        lines.append(
            f"  decide it: agora escalations resume {record.escalation_id} --action retry --why '...'"
        )
    if record.wait is not None:
        lines.append(f"  waits at {record.waiting_at} for {record.wait.kind} {record.wait.id}")
    output = GraphState.model_validate_json(record.state).output
    if output:
        lines.append(f"  output: {shorten(output, 300)}")
    if record.reason:
        lines.append(f"  reason: {record.reason}")
    return lines


def cmd_graph_start(args: argparse.Namespace) -> int:
    run_id = args.run_id or f"run-{uuid.uuid4().hex[:8]}"
    path = f"v1/graphs/{args.graph_id}/runs/{run_id}"
    accepted = invoke(args, "PUT", path, GraphRunAccepted, GraphState(input=args.input), service=args.app)
    print(f"{args.graph_id}/{run_id}: {'started' if accepted.created else 'already exists'}")
    if args.wait:
        return _show(args, args.graph_id, run_id, watch=True)
    return 0


def cmd_graph_show(args: argparse.Namespace) -> int:
    if args.json:
        record = invoke(
            args, "GET", f"v1/graphs/{args.graph_id}/runs/{args.run_id}", GraphRunRecord, service=args.app
        )
        print(record.model_dump_json(indent=2))
        return 0
    return _show(args, args.graph_id, args.run_id, watch=args.watch)


def _show(args: argparse.Namespace, graph_id: str, run_id: str, *, watch: bool) -> int:
    shown: list[str] = []
    while True:
        record = invoke(args, "GET", f"v1/graphs/{graph_id}/runs/{run_id}", GraphRunRecord, service=args.app)
        lines = graph_run_lines(record)
        if lines != shown:
            print("\n".join(lines), flush=True)
            shown = lines
        if not watch or record.status in SETTLED:
            return 0
        time.sleep(1.0)
