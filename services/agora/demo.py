"""The `make run` demo: register sample agents (over service invocation and over the intake
topic), send one malformed message, and print the registry's answer to a filter query."""

from __future__ import annotations

import time
from typing import Any

import httpx

SAMPLE_AGENTS: list[dict[str, Any]] = [
    {
        "agent_id": "researcher",
        "agent_name": "Web Researcher",
        "skill_tags": ["web_search", "summarize"],
        "model_tier": "balanced",
        "cost_per_step_usd": 0.002,
        "max_steps": 10,
    },
    {
        "agent_id": "analyst",
        "agent_name": "Data Analyst",
        "skill_tags": ["sql", "python", "summarize"],
        "model_tier": "powerful",
        "cost_per_step_usd": 0.01,
    },
    {
        "agent_id": "scout",
        "agent_name": "Fast Scout",
        "skill_tags": ["web_search"],
        "model_tier": "fast",
        "cost_per_step_usd": 0.0005,
        "max_steps": 5,
    },
    {
        "agent_id": "writer",
        "agent_name": "Report Writer",
        "skill_tags": ["summarize", "write"],
        "model_tier": "balanced",
        "cost_per_step_usd": 0.003,
    },
]


def run_demo(dapr_http: str) -> None:
    invoke = f"{dapr_http}/v1.0/invoke/registry/method"
    publish = f"{dapr_http}/v1.0/publish/agora-pubsub/agora.registry"
    with httpx.Client(timeout=30) as http:
        for profile in SAMPLE_AGENTS[:3]:
            http.post(f"{invoke}/v1/agents", json=profile).raise_for_status()
        # The last one arrives as a command on the intake topic, as any publisher would send it.
        http.post(publish, json={"kind": "register", "profile": SAMPLE_AGENTS[3]}).raise_for_status()
        # A malformed command: dead-lettered with its validation error, nothing else happens.
        http.post(
            publish, json={"kind": "register", "profile": {"agent_id": "", "skill_tags": []}}
        ).raise_for_status()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            agents = http.get(f"{invoke}/v1/agents").json()["agents"]
            if len(agents) >= len(SAMPLE_AGENTS):
                break
            time.sleep(0.1)
        query = {"required_skills": ["web_search"], "preferred_skills": ["summarize"]}
        found = http.post(f"{invoke}/v1/agents/filter", json=query).json()["agents"]
    print(f"\nDemo: {len(agents)} agents registered.")
    print("filter_capable(required=['web_search'], preferred=['summarize']):")
    for rank, agent in enumerate(found, 1):
        matched = "summarize" in agent["skill_tags"]
        print(f"  {rank}. {agent['agent_id']:<12} tier={agent['model_tier']:<9} preferred match={matched}")
    print("  (a malformed registration was dead-lettered to agora.deadletter; see the registry log)\n")
