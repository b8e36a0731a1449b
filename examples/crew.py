"""A crew of two agents on one task, run in this process (their models are functions, so it
needs no model vendor): a researcher,
then a writer given the researcher's work (`CrewPattern.SEQUENTIAL`).

    .venv/bin/python examples/crew.py

With `MarketCrew(..., use_market=True, market=DaprMarket(<sidecar HTTP port>))` the same task
goes to the market instead (docs/sdk.md, "Crews")."""

from __future__ import annotations

import asyncio

from agora.sdk import Agent, Crew, CrewMember, CrewPattern
from agora.sdk.testing import FunctionModel, final


def answering(text: str) -> FunctionModel:
    """A model that answers `text`, whatever it is asked (the example needs no model vendor)."""
    return FunctionModel(lambda _: final(text))


researcher = Agent(
    "researcher",
    answering("Battery prices fell 20% in 2025; subsidies cover 40%."),
    instructions="Find the facts.",
    skills=["research"],
)
writer = Agent(
    "writer",
    answering("Home batteries pay back within 7 years in Spain."),
    instructions="Write a short note from the research.",
    skills=["writing"],
)
crew = Crew(
    [CrewMember.of(researcher, "researcher"), CrewMember.of(writer, "writer")],
    session_id="example-crew",
    pattern=CrewPattern.SEQUENTIAL,
)


async def main() -> None:
    result = await crew.run("Write a note on home solar batteries in Spain")
    for name, output in result.outputs.items():
        print(f"{name}: {output}")
    print(f"{len(result.runs)} runs, ${result.total_cost_usd:.4f}, {result.duration_seconds:.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
