"""Graphs: their shape checked before they run (every problem named), routing by plain edges and
conditions, a person's stop and its resumption, a loop through a condition bounded by the step
limit, and a node with a model (the offline one) deciding the route."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from agora.core.debate.config import DebateConfig, DebaterConfig
from agora.core.graphs import GraphShape, InvalidGraph, validate_graph
from agora.llm import ChatMessage, OfflineModelClient
from agora.sdk import (
    Graph,
    GraphRunFailed,
    GraphState,
    debate_node,
    human_node,
    llm_node,
    market_node,
    planning_node,
    tool,
    tool_node,
)
from agora.sdk.graphs import GraphStatus, MarketResult, asked_for_a_tool, guard_route, uncertainty_guard_node
from agora.sdk.runner import AgentDefinition, AgentRunner
from agora.sdk.tools import ToolExecutor


class Draft(GraphState):
    """A typed state: the draft and how many times it was revised."""

    draft: str = ""
    revisions: int = 0


async def write(state: Draft) -> Draft:
    return state.model_copy(update={"draft": f"draft of {state.input}", "revisions": state.revisions + 1})


async def publish(state: Draft) -> Draft:
    return state.model_copy(update={"output": f"published: {state.draft} (v{state.revisions})"})


def good_enough(state: Draft) -> str:
    return "yes" if state.revisions >= 3 else "no"


def problems_of(shape: GraphShape) -> list[str]:
    with pytest.raises(InvalidGraph) as invalid:
        validate_graph(shape)
    assert invalid.value.code == "INVALID_GRAPH"
    return invalid.value.problems


def test_every_problem_of_a_shape_is_named_at_once() -> None:
    problems = problems_of(
        GraphShape(
            graph_id="g",
            nodes=["a", "b", "c", "lonely", "a"],
            entries=[],
            edges=[("a", "b"), ("b", "ghost"), ("nowhere", "a"), ("c", "a"), ("c", "b")],
        )
    )
    assert "node 'a' is added twice" in problems
    assert "it has no entry node (mark one with entry=True)" in problems
    assert "edge b → ghost goes to unknown node 'ghost'" in problems
    assert "edge nowhere → a leaves unknown node 'nowhere'" in problems
    assert "node 'c' has 2 ways out (at most one: an edge or a condition)" in problems


def test_nodes_the_entry_never_reaches_and_a_cycle_without_a_condition_are_refused() -> None:
    problems = problems_of(
        GraphShape(graph_id="g", nodes=["a", "b", "c", "d"], entries=["a"], edges=[("a", "b"), ("b", "a")])
    )
    assert problems == [
        "the entry 'a' never reaches c, d",
        "the cycle a → b → a has no condition: a run would never leave it",
    ]


def test_the_builder_refuses_a_graph_whose_condition_routes_to_an_unknown_node() -> None:
    graph = (
        Graph("g", Draft)
        .add_node("write", write, entry=True)
        .add_node("check", passes)
        .add_edge("write", "check")
        .add_conditional_edge("check", good_enough, {"yes": "publish", "no": "write"})
    )
    with pytest.raises(InvalidGraph) as invalid:
        graph.compile()
    assert invalid.value.problems == ["route 'yes' of check's condition goes to unknown node 'publish'"]


async def passes(state: Draft) -> Draft:
    """A node that decides nothing itself: the condition on its way out routes the run."""
    return state


def review_loop() -> Graph[Draft]:
    return (
        Graph("review", Draft)
        .add_node("write", write, entry=True)
        .add_node("check", passes)
        .add_node("publish", publish)
        .add_edge("write", "check")
        .add_conditional_edge("check", good_enough, {"yes": "publish", "no": "write"})
    )


async def test_a_condition_routes_the_run_round_a_loop_until_it_says_otherwise() -> None:
    run = await review_loop().compile().run(Draft(input="solar prices"))

    assert run.status is GraphStatus.COMPLETED and run.waiting_at is None
    assert run.path == ["write", "check"] * 3 + ["publish"]
    assert run.state.output == "published: draft of solar prices (v3)"
    assert isinstance(run.state, Draft)


async def test_a_loop_that_never_ends_stops_at_the_step_limit() -> None:
    graph = review_loop()
    graph.max_steps = 4
    with pytest.raises(GraphRunFailed, match="reached its limit of 4 steps"):
        await graph.compile().run(Draft(input="x"))


async def test_a_condition_answering_a_route_it_lacks_fails_the_run_naming_the_node() -> None:
    graph = (
        Graph("g", Draft)
        .add_node("check", passes, entry=True)
        .add_node("publish", publish)
        .add_conditional_edge("check", lambda _: "maybe", {"yes": "publish", "no": None})
        .compile()
    )
    with pytest.raises(
        GraphRunFailed, match="the condition of node 'check' answered 'maybe'; its routes are no, yes"
    ):
        await graph.run(Draft())


async def test_a_node_that_raises_fails_the_run_naming_it() -> None:
    async def broken(state: Draft) -> Draft:
        raise ValueError("no ink")

    graph = Graph("g", Draft).add_node("write", broken, entry=True).compile()
    with pytest.raises(GraphRunFailed) as failed:
        await graph.run(Draft())
    assert failed.value.message == "node 'write' failed: ValueError: no ink"
    assert failed.value.details == {"node": "write"}


async def test_a_human_node_stops_the_run_and_the_answer_resumes_it_after_that_node() -> None:
    graph = (
        Graph("approve", Draft)
        .add_node("write", write, entry=True)
        .add_node("approve", human_node("Publish this draft?"))
        .add_node("publish", publish)
        .add_edge("write", "approve")
        .add_edge("approve", "publish")
        .compile()
    )

    waiting = await graph.run(Draft(input="wind"))

    assert waiting.status is GraphStatus.WAITING_FOR_HUMAN and waiting.waiting_at == "approve"
    assert waiting.path == ["write", "approve"] and waiting.state.question == "Publish this draft?"
    assert waiting.state.output == ""

    done = await graph.resume(waiting, "Yes, publish it")

    assert done.status is GraphStatus.COMPLETED and done.path == ["write", "approve", "publish"]
    assert done.state.output == "published: draft of wind (v1)"
    assert done.state.messages[-1] == ChatMessage(role="user", content="Yes, publish it")
    with pytest.raises(GraphRunFailed, match="does not wait for a person"):
        await graph.resume(done, "again")


async def test_a_model_s_answer_routes_the_run() -> None:
    """A node asks an agent (the offline model) to classify the input; the condition routes by
    its answer."""

    def classify(messages: Sequence[ChatMessage]) -> str:
        kind = "billing" if "invoice" in messages[-1].content else "other"
        return json.dumps({"thought": "t", "action": "final", "answer": kind, "confidence": 0.9})

    runner = AgentRunner(OfflineModelClient(overrides=classify))

    async def triage(state: GraphState) -> GraphState:
        result = await runner.run(AgentDefinition(name="triage"), state.input, session_id="g-1")
        return state.model_copy(update={"output": result.output})

    async def billing(state: GraphState) -> GraphState:
        return state.model_copy(update={"output": "sent to billing"})

    def route(state: GraphState) -> str:
        return state.output

    graph = (
        Graph("support", GraphState)
        .add_node("triage", triage, entry=True)
        .add_node("billing", billing)
        .add_conditional_edge("triage", route, {"billing": "billing", "other": None})
        .compile()
    )

    billed = await graph.run(GraphState(input="My invoice is wrong"))
    assert billed.path == ["triage", "billing"] and billed.state.output == "sent to billing"
    other = await graph.run(GraphState(input="Hello"))
    assert other.path == ["triage"] and other.state.output == "other"


async def test_a_market_node_describes_its_task_from_the_state_and_needs_a_durable_run() -> None:
    node = market_node(["summarize"], budget_usd=0.5, describe=lambda state: f"Summarize: {state.draft}")
    task = node.task(Draft(input="ignored", draft="the draft"), "graph.r-1.1")
    assert (task.task_id, task.description) == ("graph.r-1.1", "Summarize: the draft")
    assert task.required_skills == ["summarize"]
    assert task.budget_usd == 0.5 and task.min_success_threshold == 0.5 and task.allow_partial is True
    assert market_node(["summarize"]).task(Draft(input="the input"), "t").description == "the input"

    result = MarketResult(task_id="t", succeeded=True, status="COMPLETED", agent_id="a", summary="done")
    ended = node.ended("ask", Draft(), result)
    assert ended.market == {"ask": result} and ended.output == "done"

    graph = Graph("g", Draft).add_node("ask", node, entry=True).compile()
    with pytest.raises(GraphRunFailed, match="it runs in a durable graph run"):
        await graph.run(Draft())
    with pytest.raises(ValueError, match="at least one required skill"):
        market_node([])


async def test_planning_and_debate_nodes_ask_from_the_state_and_need_a_durable_run() -> None:
    planning = planning_node(["web_search", "write"], min_success_threshold=0.2)
    request = planning.request(Draft(input="A report on wind"), "graph.r-1.1")
    assert (request.plan_id, request.task) == ("graph.r-1.1", "A report on wind")
    assert request.skills == ["web_search", "write"]
    assert request.min_success_threshold == 0.2 and request.escalate is True

    debaters = [DebaterConfig(debater_id="d0"), DebaterConfig(debater_id="d1")]
    debating = debate_node(DebateConfig(debaters=debaters), describe=lambda state: f"Publish {state.draft}?")
    asked = debating.request(Draft(draft="the note"), "graph.r-1.2")
    assert (asked.debate_id, asked.question) == ("graph.r-1.2", "Publish the note?")
    assert asked.config.debaters == debaters

    for node in (planning, debating):
        graph = Graph("g", Draft).add_node("n", node, entry=True).compile()
        with pytest.raises(GraphRunFailed, match="it runs in a durable graph run"):
            await graph.run(Draft(input="x"))
    with pytest.raises(ValueError, match="at least one skill"):
        planning_node([])


async def test_an_llm_node_and_a_tool_node_loop_until_the_model_answers() -> None:
    """The agent loop as a graph: think (the offline model, scripted), run the tool it asks for,
    think again; the condition leaves the loop once the answer is final."""
    turns = iter([
        {"thought": "add them", "action": "tool", "tool": "add", "arguments": {"a": 2, "b": 3}},
        {"thought": "done", "action": "final", "answer": "5", "confidence": 0.8},
    ])  # fmt: skip

    def model(_: Sequence[ChatMessage]) -> str:
        return json.dumps(next(turns))

    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    tools = ToolExecutor([add])
    offline = OfflineModelClient(overrides=model)
    graph = (
        Graph("loop", GraphState)
        .add_node("think", llm_node(offline, system_prompt="You add.", tools=tools), entry=True)
        .add_node("act", tool_node(tools))
        .add_conditional_edge("think", asked_for_a_tool, {"tool": "act", "answer": None})
        .add_edge("act", "think")
        .compile()
    )

    run = await graph.run(GraphState(input="What is 2 + 3?"))

    assert run.path == ["think", "act", "think"] and run.state.output == "5" and run.state.confidence == 0.8
    assert [m.role for m in run.state.messages] == ["user", "assistant", "user", "assistant"]
    assert run.state.messages[2].content == "Result of tool add: 5.0"
    assert run.state.input_tokens > 0 and run.state.output_tokens > 0


async def test_an_uncertainty_guard_sends_an_unsure_answer_to_a_person() -> None:
    def answering_with(confidence: float) -> OfflineModelClient:
        answer = {"thought": "t", "action": "final", "answer": "drop the table", "confidence": confidence}
        return OfflineModelClient(overrides=lambda _: json.dumps(answer))

    def guarded(model: OfflineModelClient) -> Graph[GraphState]:
        return (
            Graph("safe", GraphState)
            .add_node("llm", llm_node(model), entry=True)
            .add_node("guard", uncertainty_guard_node(threshold=0.5))
            .add_node("review", human_node("Low confidence: please review."))
            .add_edge("llm", "guard")
            .add_conditional_edge("guard", guard_route, {"escalate": "review", "continue": None})
        )

    sure = await guarded(answering_with(0.9)).compile().run(GraphState(input="Migrate"))
    assert sure.path == ["llm", "guard"] and not sure.state.uncertain and sure.status is GraphStatus.COMPLETED
    unsure = await guarded(answering_with(0.2)).compile().run(GraphState(input="Migrate"))
    assert unsure.path == ["llm", "guard", "review"] and unsure.state.uncertain
    assert (
        unsure.status is GraphStatus.WAITING_FOR_HUMAN
        and unsure.state.question == "Low confidence: please review."
    )
    with pytest.raises(ValueError, match="between 0 and 1"):
        uncertainty_guard_node(threshold=1.5)
