"""A graph for the graph-run tests, served by an agent app: `approval` writes a draft, asks a
person whether to publish it, then publishes it with the person's answer. Each run of the
`write` node is appended to the file named by GRAPH_CALLS, so a test can count how often a node
really ran (a node whose step was recorded must not run again after a crash)."""

from __future__ import annotations

import os
from pathlib import Path

from agora.sdk import Graph, GraphState, human_node


class Draft(GraphState):
    draft: str = ""


async def write(state: Draft) -> Draft:
    calls = os.environ.get("GRAPH_CALLS")
    if calls:
        with Path(calls).open("a") as log:
            log.write(f"write {state.input}\n")
    return state.model_copy(update={"draft": f"A short note on {state.input}."})


async def publish(state: Draft) -> Draft:
    answer = state.messages[-1].content if state.messages else ""
    return state.model_copy(update={"output": f"published: {state.draft} ({answer})"})


approval = (
    Graph("approval", Draft)
    .add_node("write", write, entry=True)
    .add_node("approve", human_node("Publish this draft?"))
    .add_node("publish", publish)
    .add_edge("write", "approve")
    .add_edge("approve", "publish")
    .compile()
)

graphs = [approval]
