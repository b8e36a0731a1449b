"""`agora task ...`: publishing tasks to the market (from a file, each validated first), a
task's status, bids, scores and outcome, and the tasks in a status."""

from __future__ import annotations

import argparse

from agora.cli.files import load_models
from agora.cli.sidecar import sidecar_for
from agora.cli.text import MAX_TEXT_CHARS, one_line, shorten
from agora.cli.transport import invoke, send
from agora.core.contracts import TaskList
from agora.core.market import TaskSpec
from agora.core.messages import Topic
from agora.core.task_lifecycle import TaskRecord

__all__ = ["cmd_task_list", "cmd_task_publish", "cmd_task_show", "task_lines"]


def cmd_task_publish(args: argparse.Namespace) -> int:
    # Every item is checked first: a typo is reported here, not dead-lettered later.
    specs = load_models(args.file, TaskSpec, "task_id")
    sidecar = sidecar_for(args)
    url = f"{sidecar.url}/v1.0/publish/agora-pubsub/{Topic.TASKS}"
    for spec in specs:
        send(sidecar, "POST", url, f"topic {Topic.TASKS}", spec)
        print(f"published {spec.task_id}")
    return 0


def task_lines(record: TaskRecord) -> list[str]:
    """A task for people: its status and history, every bid's scores (★ the winner), why it was
    rejected, and its outcome with what the agent said (its answer, or why it failed)."""
    spec, allocation, outcome = record.spec, record.allocation, record.outcome
    lines = [
        f"{spec.task_id}: {record.status}  ({spec.description})",
        "  history: " + " → ".join(change.status for change in record.history),
    ]
    if allocation is not None:
        for score in allocation.all_scores:
            won = "★" if score.agent_id == allocation.winning_agent_id else " "
            lines.append(
                f"  {won} {score.agent_id:<14} final={score.final_score:+.3f} "
                f"calibrated={score.calibrated_success_prob:.2f} reputation={score.reputation_score:.2f} "
                f"cost={score.cost_score:.2f} ucb={score.ucb_bonus:.2f}"
            )
        if allocation.reject_reason:
            lines.append(f"  rejected: {allocation.reject_reason}")
    if outcome is not None:
        lines.append(
            f"  outcome: {'success' if outcome.actual_success else 'failure'} by {outcome.agent_id}, "
            f"{outcome.actual_steps} steps, ${outcome.actual_cost_usd:.4f}"
        )
        if outcome.summary:
            lines.append(f"  summary: {shorten(one_line(outcome.summary), MAX_TEXT_CHARS)}")
    return lines


def cmd_task_show(args: argparse.Namespace) -> int:
    record = invoke(args, "GET", f"v1/tasks/{args.task_id}", TaskRecord, service="taskboard")
    print(record.model_dump_json(indent=2) if args.json else "\n".join(task_lines(record)))
    return 0


def cmd_task_list(args: argparse.Namespace) -> int:
    listing = invoke(args, "GET", f"v1/tasks?status={args.status}", TaskList, service="taskboard")
    for task_id in listing.task_ids:
        print(task_id)
    return 0
