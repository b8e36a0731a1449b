"""`agora registry ...`: registering agents (from a file, each validated first), listing them,
asking which are capable of a task's skills, and removing one."""

from __future__ import annotations

import argparse
from typing import Any

from agora.cli.files import load_models
from agora.cli.transport import invoke
from agora.core.models import CapabilityProfile

__all__ = ["cmd_deregister", "cmd_filter", "cmd_list", "cmd_register", "print_agents"]


def print_agents(agents: list[dict[str, Any]]) -> None:
    if not agents:
        print("(no agents)")
    for agent in agents:
        print(
            f"{agent['agent_id']:<24} {agent['model_tier']:<9} ${agent['cost_per_step_usd']:<8.4f} "
            f"{', '.join(agent['skill_tags'])}"
        )


def cmd_register(args: argparse.Namespace) -> int:
    profiles = load_models(args.file, CapabilityProfile, "agent_id")  # every item checked first
    path = f"v1/agents?lease_seconds={args.lease_seconds}"
    for profile in profiles:
        saved = invoke(args, "POST", path, profile.model_dump(mode="json"))
        print(f"registered {saved['agent_id']} until {saved['lease_expires_at']} (register again to renew)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    print_agents(invoke(args, "GET", "v1/agents")["agents"])
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    query = {"required_skills": args.required, "preferred_skills": args.preferred or []}
    if args.limit:
        query["limit"] = args.limit
    print_agents(invoke(args, "POST", "v1/agents/filter", query)["agents"])
    return 0


def cmd_deregister(args: argparse.Namespace) -> int:
    answer = invoke(args, "DELETE", f"v1/agents/{args.agent_id}")
    print(
        f"deregistered {args.agent_id}"
        if answer.get("deregistered")
        else f"{args.agent_id} was not registered"
    )
    return 0
