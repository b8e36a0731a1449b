"""`agora registry ...`: registering agents (from a file, each validated first), listing them,
asking which are capable of a task's skills, and removing one."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pydantic import ValidationError

from agora.cli.files import load_models
from agora.cli.problems import invalid_input
from agora.cli.text import moment
from agora.cli.transport import invoke
from agora.core.contracts import AgentList, Deregistered, FilterAnswer, RegisteredAgent
from agora.core.models import CapabilityProfile, CapabilityQuery

__all__ = ["cmd_deregister", "cmd_filter", "cmd_list", "cmd_register", "print_agents"]


def print_agents(agents: Sequence[CapabilityProfile]) -> None:
    if not agents:
        print("(no agents)")
    for agent in agents:
        print(
            f"{agent.agent_id:<24} {agent.model_tier:<9} ${agent.cost_per_step_usd:<8.4f} "
            f"{', '.join(agent.skill_tags)}"
        )


def cmd_register(args: argparse.Namespace) -> int:
    profiles = load_models(args.file, CapabilityProfile, "agent_id")  # every item checked first
    path = f"v1/agents?lease_seconds={args.lease_seconds}"
    for profile in profiles:
        saved = invoke(args, "POST", path, RegisteredAgent, profile)
        until = f" until {moment(saved.lease_expires_at)}" if saved.lease_expires_at else ""
        print(f"registered {saved.agent_id}{until} (register again to renew)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    print_agents(invoke(args, "GET", "v1/agents", AgentList).agents)
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    try:
        query = CapabilityQuery(
            required_skills=args.required, preferred_skills=args.preferred or [], limit=args.limit or None
        )
    except ValidationError as exc:
        raise invalid_input("the capability query", exc) from None
    print_agents(invoke(args, "POST", "v1/agents/filter", FilterAnswer, query).agents)
    return 0


def cmd_deregister(args: argparse.Namespace) -> int:
    answer = invoke(args, "DELETE", f"v1/agents/{args.agent_id}", Deregistered)
    print(f"deregistered {args.agent_id}" if answer.deregistered else f"{args.agent_id} was not registered")
    return 0
