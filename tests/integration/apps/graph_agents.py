"""Graphs for the graph-run tests, served by an agent app: `approval` writes a draft, asks a
person whether to publish it, then publishes it with the person's answer; `research` posts its
input to the market (a task needing `summarize`, which the reference worker's agents have) and
notes how it went; `plan_then_debate` has a plan carried out by the planner, then asks the
debate service a question about it (neither stops for a person: the plan ends FAILED when it
cannot be carried out, the debate ends with its majority). Each run of the
`write` node is appended to the file named by GRAPH_CALLS, so a test can count how often a node
really ran (a node whose step was recorded must not run again after a crash)."""

from __future__ import annotations

import os
from pathlib import Path

from agora.core.debate.config import DebateConfig, DebaterConfig
from agora.sdk import Graph, GraphState, debate_node, human_node, market_node, planning_node


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


def market_went(state: GraphState) -> str:
    return "done" if state.market["ask"].succeeded else "failed"


async def note(state: GraphState) -> GraphState:
    result = state.market["ask"]
    return state.model_copy(update={"output": f"{result.agent_id} answered: {result.summary}"})


async def passes(state: GraphState) -> GraphState:
    """The decision point after the market: the condition on its way out routes the run."""
    return state


research = (
    Graph("research", GraphState)
    .add_node("ask", market_node(["summarize"], min_success_threshold=0.2), entry=True)
    .add_node("check", passes)
    .add_node("note", note)
    .add_edge("ask", "check")
    .add_conditional_edge("check", market_went, {"done": "note", "failed": None})
    .compile()
)

DEBATERS = [
    DebaterConfig(debater_id="d0", role_hint="You answer carefully."),
    DebaterConfig(debater_id="d1", role_hint="You are a skeptical devil's advocate."),
    DebaterConfig(debater_id="d2", role_hint="You look for what the others missed."),
]


def question(state: GraphState) -> str:
    return "Should the report be published today? Options: publish today | wait a week"


plan_then_debate = (
    Graph("plan_then_debate", GraphState)
    .add_node(
        "plan",
        planning_node(
            ["web_search", "summarize", "write", "sql", "python"], min_success_threshold=0.2, escalate=False
        ),
        entry=True,
    )
    .add_node(
        "debate", debate_node(DebateConfig(debaters=DEBATERS, escalate_threshold=0.0), describe=question)
    )
    .add_edge("plan", "debate")
    .compile()
)

graphs = [approval, research, plan_then_debate]
