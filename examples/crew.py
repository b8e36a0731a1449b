"""A crew of two agents on one task, run in this process with the offline model: a researcher,
then a writer given the researcher's work (`CrewPattern.SEQUENTIAL`).

    .venv/bin/python examples/crew.py

With `MarketCrew(..., use_market=True, market=DaprMarket(<sidecar HTTP port>))` the same task
goes to the market instead (docs/sdk.md, "Crews")."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import AgentDefinition, AgentRunner, Crew, CrewMember, CrewPattern


def answers(text: str):  # type: ignore[no-untyped-def]
    """The offline model's policy for one member: answer `text`, whatever it is asked."""

    def policy(messages: Sequence[ChatMessage]) -> str:
        return json.dumps({"thought": "done", "action": "final", "answer": text, "confidence": 0.9})

    return policy


researcher = CrewMember(
    AgentDefinition(name="researcher", instructions="Find the facts."),
    AgentRunner(
        OfflineModelClient(overrides=answers("Battery prices fell 20% in 2025; subsidies cover 40%."))
    ),
    role="researcher",
)
writer = CrewMember(
    AgentDefinition(name="writer", instructions="Write a short note from the research."),
    AgentRunner(OfflineModelClient(overrides=answers("Home batteries pay back within 7 years in Spain."))),
    role="writer",
)
crew = Crew([researcher, writer], session_id="example-crew", pattern=CrewPattern.SEQUENTIAL)


async def main() -> None:
    result = await crew.run("Write a note on home solar batteries in Spain")
    for name, output in result.outputs.items():
        print(f"{name}: {output}")
    print(f"{len(result.runs)} runs, ${result.total_cost_usd:.4f}, {result.duration_seconds:.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
