"""`agora task ...`: publishing tasks to the market (from a file, each validated first), a
task's status, bids, scores and outcome, and the tasks in a status."""

from __future__ import annotations

import argparse
import json

from agora.cli.files import load_models
from agora.cli.sidecar import sidecar_for
from agora.cli.transport import invoke, send
from agora.core.market import TaskSpec
from agora.core.messages import Topic

__all__ = ["cmd_task_list", "cmd_task_publish", "cmd_task_show"]


def cmd_task_publish(args: argparse.Namespace) -> int:
    # Every item is checked first: a typo is reported here, not dead-lettered later.
    specs = load_models(args.file, TaskSpec, "task_id")
    sidecar = sidecar_for(args)
    url = f"{sidecar.url}/v1.0/publish/agora-pubsub/{Topic.TASKS}"
    for spec in specs:
        send(sidecar, "POST", url, f"topic {Topic.TASKS}", spec.model_dump(mode="json"))
        print(f"published {spec.task_id}")
    return 0


def cmd_task_show(args: argparse.Namespace) -> int:
    record = invoke(args, "GET", f"v1/tasks/{args.task_id}", service="taskboard")
    if args.json:
        print(json.dumps(record, indent=2))
        return 0
    allocation, outcome = record.get("allocation") or {}, record.get("outcome")
    print(f"{record['spec']['task_id']}: {record['status']}  ({record['spec']['description']})")
    print("  history: " + " → ".join(h["status"] for h in record["history"]))
    for score in allocation.get("all_scores", []):
        won = "★" if score["agent_id"] == allocation.get("winning_agent_id") else " "
        print(
            f"  {won} {score['agent_id']:<14} final={score['final_score']:+.3f} "
            f"calibrated={score['calibrated_success_prob']:.2f} reputation={score['reputation_score']:.2f} "
            f"cost={score['cost_score']:.2f} ucb={score['ucb_bonus']:.2f}"
        )
    if allocation.get("reject_reason"):
        print(f"  rejected: {allocation['reject_reason']}")
    if outcome:
        print(
            f"  outcome: {'success' if outcome['actual_success'] else 'failure'} by {outcome['agent_id']}, "
            f"{outcome['actual_steps']} steps, ${outcome['actual_cost_usd']:.4f}"
        )
    return 0


def cmd_task_list(args: argparse.Namespace) -> int:
    for task_id in invoke(args, "GET", f"v1/tasks?status={args.status}", service="taskboard")["task_ids"]:
        print(task_id)
    return 0
