"""Two pairs of agents for sums, each run on the model the environment names (the local model
server in `bench/checked_sums.py`): in each pair one agent has an `add` tool and one has none.
One pair takes the tasks a checker app checks (`sums-checked`), the other the same tasks with no
check (`sums-unchecked`). Both agents of a pair bid alike (the SDK's default estimate at the
same price and step allowance), so only what the market learns of their outcomes tells them
apart."""

from __future__ import annotations

from agora.sdk import Agent, tool

ARMS = ("checked", "unchecked")
PRICE_PER_STEP = 0.001
MAX_STEPS = 4
"""A run may take up to 4 model calls: the tool's call, its result read, and room to retry."""


def skill(arm: str) -> str:
    return f"sums-{arm}"


def with_tool(arm: str) -> str:
    return f"with-add-{arm}"


def without_tool(arm: str) -> str:
    return f"no-add-{arm}"


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def pair(arm: str) -> list[Agent]:
    return [
        Agent(
            with_tool(arm),
            instructions=(
                "You add numbers. Call the add tool with the two numbers of the question, "
                "then answer with its result."
            ),
            tools=[add],
            skills=[skill(arm)],
            price_per_step=PRICE_PER_STEP,
            max_steps=MAX_STEPS,
        ),
        Agent(
            without_tool(arm),
            instructions="You add numbers. Answer with the sum of the two numbers of the question.",
            skills=[skill(arm)],
            price_per_step=PRICE_PER_STEP,
            max_steps=MAX_STEPS,
        ),
    ]


agents = [agent for arm in ARMS for agent in pair(arm)]
