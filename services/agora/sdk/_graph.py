"""Graphs of agent steps: nodes are async functions from the run's state to its next state
(a typed model: `GraphState` or a subclass of it), edges say which node comes next, and a
condition can pick the next node from the state.

    graph = (
        Graph("review", ReportState)
        .add_node("draft", draft, entry=True)
        .add_node("review", human_node("Please review the draft."))
        .add_conditional_edge("draft", needs_review, {"yes": "review", "no": None})
        .compile()
    )
    run = await graph.run(ReportState(input="Solar prices in Spain"))

`compile` checks the shape (`agora.core.graphs.validate_graph`: unknown or unreachable nodes,
a cycle without a condition, each named) and raises `InvalidGraph`. `run` runs the nodes in
this process; a node that sets the status WAITING_FOR_HUMAN (`human_node`) stops the run there,
and `resume` goes on after it with the person's answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

from agora.core.debate.config import DebateConfig
from agora.core.debate.record import DebateCompleted
from agora.core.debate.request import DebateRequest
from agora.core.errors import AgoraError
from agora.core.graphs import (
    DEFAULT_MAX_STEPS,
    ConditionalEdge,
    GraphRunFailed,
    GraphShape,
    has_condition,
    next_node,
    validate_graph,
)
from agora.core.limits import MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.market import TaskSpec
from agora.core.planning import PlanningConfig
from agora.core.plans.record import PlanCompleted
from agora.core.plans.request import PlanRequest
from agora.llm import ChatMessage, ModelClient
from agora.sdk._runner import parse_step, react_protocol, tool_result_message
from agora.sdk._tools import ToolCall, ToolExecutor

__all__ = [
    "CompiledGraph",
    "Graph",
    "GraphRun",
    "GraphState",
    "GraphStatus",
    "MarketNode",
    "MarketResult",
    "asked_for_a_tool",
    "human_node",
    "llm_node",
    "market_node",
]


class GraphStatus(StrEnum):
    RUNNING = "RUNNING"
    WAITING_FOR_HUMAN = "WAITING_FOR_HUMAN"
    """A node asked a person; the run goes on after it with the person's answer."""
    COMPLETED = "COMPLETED"


class MarketResult(BaseModel):
    """How a market node's task ended: who won it, what they reported, what it cost."""

    task_id: str
    succeeded: bool
    status: str
    """The task's status on the board (COMPLETED, PARTIAL, FAILED, REJECTED), or TIMED_OUT."""
    agent_id: str | None = None
    summary: str = ""
    cost_usd: float = 0.0


class GraphState(BaseModel):
    """What a graph's nodes read and write. Subclass it to add the fields your nodes share."""

    input: str = Field(default="", max_length=MAX_TEXT_CHARS)
    messages: list[ChatMessage] = Field(default_factory=list)
    output: str = ""
    status: GraphStatus = GraphStatus.RUNNING
    question: str = Field(default="", max_length=MAX_TEXT_CHARS)
    """What the node waiting for a person asks (`human_node`)."""
    market: dict[str, MarketResult] = Field(default_factory=dict)
    """Each market node's result, by node name."""
    plans: dict[str, PlanCompleted] = Field(default_factory=dict)
    """Each planning node's plan as it ended, by node name."""
    debates: dict[str, DebateCompleted] = Field(default_factory=dict)
    """Each debate node's debate as it ended, by node name."""
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    """The confidence the last model answer stated (`llm_node`), if it stated one."""
    uncertain: bool = False
    """Set by an `uncertainty_guard_node`: the last answer is not sure enough to act on."""
    input_tokens: int = 0
    output_tokens: int = 0


S = TypeVar("S", bound=GraphState)
NodeHandler = Callable[[S], Awaitable[S]]
Condition = Callable[[S], str]


class GraphRun(BaseModel, Generic[S]):
    """A run of a graph so far: its state, the nodes it ran in order, and where it waits for a
    person (None unless its status is WAITING_FOR_HUMAN)."""

    graph_id: str
    state: S
    path: list[str]
    waiting_at: str | None = None

    @property
    def status(self) -> GraphStatus:
        return self.state.status


class Graph(Generic[S]):
    """The builder: add nodes and edges, then `compile`."""

    def __init__(self, graph_id: str, state_type: type[S], *, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        self.graph_id = graph_id
        self.state_type = state_type
        self.max_steps = max_steps
        self._handlers: dict[str, NodeHandler[S]] = {}
        self._names: list[str] = []
        self._entries: list[str] = []
        self._edges: list[tuple[str, str | None]] = []
        self._conditions: list[tuple[str, Condition[S], dict[str, str | None]]] = []

    def add_node(self, name: str, handler: NodeHandler[S], *, entry: bool = False) -> Graph[S]:
        self._names.append(name)
        self._handlers.setdefault(name, handler)
        if entry:
            self._entries.append(name)
        return self

    def add_edge(self, source: str, target: str | None) -> Graph[S]:
        """After `source`, run `target` (None: the run ends)."""
        self._edges.append((source, target))
        return self

    def add_conditional_edge(
        self, source: str, condition: Condition[S], routes: Mapping[str, str | None]
    ) -> Graph[S]:
        """After `source`, `condition(state)` names a route; `routes` maps it to the next node
        (None: the run ends)."""
        self._conditions.append((source, condition, dict(routes)))
        return self

    def compile(self) -> CompiledGraph[S]:
        """The graph, checked: `InvalidGraph` names every problem of its shape."""
        shape = GraphShape(
            graph_id=self.graph_id,
            nodes=self._names,
            entries=self._entries,
            edges=self._edges,
            conditional=[(source, ConditionalEdge(routes=routes)) for source, _, routes in self._conditions],
        )
        validate_graph(shape)
        conditions = {source: condition for source, condition, _ in self._conditions}
        return CompiledGraph(shape, self.state_type, dict(self._handlers), conditions, self.max_steps)


class CompiledGraph(Generic[S]):
    def __init__(
        self,
        shape: GraphShape,
        state_type: type[S],
        handlers: Mapping[str, NodeHandler[S]],
        conditions: Mapping[str, Condition[S]],
        max_steps: int,
    ) -> None:
        self.shape = shape
        self.state_type = state_type
        self._handlers = handlers
        self._conditions = conditions
        self.max_steps = max_steps

    @property
    def graph_id(self) -> str:
        return self.shape.graph_id

    def handler(self, node: str) -> NodeHandler[S]:
        return self._handlers[node]

    async def run_node(self, node: str, state: S) -> S:
        """One node on `state`; whatever it raises is `GraphRunFailed` naming the node (an
        Agora error keeps its code in the message)."""
        try:
            updated = await self._handlers[node](state)
        except AgoraError as exc:
            raise _node_failed(node, f"{exc.code}: {exc.message}") from exc
        except Exception as exc:
            raise _node_failed(node, f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(updated, self.state_type):
            raise _node_failed(node, f"it returned {type(updated).__name__}, not {self.state_type.__name__}")
        return updated

    def after(self, node: str, state: S) -> str | None:
        """The node to run after `node` (None: the run ends)."""
        route = None
        if has_condition(self.shape, node):
            try:
                route = self._conditions[node](state)
            except Exception as exc:
                message = f"the condition of node {node!r} failed: {type(exc).__name__}: {exc}"
                raise GraphRunFailed(message[:MAX_NOTE_CHARS]) from exc
        return next_node(self.shape, node, route)

    async def run(self, state: S) -> GraphRun[S]:
        """Run the graph from its entry on `state`, in this process."""
        return await self._run_from(self.shape.entry, state, [])

    async def resume(self, run: GraphRun[S], answer: str) -> GraphRun[S]:
        """Go on with a run that waits for a person: the answer is the next user message and
        the run continues after the node that asked."""
        if run.waiting_at is None or run.status is not GraphStatus.WAITING_FOR_HUMAN:
            raise GraphRunFailed(f"the run of graph {self.graph_id} does not wait for a person")
        state = run.state.model_copy(
            update={
                "status": GraphStatus.RUNNING,
                "question": "",
                "messages": [*run.state.messages, ChatMessage(role="user", content=answer)],
            }
        )
        following = self.after(run.waiting_at, state)
        if following is None:
            return GraphRun(graph_id=self.graph_id, state=_completed(state), path=run.path)
        return await self._run_from(following, state, run.path)

    async def _run_from(self, node: str, state: S, path: list[str]) -> GraphRun[S]:
        current: str | None = node
        path = list(path)
        while current is not None:
            if len(path) >= self.max_steps:
                raise GraphRunFailed(
                    f"the run of graph {self.graph_id} reached its limit of {self.max_steps} steps"
                )
            state = await self.run_node(current, state)
            path.append(current)
            if state.status is GraphStatus.WAITING_FOR_HUMAN:
                return GraphRun(graph_id=self.graph_id, state=state, path=path, waiting_at=current)
            current = self.after(current, state)
        return GraphRun(graph_id=self.graph_id, state=_completed(state), path=path)


def _node_failed(node: str, why: str) -> GraphRunFailed:
    return GraphRunFailed(f"node {node!r} failed: {why}"[:MAX_NOTE_CHARS], node=node)


def _completed(state: S) -> S:
    return state.model_copy(update={"status": GraphStatus.COMPLETED})


def human_node(prompt: str = "Waiting for human input...") -> NodeHandler[S]:
    """A node that asks a person: it sets the status WAITING_FOR_HUMAN and adds the prompt as a
    system message; the run stops there until `resume`."""

    async def ask(state: S) -> S:
        return state.model_copy(
            update={
                "status": GraphStatus.WAITING_FOR_HUMAN,
                "question": prompt,
                "messages": [*state.messages, ChatMessage(role="system", content=prompt)],
            }
        )

    return ask


DEFAULT_MARKET_TIMEOUT_SECONDS = 900
DEFAULT_MIN_SUCCESS_THRESHOLD: float = TaskSpec.model_fields["min_success_threshold"].default
"""A market node's threshold unless it says otherwise: `TaskSpec`'s (the moral-hazard guard on)."""


@dataclass(frozen=True)
class MarketNode:
    """A node that posts a task to the market and waits for its outcome (`market_node`)."""

    required_skills: tuple[str, ...]
    preferred_skills: tuple[str, ...] = ()
    budget_usd: float | None = None
    min_success_threshold: float = DEFAULT_MIN_SUCCESS_THRESHOLD
    timeout_seconds: int = DEFAULT_MARKET_TIMEOUT_SECONDS
    describe: Callable[[Any], str] | None = None
    """What the task asks, from the run's state (of the graph's state type)."""

    def task(self, state: GraphState, task_id: str) -> TaskSpec:
        """The task this node posts for `state`: what `describe` says, else the state's input."""
        description = self.describe(state) if self.describe is not None else state.input
        return TaskSpec(
            task_id=task_id,
            description=description[:MAX_TEXT_CHARS] or "(no description)",
            required_skills=list(self.required_skills),
            preferred_skills=list(self.preferred_skills),
            budget_usd=self.budget_usd,
            min_success_threshold=self.min_success_threshold,
            allow_partial=True,
        )

    def ended(self, node: str, state: S, result: MarketResult) -> S:
        """The state once the task ended: its result under the node's name, its summary as the
        output (the next node, or a condition on `market[node].succeeded`, takes it from there)."""
        return state.model_copy(update={"market": {**state.market, node: result}, "output": result.summary})

    async def __call__(self, state: S) -> S:
        raise GraphRunFailed(
            "a market node waits for the market: it runs in a durable graph run (an agent app)"
        )


def market_node(
    required_skills: Sequence[str],
    *,
    preferred_skills: Sequence[str] = (),
    budget_usd: float | None = None,
    min_success_threshold: float = DEFAULT_MIN_SUCCESS_THRESHOLD,
    timeout_seconds: int = DEFAULT_MARKET_TIMEOUT_SECONDS,
    describe: Callable[[Any], str] | None = None,
) -> MarketNode:
    """A node that posts a task (`describe(state)`, else the state's input) needing
    `required_skills` to the market, waits for the winner's outcome (at most `timeout_seconds`),
    and records it in `state.market[<node>]` and `state.output`."""
    if not required_skills:
        raise ValueError("a market node needs at least one required skill")
    return MarketNode(
        tuple(required_skills),
        tuple(preferred_skills),
        budget_usd,
        min_success_threshold,
        timeout_seconds,
        describe,
    )


@dataclass(frozen=True)
class PlanningNode:
    """A node that runs a plan through the planner and waits for it to end (`planning_node`)."""

    skills: tuple[str, ...]
    config: PlanningConfig | None = None
    escalate: bool = True
    min_success_threshold: float = DEFAULT_MIN_SUCCESS_THRESHOLD
    describe: Callable[[Any], str] | None = None

    def request(self, state: GraphState, plan_id: str) -> PlanRequest:
        task = self.describe(state) if self.describe is not None else state.input
        return PlanRequest(
            plan_id=plan_id,
            task=task[:MAX_TEXT_CHARS] or "(no task)",
            skills=list(self.skills),
            config=self.config or PlanningConfig(),
            escalate=self.escalate,
            min_success_threshold=self.min_success_threshold,
        )

    def ended(self, node: str, state: S, completed: PlanCompleted) -> S:
        """The plan's end under the node's name; its final output as the state's output."""
        output = completed.result.final_output or completed.reason
        return state.model_copy(update={"plans": {**state.plans, node: completed}, "output": output})

    async def __call__(self, state: S) -> S:
        raise GraphRunFailed("a planning node waits for the planner: it runs in a durable graph run")


def planning_node(
    skills: Sequence[str],
    *,
    config: PlanningConfig | None = None,
    escalate: bool = True,
    min_success_threshold: float = DEFAULT_MIN_SUCCESS_THRESHOLD,
    describe: Callable[[Any], str] | None = None,
) -> PlanningNode:
    """A node that asks the planner to plan and carry out `describe(state)` (else the state's
    input) with agents of `skills`, waits until the plan ends (a stop for a person included),
    and records it in `state.plans[<node>]`, its final output in `state.output`."""
    if not skills:
        raise ValueError("a planning node needs at least one skill")
    return PlanningNode(tuple(skills), config, escalate, min_success_threshold, describe)


@dataclass(frozen=True)
class DebateNode:
    """A node that asks the debate service a question and waits for its answer (`debate_node`)."""

    config: DebateConfig
    describe: Callable[[Any], str] | None = None

    def request(self, state: GraphState, debate_id: str) -> DebateRequest:
        question = self.describe(state) if self.describe is not None else state.input
        return DebateRequest(
            debate_id=debate_id, question=question[:MAX_TEXT_CHARS] or "(no question)", config=self.config
        )

    def ended(self, node: str, state: S, completed: DebateCompleted) -> S:
        """The debate's end under the node's name; its final answer as the state's output."""
        output = completed.final_answer or completed.reason
        return state.model_copy(update={"debates": {**state.debates, node: completed}, "output": output})

    async def __call__(self, state: S) -> S:
        raise GraphRunFailed("a debate node waits for the debate service: it runs in a durable graph run")


def debate_node(config: DebateConfig, *, describe: Callable[[Any], str] | None = None) -> DebateNode:
    """A node that asks the debate service (its debaters and rules in `config`)
    `describe(state)` (else the state's input), waits
    until the debate ends (a stop for a person included), and records it in
    `state.debates[<node>]`, its final answer in `state.output`."""
    return DebateNode(config, describe)


def llm_node(
    model: ModelClient, *, system_prompt: str = "", tools: ToolExecutor | None = None
) -> NodeHandler[S]:
    """A node that asks the model, with the conversation so far (the state's input as the first
    user message when there is none), and adds its answer as an assistant message and the
    output. With `tools`, the model is told the step protocol and the tools (the agent loop's),
    and a `tool_node` after it runs the tool the answer asks for; an answer's stated confidence
    is kept in `state.confidence`. Tokens add up in `input_tokens` / `output_tokens`."""

    async def ask(state: S) -> S:
        conversation = list(state.messages) or [ChatMessage(role="user", content=state.input)]
        prompt = system_prompt
        if tools is not None:
            prompt = f"{system_prompt}\n\n{react_protocol(tools)}".strip()
        messages = [ChatMessage(role="system", content=prompt), *conversation] if prompt else conversation
        completion = await model.complete(messages)
        step = parse_step(completion.text)
        answer = ChatMessage(role="assistant", content=completion.text)
        return state.model_copy(
            update={
                "messages": [*conversation, answer],
                "output": step.answer if step is not None and step.action == "final" else completion.text,
                "confidence": step.confidence if step is not None else None,
                "status": GraphStatus.RUNNING,
                "input_tokens": state.input_tokens + completion.usage.prompt_tokens,
                "output_tokens": state.output_tokens + completion.usage.completion_tokens,
            }
        )

    return ask


def tool_node(executor: ToolExecutor) -> NodeHandler[S]:
    """A node that runs the tool the last assistant message asks for (the step protocol:
    `{"action": "tool", "tool": ..., "arguments": ...}`) and adds its result as the next user
    message, as the agent loop does; a tool's error is its result, for the model to read. With
    no tool asked for, it passes the state on unchanged."""

    async def run(state: S) -> S:
        last = next((m for m in reversed(state.messages) if m.role == "assistant"), None)
        step = parse_step(last.content) if last is not None else None
        if step is None or step.action != "tool":
            return state
        result = await executor.execute(ToolCall(name=step.tool, arguments=step.arguments))
        return state.model_copy(
            update={"messages": [*state.messages, tool_result_message(result)], "output": result.for_model()}
        )

    return run


def asked_for_a_tool(state: GraphState) -> str:
    """A condition for after an `llm_node`: "tool" when its answer asks for a tool, else "answer"."""
    last = next((m for m in reversed(state.messages) if m.role == "assistant"), None)
    step = parse_step(last.content) if last is not None else None
    return "tool" if step is not None and step.action == "tool" else "answer"


def uncertainty_guard_node(threshold: float = 0.5) -> NodeHandler[S]:
    """A checkpoint after a model's answer: `state.uncertain` is set when the confidence it
    stated (`state.confidence`, from an `llm_node`) is below `threshold`, or when it stated none
    (not knowing counts as unsure). Route on it with `guard_route` (e.g. to a `human_node`)."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"a confidence threshold is between 0 and 1, not {threshold}")

    async def guard(state: S) -> S:
        unsure = state.confidence is None or state.confidence < threshold
        return state.model_copy(update={"uncertain": unsure})

    return guard


def guard_route(state: GraphState) -> str:
    """The condition after an `uncertainty_guard_node`: "escalate" when unsure, else "continue"."""
    return "escalate" if state.uncertain else "continue"
