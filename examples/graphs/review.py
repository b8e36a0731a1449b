"""A graph with a branch, a tool, the market and a person: a note on a topic is counted with a
tool; a long one goes to the market for a researcher's summary and then to a person, who
decides whether it is published (a short one is published at once).

    agora-agent run examples/graphs/review.py        # beside `make run` (redis profile)
    curl -X PUT <its sidecar>/v1.0/invoke/agents/method/v1/graphs/review/runs/r-1 \\
         -d '{"input": "home solar batteries in Spain: prices, payback, subsidies"}'

`make run` runs it in its demo: the run stops at the `approve` node, an escalation decided in
the console or with `agora escalations resume` like any other.
"""

from __future__ import annotations

from agora.sdk import Graph, GraphState, human_node, market_node, tool
from agora.sdk.tools import ToolCall, ToolExecutor


@tool
def count_words(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


TOOLS = ToolExecutor([count_words])
LONG = 5
"""More words than this, and the note goes through the market and a person."""


class Note(GraphState):
    words: int = 0


async def measure(state: Note) -> Note:
    result = await TOOLS.execute(ToolCall(name="count_words", arguments={"text": state.input}))
    return state.model_copy(update={"words": int(result.output or 0)})


def length(state: Note) -> str:
    return "long" if state.words > LONG else "short"


async def publish(state: Note) -> Note:
    research = state.market.get("research")
    found = f" Research by {research.agent_id}: {research.summary}" if research else ""
    decided = state.messages[-1].content.splitlines()[0] if state.messages else "no review needed"
    return state.model_copy(
        update={"output": f"Note on {state.input} ({state.words} words).{found} [{decided}]"}
    )


review = (
    Graph("review", Note)
    .add_node("measure", measure, entry=True)
    .add_node(
        "research",
        market_node(
            ["web_search"],
            preferred_skills=["summarize"],
            describe=lambda state: f"Find sources on {state.input}",
            # A new agent's calibrated success starts low: the market's default bar (0.5) would
            # turn a fresh system's first research task away.
            min_success_threshold=0.2,
        ),
    )
    .add_node("approve", human_node("Publish this note?"))
    .add_node("publish", publish)
    .add_conditional_edge("measure", length, {"long": "research", "short": "publish"})
    .add_edge("research", "approve")
    .add_edge("approve", "publish")
    .compile()
)

graphs = [review]
