"""`agora a2a ...`: A2A agents of any framework joined to a running agent app by their Agent
Card URLs (each reached through the app's sidecar), listed, and taken off the market."""

from __future__ import annotations

import argparse

from agora.cli.transport import invoke
from agora.core.contracts import A2AAgentJoin, A2AAgentJoined, A2AAgentsJoined

__all__ = ["cmd_a2a_join", "cmd_a2a_leave", "cmd_a2a_list", "joined_line"]


def joined_line(entry: A2AAgentJoined) -> str:
    terms = [
        *([f"${entry.price_per_step_usd}/step"] if entry.price_per_step_usd is not None else []),
        *([f"at most {entry.max_steps} steps"] if entry.max_steps is not None else []),
    ]
    return f"{entry.agent_id}  {entry.card_url}" + (f"  ({', '.join(terms)})" if terms else "")


def cmd_a2a_join(args: argparse.Namespace) -> int:
    """Its card is read by the app first: an unreadable one is refused with why."""
    join = A2AAgentJoin(card_url=args.card_url, price_per_step_usd=args.price, max_steps=args.max_steps)
    entry = invoke(args, "PUT", f"v1/a2a-agents/{args.agent_id}", A2AAgentJoined, join, service=args.app)
    print(f"joined {joined_line(entry)}")
    return 0


def cmd_a2a_list(args: argparse.Namespace) -> int:
    listed = invoke(args, "GET", "v1/a2a-agents", A2AAgentsJoined, service=args.app)
    for entry in listed.agents:
        print(joined_line(entry))
    if not listed.agents:
        print(f"no A2A agent joined {args.app} through its API")
    return 0


def cmd_a2a_leave(args: argparse.Namespace) -> int:
    entry = invoke(args, "DELETE", f"v1/a2a-agents/{args.agent_id}", A2AAgentJoined, service=args.app)
    print(f"left the market: {entry.agent_id} (its lease ends within seconds; a run under way finishes)")
    return 0
