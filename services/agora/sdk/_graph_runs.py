"""Durable graph runs in an agent app: each run of a graph is a Dapr workflow (`graph_run`,
instance `graph.<run_id>`), each node one recorded activity (`graph.step`), so a run survives a
crash of its app or sidecar and no node whose step was recorded runs again (a node cut off mid-
step runs again: nodes should be safe to repeat).

A node that waits for a person (`human_node`) parks an escalation (`graph.<run_id>.<step>`,
waiting party `graph_run`/<run_id>); the workflow then waits for the decision as an event
(`decision.<escalation_id>`, raised by the app when the escalation service announces the
decision and the escalation's record agrees). `abort` ends the run ABORTED; any other decision
is the person's answer (its text as `resume_message` words it) and the run goes on after the
node. Its record (`graph:run:<run_id>`) is saved after every step, for people and tools to read.

A node that waits for other services (a market task, a plan, a debate: `market_node`,
`planning_node`, `debate_node`) posts its request and notes which run waits for it; the run
waits for the event `<task|plan|debate>.<id>`, raised by the app when it hears the end
(`agora.task.outcome.recorded` / `rejected` / `award_lapsed` of the tasks it posted, `agora.plan.completed`,
`agora.debate.completed`) and the owner's record agrees; meanwhile it reads the owner's record
now and then (every minute at first, at most hourly), so a lost signal costs little.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from dapr.ext.workflow import DaprWorkflowContext
from pydantic import BaseModel, Field, ValidationError

from agora.core import topics
from agora.core.debate.record import FINAL_DEBATE_STATES, DebateCompleted, DebateRecord
from agora.core.errors import Conflict, InvalidArgument, NotFound, describe_field_errors, field_errors
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import EscalationAction, EscalationResponse, resume_message
from agora.core.escalation.record import ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.graphs import GraphRunFailed
from agora.core.limits import MAX_ID_CHARS, MAX_NOTE_CHARS, MAX_TEXT_CHARS, Name, Note
from agora.core.messages import EscalationResolved
from agora.core.plans.record import FINAL_STATES, PlanCompleted, PlanRecord
from agora.core.task_waits import TaskEnded, TaskLink
from agora.llm import ChatMessage
from agora.runtime.clients import DebateClient, PlannerClient, TaskActors
from agora.runtime.patches import GRAPH_DECISION_ON_RECORD
from agora.runtime.pubsub import Publisher, RejectMessage, Subscriptions
from agora.runtime.state import StateRepository
from agora.runtime.task_ends import TaskEndRelay
from agora.runtime.workflows import (
    ActivityRef,
    DecisionOnRecord,
    Decisions,
    FinishedSpan,
    RunFailure,
    Steps,
    WorkflowHost,
    WorkflowRef,
    escalation_answer,
    event_or_check,
    run_trace,
    step_span,
)
from agora.sdk._graph import (
    CompiledGraph,
    DebateNode,
    GraphState,
    GraphStatus,
    MarketNode,
    MarketResult,
    PlanningNode,
)
from agora.sdk._runner import Escalator

log = logging.getLogger(__name__)

__all__ = [
    "GRAPH_RUN",
    "MAX_GRAPH_STATE_CHARS",
    "GraphRunAccepted",
    "GraphRunRecord",
    "GraphRunState",
    "GraphRuns",
    "graph_instance",
]

CHECK_FIRST = timedelta(seconds=60)
"""How soon a run waiting for another service first reads its record (a lost signal); the wait
between readings doubles from there, up to `CHECK_AT_MOST`."""
CHECK_AT_MOST = timedelta(hours=1)
MAX_GRAPH_STATE_CHARS = 262_144
"""The largest state (as JSON) a graph run carries from node to node."""


class GraphRunState(StrEnum):
    RUNNING = "RUNNING"
    WAITING_FOR_HUMAN = "WAITING_FOR_HUMAN"
    COMPLETED = "COMPLETED"
    ABORTED = "ABORTED"
    """A person decided to abort it at a node that asked them."""
    FAILED = "FAILED"
    """A node raised, a condition answered a route its table lacks, or the step limit was hit."""


WaitingNode = MarketNode | PlanningNode | DebateNode
"""The nodes that wait for another service."""


class WaitKind(StrEnum):
    TASK = "task"
    PLAN = "plan"
    DEBATE = "debate"


class Wait(BaseModel):
    """What a node waits for: a market task, a plan or a debate (by id), at most
    `timeout_seconds` (None: until it ends)."""

    kind: WaitKind
    id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    timeout_seconds: int | None = None

    @property
    def event(self) -> str:
        return f"{self.kind}.{self.id}"


class WaitEnded(BaseModel):
    """How what a node waited for ended: the one field of its kind is set."""

    task: TaskEnded | None = None
    plan: PlanCompleted | None = None
    debate: DebateCompleted | None = None


class WaitLink(BaseModel):
    """Which run waits for a plan or a debate (state `graph:wait:<id>`)."""

    wait: Wait
    instance_id: str


ENDED = frozenset({GraphRunState.COMPLETED, GraphRunState.ABORTED, GraphRunState.FAILED})


class GraphRunRecord(BaseModel):
    """A graph run as people see it (`GET /v1/graphs/{graph_id}/runs/{run_id}`)."""

    graph_id: Name
    run_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    status: GraphRunState
    path: list[Name] = Field(description="The nodes run so far, in order.")
    state: str = Field(max_length=MAX_GRAPH_STATE_CHARS, description="The run's state as JSON.")
    waiting_at: Name | None = None
    escalation_id: str | None = None
    wait: Wait | None = None
    """The market task, plan or debate the run waits for (at a market, planning or debate node)."""
    reason: Note = ""
    traceparent: str | None = None
    """The run's span: its trace shows every node."""
    created_at: datetime
    updated_at: datetime
    revision: int = Field(default=0, ge=0)
    """Counted at every save: its event stream's ids (`GET .../runs/{run_id}/events`)."""


class GraphRunAccepted(BaseModel):
    graph_id: Name
    run_id: str
    created: bool
    """False: a run of this id existed (the same request again is a repeat)."""


class GraphRunStart(BaseModel):
    """`graph_run`'s input."""

    graph_id: Name
    run_id: str
    state: str = Field(max_length=MAX_GRAPH_STATE_CHARS)
    created_at: datetime
    traceparent: str | None = None
    """The run's span (`graph.run <graph_id>`, recorded when the run ends): every node's span
    is its child."""
    parent_traceparent: str | None = None


class GraphStep(BaseModel):
    """One node to run on the state (`graph.step`)."""

    start: GraphRunStart
    node: Name | None = None
    """None: the graph's entry."""
    state: str = Field(max_length=MAX_GRAPH_STATE_CHARS)
    path: list[Name]


class GraphStepDone(BaseModel):
    """What a step left: the state, the path, and either the next node (None: the run ended)
    or the escalation the node waits on."""

    state: str = Field(max_length=MAX_GRAPH_STATE_CHARS)
    path: list[Name]
    next: Name | None = None
    escalation_id: str | None = None
    wait: Wait | None = None


class GraphDecision(BaseModel):
    """A person's decision for the node that waits (`graph.decide`)."""

    start: GraphRunStart
    waiting_at: Name
    state: str = Field(max_length=MAX_GRAPH_STATE_CHARS)
    path: list[Name]
    decided: EscalationResolved


class GraphWaitEnded(BaseModel):
    """What a node waited for ended, or the wait timed out (`ended` None) (`graph.wait_ended`)."""

    start: GraphRunStart
    state: str = Field(max_length=MAX_GRAPH_STATE_CHARS)
    path: list[Name]
    wait: Wait
    ended: WaitEnded | None


class GraphWaitCheck(BaseModel):
    """A look at what a node waits for (`graph.check_wait`)."""

    start: GraphRunStart
    state: str = Field(max_length=MAX_GRAPH_STATE_CHARS)
    path: list[Name]
    wait: Wait


class GraphFailed(BaseModel):
    start: GraphRunStart
    failure: RunFailure


# -- the activities and the workflow (their names are recorded in each run's history) -------------

STEP = ActivityRef("graph.step", GraphStep, GraphStepDone)
DECIDE = ActivityRef("graph.decide", GraphDecision, GraphStepDone)
WAIT_ENDED = ActivityRef("graph.wait_ended", GraphWaitEnded, GraphStepDone)
CHECK_WAIT = ActivityRef("graph.check_wait", GraphWaitCheck, WaitEnded | None)
FAIL = ActivityRef("graph.fail", GraphFailed, None)

GRAPH_RUN = WorkflowRef("graph_run", GraphRunStart, None)


def graph_answer(event: EscalationResolved) -> EscalationResolved:
    """A person's decision for a graph run's human node, as the run receives it: an escalation's
    answer only."""
    escalation_answer(event, "a graph run's stop")
    return event


READ_DECISION = ActivityRef("graph.decision-on-record", DecisionOnRecord, EscalationResolved | None)
"""A waiting run's reading of its escalation's record (`Decisions`)."""
GRAPH_DECISIONS = Decisions(
    EscalationResolved, graph_answer, on_record=READ_DECISION, patch=GRAPH_DECISION_ON_RECORD
)


def graph_instance(run_id: str) -> str:
    return f"graph.{run_id}"


def graph_run(ctx: DaprWorkflowContext, start: GraphRunStart) -> Steps[None]:
    """A graph's run: each node one step; a node that asks a person waits for the decision."""
    step = GraphStep(start=start, state=start.state, path=[])
    while True:
        done = yield from STEP.run(ctx, step)
        while done.wait is not None:
            wait = done.wait
            timeout = timedelta(seconds=wait.timeout_seconds) if wait.timeout_seconds is not None else None
            end = yield from event_or_check(
                ctx,
                wait.event,
                CHECK_WAIT,
                GraphWaitCheck(start=start, state=done.state, path=done.path, wait=wait),
                every=CHECK_FIRST,
                at_most=CHECK_AT_MOST,
                timeout=timeout,
            )
            ended = GraphWaitEnded(start=start, state=done.state, path=done.path, wait=wait, ended=end)
            done = yield from WAIT_ENDED.run(ctx, ended)
        while done.escalation_id is not None:
            decided = yield from GRAPH_DECISIONS.wait(ctx, done.escalation_id)
            decision = GraphDecision(
                start=start, waiting_at=done.path[-1], state=done.state, path=done.path, decided=decided
            )
            done = yield from DECIDE.run(ctx, decision)
        if done.next is None:
            return None
        step = GraphStep(start=start, node=done.next, state=done.state, path=done.path)


def graph_run_failed(ctx: DaprWorkflowContext, start: GraphRunStart, failure: RunFailure) -> Steps[None]:
    """A run whose steps broke down ends FAILED with the reason."""
    yield from FAIL.run(ctx, GraphFailed(start=start, failure=failure))


class GraphRuns:
    """An agent app's graphs: their runs' workflow and steps, their records, and the decisions
    that reach the runs waiting for a person."""

    def __init__(
        self,
        graphs: Sequence[CompiledGraph[Any]],
        records: StateRepository[GraphRunRecord],
        escalator: Escalator,
        host: WorkflowHost,
        *,
        publisher: Publisher,
        task_actors: TaskActors,
        task_links: StateRepository[TaskLink],
        wait_links: StateRepository[WaitLink],
        planner: PlannerClient,
        debates: DebateClient,
    ) -> None:
        by_id = {graph.graph_id: graph for graph in graphs}
        if len(by_id) != len(graphs):
            raise ValueError("two graphs of this app have one graph id")
        self.graphs: Mapping[str, CompiledGraph[Any]] = by_id
        self.records = records
        self.escalator = escalator
        self.host = host
        self.publisher = publisher
        self.task_actors = task_actors
        self.tasks = TaskEndRelay(task_links, task_actors, self._task_ended)
        self.wait_links = wait_links
        self.planner = planner
        self.debates = debates

    def subscribe(self, subscriptions: Subscriptions) -> None:
        """Hear how what this app's graphs wait for ends: market tasks, plans, debates (only
        the kinds its graphs have nodes for)."""
        handlers = [graph.handler(node) for graph in self.graphs.values() for node in graph.shape.nodes]
        if any(isinstance(h, MarketNode) for h in handlers):
            self.tasks.subscribe(subscriptions)
        if any(isinstance(h, PlanningNode) for h in handlers):
            subscriptions.subscribe(topics.PLAN_COMPLETED, self.on_plan_completed, idempotent=True)
        if any(isinstance(h, DebateNode) for h in handlers):
            subscriptions.subscribe(topics.DEBATE_COMPLETED, self.on_debate_completed, idempotent=True)

    async def on_plan_completed(self, completed: PlanCompleted) -> None:
        """A plan ended: passed on to the run that waits for it once the planner's record says so."""
        link = await self.wait_links.get(completed.plan_id)
        if link is None:
            return
        ended = await self._plan_end(completed.plan_id)
        if ended is None:
            raise RejectMessage(f"plan {completed.plan_id} has not ended on the planner")
        await self._raise(link.value.instance_id, link.value.wait.event, ended)

    async def on_debate_completed(self, completed: DebateCompleted) -> None:
        """A debate ended: passed on once the debate service's record says so."""
        link = await self.wait_links.get(completed.debate_id)
        if link is None:
            return
        ended = await self._debate_end(completed.debate_id)
        if ended is None:
            raise RejectMessage(f"debate {completed.debate_id} has not ended on the debate service")
        await self._raise(link.value.instance_id, link.value.wait.event, ended)

    async def _task_ended(self, instance_id: str, event: str, ended: TaskEnded) -> None:
        await self._raise(instance_id, event, WaitEnded(task=ended))

    async def _raise(self, instance_id: str, event: str, ended: WaitEnded) -> None:
        await self.host.client.raise_workflow_event(instance_id, event, data=ended.model_dump(mode="json"))

    async def _plan_end(self, plan_id: str) -> WaitEnded | None:
        plan = await self._plan(plan_id)
        return _plan_end(plan) if plan is not None else None

    async def _debate_end(self, debate_id: str) -> WaitEnded | None:
        debate = await self._debate(debate_id)
        return _debate_end(debate) if debate is not None else None

    async def _plan(self, plan_id: str) -> PlanRecord | None:
        try:
            return await self.planner.get(plan_id)
        except NotFound:
            return None

    async def _debate(self, debate_id: str) -> DebateRecord | None:
        try:
            return await self.debates.get(debate_id)
        except NotFound:
            return None

    def register(self) -> None:
        self.host.workflow(GRAPH_RUN, graph_run, on_failure=graph_run_failed)
        self.host.activity(STEP, self.step)
        self.host.activity(DECIDE, self.decide)
        self.host.activity(FAIL, self.fail)
        self.host.activity(WAIT_ENDED, self.wait_ended)
        self.host.activity(CHECK_WAIT, self.check_wait)

    def graph(self, graph_id: str) -> CompiledGraph[Any]:
        found = self.graphs.get(graph_id)
        if found is None:
            raise NotFound(f"no graph {graph_id!r} in this app", graph_id=graph_id)
        return found

    async def start(self, graph_id: str, run_id: str, body: bytes) -> GraphRunAccepted:
        """Start a run on the state `body` (the graph's state as JSON) unless one of this id
        exists; a different graph or state under a used id is refused."""
        graph = self.graph(graph_id)
        if len(body) > MAX_GRAPH_STATE_CHARS:
            raise InvalidArgument(f"a graph's state has at most {MAX_GRAPH_STATE_CHARS} characters of JSON")
        try:
            state = graph.state_type.model_validate_json(body)
        except ValidationError as exc:
            errors = field_errors(exc.errors())
            raise InvalidArgument(
                f"invalid graph state: {describe_field_errors(errors)}", errors=errors
            ) from exc
        traceparent, parent = run_trace(run_id, "graph")
        start = GraphRunStart(
            graph_id=graph_id,
            run_id=run_id,
            state=state.model_dump_json(),
            created_at=datetime.now(UTC),
            traceparent=traceparent,
            parent_traceparent=parent,
        )
        if await self.host.start_once(GRAPH_RUN, graph_instance(run_id), start):
            return GraphRunAccepted(graph_id=graph_id, run_id=run_id, created=True)
        earlier = await self.host.input_of(graph_instance(run_id), GraphRunStart)
        if earlier is not None and (earlier.graph_id, earlier.state) != (start.graph_id, start.state):
            raise Conflict(f"graph run {run_id} already exists with another graph or state; use another id")
        return GraphRunAccepted(graph_id=graph_id, run_id=run_id, created=False)

    async def show(self, graph_id: str, run_id: str) -> GraphRunRecord:
        found = await self.records.get(run_id)
        if found is None or found.value.graph_id != graph_id:
            raise NotFound(f"no run {run_id!r} of graph {graph_id!r}", run_id=run_id)
        return found.value

    async def waits_here(self, run_id: str, escalation_id: str) -> bool:
        """Whether a run of this app waits on that escalation (decisions for others are theirs)."""
        found = await self.records.get(run_id)
        return found is not None and found.value.escalation_id == escalation_id

    # -- the steps ----------------------------------------------------------------------------

    async def step(self, step: GraphStep) -> GraphStepDone:
        start = step.start
        graph = self.graph(start.graph_id)
        node = step.node or graph.shape.entry
        attributes = {"agora.graph_id": start.graph_id, "agora.graph_run": start.run_id,
                      "agora.graph_node": node}  # fmt: skip
        with step_span(f"graph.node {node}", start.traceparent, attributes) as span:
            state = graph.state_type.model_validate_json(step.state)
            path = [*step.path, node]
            handler = graph.handler(node)
            if isinstance(handler, WaitingNode):
                wait = await self._post(start, handler, state, len(path))
                span.set_attribute(f"agora.{wait.kind}_id", wait.id)
                await self._save(start, GraphRunState.RUNNING, state, path, waiting_at=node, wait=wait)
                return GraphStepDone(state=state.model_dump_json(), path=path, wait=wait)
            state = await graph.run_node(node, state)
            if state.status is GraphStatus.WAITING_FOR_HUMAN:
                escalation_id = f"graph.{start.run_id}.{len(path)}"
                await self.escalator.park(escalation_id, _park_request(start, node, state, len(path)))
                waiting = GraphRunState.WAITING_FOR_HUMAN
                await self._save(start, waiting, state, path, waiting_at=node, escalation_id=escalation_id)
                return GraphStepDone(state=state.model_dump_json(), path=path, escalation_id=escalation_id)
            return await self._moved_on(start, graph, node, state, path)

    async def decide(self, decision: GraphDecision) -> GraphStepDone:
        start = decision.start
        graph = self.graph(start.graph_id)
        state = graph.state_type.model_validate_json(decision.state)
        response = decision.decided.decision
        who = decision.decided.decided_by
        assert isinstance(response, EscalationResponse)  # the app passes on escalation answers only
        if response.action is EscalationAction.ABORT:
            reason = f"aborted by {who} at node {decision.waiting_at}"
            await self._save(start, GraphRunState.ABORTED, state, decision.path, reason=reason)
            return GraphStepDone(state=state.model_dump_json(), path=decision.path)
        answer = ChatMessage(role="user", content=resume_message(response))
        answered = state.model_copy(
            update={"status": GraphStatus.RUNNING, "question": "", "messages": [*state.messages, answer]}
        )
        return await self._moved_on(start, graph, decision.waiting_at, answered, decision.path)

    async def _post(self, start: GraphRunStart, handler: WaitingNode, state: GraphState, step: int) -> Wait:
        """Post what the node asks of another service, having noted first which run waits for it
        (an end heard before the note would find no one to tell)."""
        item_id = f"graph.{start.run_id}.{step}"
        instance_id = graph_instance(start.run_id)
        if isinstance(handler, MarketNode):
            wait = Wait(kind=WaitKind.TASK, id=item_id, timeout_seconds=handler.timeout_seconds)
            await self.tasks.link(TaskLink(task_id=item_id, instance_id=instance_id, event=wait.event))
        else:
            wait = Wait(
                kind=WaitKind.PLAN if isinstance(handler, PlanningNode) else WaitKind.DEBATE, id=item_id
            )
            await self.wait_links.save(item_id, WaitLink(wait=wait, instance_id=instance_id))
        await self._request(handler, state, item_id)
        return wait

    async def _request(self, handler: WaitingNode, state: GraphState, item_id: str) -> None:
        """Publish what the node asks for (its id as the message id: asking again is a repeat)."""
        if isinstance(handler, MarketNode):
            task = handler.task(state, item_id).model_copy(update={"reply_to": self.publisher.app_id})
            await self.publisher.publish(topics.TASKS, task, message_id=item_id)
        elif isinstance(handler, PlanningNode):
            await self.publisher.publish(topics.PLANS, handler.request(state, item_id), message_id=item_id)
        else:
            await self.publisher.publish(topics.DEBATES, handler.request(state, item_id), message_id=item_id)

    async def wait_ended(self, ended: GraphWaitEnded) -> GraphStepDone:
        """What the node waited for ended (or the wait timed out): its result goes into the state."""
        start = ended.start
        graph = self.graph(start.graph_id)
        node = ended.path[-1]
        handler = graph.handler(node)
        state = graph.state_type.model_validate_json(ended.state)
        end, wait = ended.ended, ended.wait
        if isinstance(handler, MarketNode):
            state = handler.ended(node, state, _market_result(wait, end.task if end is not None else None))
        elif isinstance(handler, PlanningNode) and end is not None and end.plan is not None:
            state = handler.ended(node, state, end.plan)
        elif isinstance(handler, DebateNode) and end is not None and end.debate is not None:
            state = handler.ended(node, state, end.debate)
        else:
            missing = f"node {node!r} of graph {graph.graph_id} got no end of its {wait.kind} {wait.id}"
            raise GraphRunFailed(missing)
        return await self._moved_on(start, graph, node, state, ended.path)

    async def check_wait(self, check: GraphWaitCheck) -> WaitEnded | None:
        """The end of what a node waits for as its owner recorded it, if it ended (for a lost
        signal). A plan or debate its service has no record of yet is asked for again: a request
        lost on the way is made now, and a run stuck before its first step is woken."""
        wait = check.wait
        if wait.kind is WaitKind.TASK:
            ended = await self.tasks.end_on_board(wait.id)
            return WaitEnded(task=ended) if ended is not None else None
        if wait.kind is WaitKind.PLAN:
            plan = await self._plan(wait.id)
            if plan is not None:
                return _plan_end(plan)
        else:
            debate = await self._debate(wait.id)
            if debate is not None:
                return _debate_end(debate)
        start = check.start
        graph = self.graph(start.graph_id)
        handler = graph.handler(check.path[-1])
        if isinstance(handler, WaitingNode):
            log.info(
                "asking again for what a graph run waits for", extra={"run_id": start.run_id, "id": wait.id}
            )
            await self._request(handler, graph.state_type.model_validate_json(check.state), wait.id)
        return None

    async def _moved_on(
        self, start: GraphRunStart, graph: CompiledGraph[Any], node: str, state: GraphState, path: list[str]
    ) -> GraphStepDone:
        """After `node`: the next node, or the run's end; the record saved either way."""
        following = graph.after(node, state)
        if following is not None and len(path) >= graph.max_steps:
            raise GraphRunFailed(
                f"the run of graph {graph.graph_id} reached its limit of {graph.max_steps} steps"
            )
        if following is None:
            state = state.model_copy(update={"status": GraphStatus.COMPLETED})
        status = GraphRunState.RUNNING if following is not None else GraphRunState.COMPLETED
        await self._save(start, status, state, path)
        return GraphStepDone(state=state.model_dump_json(), path=path, next=following)

    async def fail(self, failed: GraphFailed) -> None:
        start = failed.start
        found = await self.records.get(start.run_id)
        record = found.value if found is not None else None
        state = record.state if record is not None else start.state
        path = record.path if record is not None else []
        failed_record = GraphRunRecord(
            graph_id=start.graph_id, run_id=start.run_id, status=GraphRunState.FAILED, path=path, state=state,
            reason=failed.failure.reason[:MAX_NOTE_CHARS], traceparent=start.traceparent,
            created_at=start.created_at, updated_at=datetime.now(UTC),
        )  # fmt: skip
        await self._keep(start, failed_record)

    async def _save(
        self,
        start: GraphRunStart,
        status: GraphRunState,
        state: GraphState,
        path: list[str],
        *,
        waiting_at: str | None = None,
        escalation_id: str | None = None,
        wait: Wait | None = None,
        reason: str = "",
    ) -> None:
        record = GraphRunRecord(
            graph_id=start.graph_id, run_id=start.run_id, status=status, path=path,
            state=state.model_dump_json(), waiting_at=waiting_at, escalation_id=escalation_id,
            wait=wait, reason=reason[:MAX_NOTE_CHARS], traceparent=start.traceparent,
            created_at=start.created_at, updated_at=datetime.now(UTC),
        )  # fmt: skip
        await self._keep(start, record)

    async def _keep(self, start: GraphRunStart, record: GraphRunRecord) -> None:
        """Save the record (its revision counted); once the run ended, record the run's span
        too (its nodes' parent)."""
        saved = await self.records.get(start.run_id)
        if saved is not None:
            record = record.model_copy(update={"revision": saved.value.revision + 1})
        await self.records.save(start.run_id, record)
        if record.status in ENDED and start.traceparent is not None:
            FinishedSpan(
                name=f"graph.run {start.graph_id}",
                traceparent=start.traceparent,
                parent=start.parent_traceparent,
                start=start.created_at,
                end=record.updated_at,
                attributes={"agora.graph_id": start.graph_id, "agora.graph_run": start.run_id,
                            "agora.graph_status": str(record.status), "agora.graph_nodes": len(record.path)},
            ).record()  # fmt: skip


def _park_request(start: GraphRunStart, node: str, state: GraphState, step: int) -> ParkRequest:
    context = EscalationContext(
        job_id=start.run_id,
        step=step,
        validation_results=[],
        confidence=0.0,
        retry_count=0,
        error_history=[],
        prompt_used=(state.question or f"graph {start.graph_id} asks at node {node}")[:MAX_TEXT_CHARS],
        output_summary=(state.output or state.input or "(nothing yet)")[:MAX_TEXT_CHARS],
    )
    return ParkRequest(
        waiting_party=WaitingParty(kind=WaitingPartyKind.GRAPH_RUN, id=start.run_id),
        context=context,
        who=f"graph:{start.graph_id}"[:200],
        why=f"node {node} of graph {start.graph_id} asks a person"[:MAX_NOTE_CHARS],
    )


def _plan_end(plan: PlanRecord) -> WaitEnded | None:
    return WaitEnded(plan=PlanCompleted.of(plan)) if plan.state in FINAL_STATES else None


def _debate_end(debate: DebateRecord) -> WaitEnded | None:
    return WaitEnded(debate=DebateCompleted.of(debate)) if debate.state in FINAL_DEBATE_STATES else None


def _market_result(wait: Wait, ended: TaskEnded | None) -> MarketResult:
    if ended is None:
        return MarketResult(task_id=wait.id, succeeded=False, status="TIMED_OUT",
                            summary=f"no outcome within {wait.timeout_seconds} s")  # fmt: skip
    outcome = ended.outcome
    if outcome is None:
        reason = ended.rejected_reason or ""
        return MarketResult(task_id=wait.id, succeeded=False, status="REJECTED", summary=reason)
    partial = outcome.partial and not ended.check_failed
    status = "COMPLETED" if ended.succeeded else "PARTIAL" if partial else "FAILED"
    return MarketResult(task_id=wait.id, succeeded=ended.succeeded, status=status,
                        agent_id=outcome.agent_id, summary=outcome.summary,
                        cost_usd=outcome.actual_cost_usd)  # fmt: skip
