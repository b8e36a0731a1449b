"""Agent apps: a team's agents as their own Dapr app on the market.

An agent app registers its agents' profiles with a lease (renewed every third of it), naming
itself as the app that answers their bid solicitations; answers them (`POST /v1/bids`) with
each agent's own estimate; takes the awards its agents win (acknowledged on the task board
with the award's token, checked against the board's record); runs each award as a Dapr
workflow (`agent_run`: execute, then report), so a crash of the app mid-run resumes the run
instead of losing the task; stops a run still going at its task's deadline (`deadline_ms` after
the award: an asyncio timeout where it runs, a durable timer in its workflow), which ends FAILED
with `DEADLINE_EXCEEDED` and what it spent; and publishes the outcome with its real cost, tokens
and steps.
With `AGORA_UNCERTAINTY_APP_ID` set, every step of its runners is reported to the uncertainty
monitor; a step it pauses parks the run (WAITING_FOR_HUMAN, the task stays allocated) until a
person's decision (`agora.escalation.resolved`, checked against the escalation's record)
reaches the run's workflow as an event, and the run goes on as decided. On
shutdown it re-registers its agents with the shortest lease, so they leave the market within
seconds.

    agora-agent run my_agents.py        # or: python -m agora.sdk run my_agents.py

`my_agents.py` defines `agents = [Agent(...), ...]` (or module-level `Agent`s).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from dapr.ext.workflow import DaprWorkflowContext, when_any
from fastapi import FastAPI, Request
from pydantic import AliasChoices, AwareDatetime, BaseModel, Field

from agora.core import topics
from agora.core.contracts import AgentLearning, BidOffer, BidSolicitation
from agora.core.errors import AgoraError, BidTooLate, InvalidArgument, NotFound
from agora.core.escalation.decisions import EscalationAction, EscalationResponse, resume_message
from agora.core.escalation.record import ParkRequest, WaitingPartyKind
from agora.core.limits import MAX_ITEMS, MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.market import TaskOutcome
from agora.core.messages import (
    MAX_LEASE_SECONDS,
    MIN_LEASE_SECONDS,
    AwardAcknowledgement,
    CostEvent,
    DeadLetter,
    EscalationResolved,
    HandOver,
    TaskAwarded,
)
from agora.core.models import CapabilityProfile
from agora.core.outcomes.record import SheetOutcome
from agora.core.task_lifecycle import TaskRecord, deadline_exceeded, failure_summary, run_deadline
from agora.core.task_waits import TaskLink
from agora.core.topics import Channel
from agora.runtime.actor_client import ActorClient
from agora.runtime.batched_reads import BatchedReads
from agora.runtime.batched_writes import BatchedWrites
from agora.runtime.batching import KeyedMicroBatcher, group_commits
from agora.runtime.clients import (
    DebateClient,
    EscalationActors,
    PlannerClient,
    RegistryClient,
    escalation_actors,
    task_actors,
)
from agora.runtime.interfaces import TaskActorInterface
from agora.runtime.pubsub import RejectMessage
from agora.runtime.service import PathId, ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings
from agora.runtime.shared_calls import SharedCalls
from agora.runtime.state import StateRepository
from agora.runtime.tracing import current_traceparent
from agora.runtime.workflows import (
    ActivityRef,
    Decisions,
    Pending,
    RunFailure,
    Steps,
    WorkflowRef,
    step_span,
)
from agora.sdk._agent import Agent
from agora.sdk._cost import EventPublisher
from agora.sdk._graph import CompiledGraph
from agora.sdk._graph_runs import (
    GRAPH_DECISIONS,
    GraphRunAccepted,
    GraphRunRecord,
    GraphRuns,
    WaitLink,
    graph_instance,
)
from agora.sdk._learning import LEARNING_KEPT
from agora.sdk._mcp import durable_call_scope
from agora.sdk._monitor import UncertaintyStepMonitor
from agora.sdk._runner import (
    AgentState,
    AgentStateStore,
    ExecutionResult,
    RunStatus,
)

__all__ = [
    "AgentAppSettings",
    "agent_app_module",
    "load_agents",
    "serve_agents",
]

log = logging.getLogger(__name__)

RUN_DEADLINES = "agent_run.deadline"
"""A run's workflow races each of its steps (executing, waiting for a person, resuming) with a
durable timer at the run's deadline, and ends the run at its deadline (`DEADLINE`) when the timer
fires first. A run begun before this waits as its history recorded (Dapr Workflow's
`is_patched`)."""
STATE_NAMESPACE = "agent:state"
GRAPH_RUN_NAMESPACE = "graph:run"
GRAPH_TASK_NAMESPACE = "graph:task"
GRAPH_WAIT_NAMESPACE = "graph:wait"
T = TypeVar("T")
LEARNING_NAMESPACE = "agent:learning"
RENEW_RETRY_SECONDS = 1.0


class AgentAppSettings(ServiceSettings):
    app_id: str = Field(default="agents", validation_alias=AliasChoices("AGORA_APP_ID", "APP_ID"))
    """The app's Dapr app id (`dapr run --app-id` sets APP_ID); its agents' bids are asked here."""
    registry_app_id: str = "registry"
    taskboard_app_id: str = "taskboard"
    planner_app_id: str = "planner"
    """Where a graph's planning nodes read their plans (`GET /v1/plans/{id}`)."""
    debate_app_id: str = "debate"
    """Where a graph's debate nodes read their debates (`GET /v1/debates/{id}`)."""
    agents_file: str | None = None
    """AGORA_AGENTS_FILE: the Python file defining the agents and graphs, or several separated
    like PATH entries (`agora-agent run FILE...` names them instead)."""
    agent_lease_seconds: int = Field(default=60, ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)
    inline_run_seconds: float = Field(default=5.0, ge=0.0, le=10.0)
    """AGORA_INLINE_RUN_SECONDS: how long an award's run goes on in the award's delivery before
    the workflow engine takes it over (0: every run is a workflow from its start), and at most
    a third of the award's acknowledgment window. A run that ends within it costs no workflow
    and no acknowledgment: its outcome, recorded on the board, acknowledges the award. Until
    then only the board's watch holds the award, so a run lost in a crash is not waited for:
    when the window ends the task passes to the next-best bid. It stays well below the
    broker's redelivery timeout (`processingTimeout`, 15 s)."""
    max_runs_in_flight: int = Field(default=16, ge=1, le=10_000)
    """AGORA_MAX_RUNS_IN_FLIGHT: runs this app works on at once; the workflow engine holds the
    others' next steps until a slot frees."""
    uncertainty_app_id: str | None = None
    """AGORA_UNCERTAINTY_APP_ID: the uncertainty monitor that checks every step of the app's
    runners (and may pause a run for a person); unset: no per-step checks."""


class AgentRunStart(BaseModel):
    award: TaskAwarded
    traceparent: str | None = None
    """The award's trace: every step of the run is a span of it, however often the workflow is
    replayed or moved to another process."""
    instance_id: str | None = None
    """The run's workflow instance (`run_instance`); none in a run scheduled before it was kept."""
    deadline: AwareDatetime | None = None
    """When the run must have ended (`run_deadline`: the task's `deadline_ms` after the award);
    None: the task has none, or the run was scheduled before deadlines were kept."""

    @property
    def instance(self) -> str:
        return self.instance_id or run_instance(self.award.task_id)


class RunProgress(BaseModel):
    """Where a run stands after a step of its workflow: ended with an outcome, or paused for a
    person on an escalation."""

    outcome: TaskOutcome | None = None
    waiting_on: str | None = None
    handed_over: bool = False
    """The task went to another agent, as a person decided: the run ends without an outcome."""
    reported: bool = False
    """The step that ended the run announced its outcome too (one recorded step fewer; a step
    run again announces the same event id, which its subscribers take once)."""


class AgentRunDecision(BaseModel):
    """A person's decision on the escalation a paused run waits on."""

    award: TaskAwarded
    decided: EscalationResolved
    traceparent: str | None = None
    instance_id: str | None = None
    """The run's workflow instance, as in `AgentRunStart`."""
    deadline: AwareDatetime | None = None
    """The run's deadline, as in `AgentRunStart`."""

    @property
    def instance(self) -> str:
        return self.instance_id or run_instance(self.award.task_id)


class AgentRunReport(BaseModel):
    """A run's outcome, to announce in the run's trace."""

    outcome: TaskOutcome
    traceparent: str | None = None


# The run's activities and workflow (their names are recorded in each run's history).
EXECUTE = ActivityRef("agent.execute", AgentRunStart, RunProgress)
RESUME = ActivityRef("agent.resume", AgentRunDecision, RunProgress)
REPORT = ActivityRef("agent.report", AgentRunReport, None)
DEADLINE = ActivityRef("agent.deadline", AgentRunStart, RunProgress)
AGENT_RUN = WorkflowRef("agent_run", AgentRunStart, None)
RUN_DECISIONS = Decisions(EscalationResolved, lambda event: event)
"""A paused run takes the decision as it was announced (an escalation's or a checkpoint's answer)."""


class RecentOutcomes(BaseModel):
    """An agent's recent runs, as its app keeps them (`agent:learning:<agent_id>`)."""

    outcomes: list[SheetOutcome] = Field(default_factory=list, max_length=LEARNING_KEPT)


class DaprOutcomeHistory:
    """What an app's agents learn from, in its Dapr state store: one record per agent. Runs of
    one agent that end side by side are added in one write under the record's etag (a group
    commit per agent), and concurrent reads of one agent's history share one read."""

    def __init__(self, repository: StateRepository[RecentOutcomes]) -> None:
        self._repository = repository
        self._reads: SharedCalls[str, list[SheetOutcome]] = SharedCalls()
        self._writes: KeyedMicroBatcher[str, SheetOutcome, None] = group_commits(self._add, "learning")

    async def outcomes(self, agent_id: str) -> list[SheetOutcome]:
        return list(await self._reads.call(agent_id, lambda: self._read(agent_id)))

    async def _read(self, agent_id: str) -> list[SheetOutcome]:
        found = await self._repository.get(agent_id)
        return list(found.value.outcomes) if found is not None else []

    async def record(self, agent_id: str, outcome: SheetOutcome) -> None:
        await self._writes.submit(agent_id, outcome)

    async def _add(self, agent_id: str, outcomes: list[SheetOutcome]) -> None:
        # A run recorded twice counts once, as last told. The stored history is edited as JSON:
        # parsing and dumping its fifty outcomes on every write was most of what a write cost.
        latest = {o.outcome_id: o.model_dump(mode="json") for o in outcomes}

        def add(current: Any | None) -> dict[str, Any]:
            stored = current.get("outcomes", []) if isinstance(current, dict) else []
            kept = [o for o in stored if o.get("outcome_id") not in latest]
            return {"outcomes": [*kept, *latest.values()][-LEARNING_KEPT:]}

        await self._repository.update_json(agent_id, add)


class EscalationService:
    """Hands a run to a person through the escalation service's `Escalation` actors."""

    def __init__(self, escalations: EscalationActors) -> None:
        self._escalations = escalations

    async def park(self, escalation_id: str, request: ParkRequest) -> None:
        await self._escalations(escalation_id).park(request)


class DaprAgentStateStore:
    """Runner state in the app's Dapr state store (`agent:state:<agent>|<session>`); a run that
    ended is kept for `retention_seconds` (a state TTL), one that runs or waits for as long."""

    def __init__(self, repository: StateRepository[AgentState], retention_seconds: int | None = None) -> None:
        self._reads = BatchedReads(repository)
        self._writes = BatchedWrites(repository)
        """Runs going on side by side load and save their states in shared bulk calls."""
        self._retention_seconds = retention_seconds

    async def load(self, agent_id: str, session_id: str) -> AgentState | None:
        found = await self._reads.get(f"{agent_id}|{session_id}")
        return found.value if found is not None else None

    async def save(self, state: AgentState) -> None:
        ended = state.status in (RunStatus.COMPLETED, RunStatus.FAILED)
        await self._writes.save(
            f"{state.agent_id}|{state.session_id}",
            state,
            ttl_seconds=self._retention_seconds if ended else None,
        )


@dataclass
class Spend:
    """What a run spent: its model calls' cost (at their prices) and tokens, its steps, and the
    tools it called."""

    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    steps: int = 0
    tools_called: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, state: AgentState) -> Spend:
        """What a run's saved state says it spent."""
        return cls(state.cost_usd, state.input_tokens, state.output_tokens, state.iterations,
                   list(state.tools_called))  # fmt: skip


class RunMeter:
    """What each run going on in this app has spent so far, from its runner's cost events (the
    app's runners publish through it): a runner saves its state when a turn ends, so a run
    stopped mid-turn (at its deadline) has nothing newer saved than its earlier turns. A turn
    begins with what the run's earlier turns saved (`begin`); each call's cost and tokens add to
    it, and each model call of a step (`<agent_id>.step`) counts a step. Calls that cost nothing
    are not announced, so neither are they counted here."""

    def __init__(self, publisher: EventPublisher) -> None:
        self._publisher = publisher
        self._turns: dict[tuple[str, str], Spend] = {}

    async def publish(self, channel: Channel[Any], payload: Any, *, message_id: str | None = None) -> str:
        if isinstance(payload, CostEvent):
            spend = self._turns.get((payload.agent_id, payload.session_id))
            if spend is not None:
                spend.cost_usd += payload.cost_usd
                spend.input_tokens += payload.input_tokens
                spend.output_tokens += payload.output_tokens
                if payload.step_name == f"{payload.agent_id}.step":
                    spend.steps += 1
        return await self._publisher.publish(channel, payload, message_id=message_id)

    def begin(self, agent_id: str, session_id: str, earlier: AgentState | None = None) -> None:
        """A turn of the run begins: a fresh run's (nothing spent), or a resumed one's (what its
        earlier turns saved)."""
        self._turns[(agent_id, session_id)] = Spend.of(earlier) if earlier is not None else Spend()

    def spent(self, agent_id: str, session_id: str) -> Spend | None:
        """What the run has spent, if a turn of it goes on (or was stopped) in this process."""
        found = self._turns.get((agent_id, session_id))
        return None if found is None else replace(found, tools_called=list(found.tools_called))

    def forget(self, agent_id: str, session_id: str) -> None:
        self._turns.pop((agent_id, session_id), None)


async def within_deadline(
    deadline: datetime | None,
    run: Callable[[], Awaitable[T]],
    at_deadline: Callable[[], Awaitable[T]],
) -> T:
    """What `run` comes to, or when it is still going at `deadline`, `run` stopped (cancelled)
    and `at_deadline`'s result instead; a deadline already passed does not start `run`. A
    `TimeoutError` of `run`'s own goes through: only the deadline's stops it."""
    if deadline is None:
        return await run()
    left = (deadline - datetime.now(UTC)).total_seconds()
    if left <= 0:
        return await at_deadline()
    bound = asyncio.timeout(left)
    try:
        async with bound:
            return await run()
    except TimeoutError:
        if not bound.expired():
            raise
    return await at_deadline()


async def _stopped_at_deadline(
    agent: Agent, award: TaskAwarded, store: AgentStateStore, meter: RunMeter | None
) -> RunProgress:
    """The outcome of a run stopped at its task's deadline: FAILED, its summary naming
    `DEADLINE_EXCEEDED`, with what the run spent so far: as metered in this process while a turn
    of it went on here, else as its runner last saved it (a run paused for a person: all of it;
    a run lost with another process: its earlier turns). A saved state still running or waiting
    ends FAILED too, so a decision that comes later finds the run ended."""
    reason = failure_summary(deadline_exceeded(award.spec))
    saved = await store.load(agent.agent_id, award.task_id) if agent.runner is not None else None
    metered = meter.spent(agent.agent_id, award.task_id) if meter is not None else None
    last_saved = Spend.of(saved) if saved is not None else Spend()
    spend = metered if metered is not None else last_saved
    if saved is not None and saved.status in (RunStatus.RUNNING, RunStatus.WAITING_FOR_HUMAN):
        ended = saved.model_copy(
            update={"status": RunStatus.FAILED, "reason": reason[:MAX_NOTE_CHARS], "cost_usd": spend.cost_usd,
                    "input_tokens": spend.input_tokens, "output_tokens": spend.output_tokens,
                    "iterations": spend.steps}
        )  # fmt: skip
        await store.save(ended)
    return RunProgress(
        outcome=TaskOutcome(
            task_id=award.task_id,
            agent_id=award.agent_id,
            actual_success=False,
            actual_cost_usd=charged(agent, spend.cost_usd, spend.steps),
            actual_steps=spend.steps,
            summary=reason[:MAX_TEXT_CHARS],
            input_tokens=spend.input_tokens,
            output_tokens=spend.output_tokens,
            tools_called=spend.tools_called[:MAX_ITEMS],
            award_token=award.award_token,
        )
    )


STOP_GRACE_SECONDS = 5.0
"""How long a run's deadline step waits for the run, going on in its process, to stop itself."""


class RunDeadlines:
    """Each run's deadline, held where the run goes on and by its workflow.

    In the process where a run goes on (inside its award's delivery, or a step of its workflow)
    it is bounded by its deadline (`bounded`, an asyncio timeout): still going then, it is
    stopped and its task ends FAILED with `DEADLINE_EXCEEDED` and what it spent (`ended`). Its
    workflow's durable timer at the same deadline ends what no process is left to stop: a run
    paused for a person, one lost with its app, one whose step waits to be handed out
    (`passed`)."""

    def __init__(
        self,
        agents: dict[str, Agent],
        store: AgentStateStore,
        meter: RunMeter | None,
        tasks: Callable[[str], TaskActorInterface],
        stop_grace_seconds: float = STOP_GRACE_SECONDS,
    ) -> None:
        self._agents = agents
        self._stop_grace_seconds = stop_grace_seconds
        self._store = store
        self._meter = meter
        self._tasks = tasks
        self._runs: dict[str, asyncio.Task[Any]] = {}
        """Runs going on in this process, by workflow instance."""

    async def bounded(
        self,
        award: TaskAwarded,
        instance: str,
        deadline: datetime | None,
        run: Callable[[], Awaitable[RunProgress]],
    ) -> RunProgress:
        """What the run comes to, or, still going at `deadline`, its end there (`ended`)."""
        current = asyncio.current_task()
        if current is not None:
            self._runs[instance] = current
        try:
            return await within_deadline(deadline, run, lambda: self.ended(award))
        finally:
            if self._runs.get(instance) is current:
                del self._runs[instance]
            if self._meter is not None:
                self._meter.forget(award.agent_id, award.task_id)

    async def ended(self, award: TaskAwarded) -> RunProgress:
        """The run's end at its deadline: the outcome the board holds already (the run ended, or
        was ended in another process, first: nothing more to record), else FAILED with
        `DEADLINE_EXCEEDED` and what it spent, to record."""
        board = await self._tasks(award.task_id).get_task()
        if board.outcome is not None:
            return RunProgress(outcome=board.outcome, reported=True)
        return await _stopped_at_deadline(self._agents[award.agent_id], award, self._store, self._meter)

    async def passed(self, start: AgentRunStart) -> RunProgress:
        """The run's workflow timer fired: its deadline passed before the run ended. A run going
        on in this process ends itself at its deadline and is waited for (a while: one that does
        not stop, a handler deaf to cancellation say, is ended here all the same and cancelled
        again); any other is ended here."""
        local = self._runs.get(start.instance)
        if local is not None:
            await asyncio.wait({local}, timeout=self._stop_grace_seconds)
            if not local.done():
                log.warning(
                    "a run did not stop at its deadline; its task ends without it",
                    extra=_run_attributes(start.award),
                )
                ended = await self.ended(start.award)  # before the run is let go: what it spent
                local.cancel()
                return ended
        return await self.ended(start.award)


def agent_run(ctx: DaprWorkflowContext, start: AgentRunStart) -> Steps[None]:
    """An award's run: execute it; while it is paused for a person, wait for the decision (a
    workflow event, kept by the engine across crashes) and go on as decided; then report its
    outcome (each step recorded once). With a deadline, each of those steps races a durable
    timer at it: the timer first, the run is ended at its deadline instead (`DEADLINE`: FAILED,
    `DEADLINE_EXCEEDED`), whatever its process's fate (a run paused for a person, or lost with
    its app, is stopped as surely as one the app stops itself)."""
    deadline = start.deadline if ctx.is_patched(RUN_DEADLINES) else None
    # One timer for the whole run (the engine's clock, replayed from the history).
    timer = ctx.create_timer(deadline) if deadline is not None else None
    progress = yield from _before_deadline(EXECUTE.schedule(ctx, start), timer)
    while progress is not None:
        if progress.outcome is not None:
            if not progress.reported:  # a step recorded before steps announced their outcomes
                report = AgentRunReport(outcome=progress.outcome, traceparent=start.traceparent)
                yield from REPORT.run(ctx, report)
            return None
        if progress.handed_over:
            return None  # the task's next holder reports its outcome
        waiting_on = progress.waiting_on or ""
        decided = yield from _before_deadline(RUN_DECISIONS.waiting(ctx, waiting_on), timer)
        if decided is None:
            break
        resumed = AgentRunDecision(
            award=start.award,
            decided=decided,
            traceparent=start.traceparent,
            instance_id=start.instance_id,
            deadline=deadline,
        )
        progress = yield from _before_deadline(RESUME.schedule(ctx, resumed), timer)
    yield from DEADLINE.run(ctx, start)
    return None


def _before_deadline(step: Pending[T], timer: Any | None) -> Steps[T | None]:
    """`step`'s result, or None when `timer` (the run's deadline; None: it has none) fires
    first. The step left behind is not waited for: the run ends at its deadline."""
    if timer is None:
        return (yield from step.wait())
    first = yield when_any([step.task, timer])
    return None if first is timer else step.result(step.task.get_result())


def agent_run_failed(ctx: DaprWorkflowContext, start: AgentRunStart, failure: RunFailure) -> Steps[None]:
    """A run that broke down still ends its task: a failed outcome with the reason."""
    report = AgentRunReport(
        outcome=failed_outcome(start.award, failure.reason), traceparent=start.traceparent
    )
    yield from REPORT.run(ctx, report)


def failed_outcome(award: TaskAwarded, reason: str, *, cost_usd: float = 0.0, steps: int = 0,
                   input_tokens: int = 0, output_tokens: int = 0) -> TaskOutcome:  # fmt: skip
    return TaskOutcome(
        task_id=award.task_id,
        agent_id=award.agent_id,
        actual_success=False,
        actual_cost_usd=cost_usd,
        actual_steps=steps,
        summary=reason[:MAX_NOTE_CHARS],
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        award_token=award.award_token,
    )


def agent_app_module(
    agents: Sequence[Agent], settings: AgentAppSettings, graphs: Sequence[CompiledGraph[Any]] = ()
) -> ServiceModule:
    by_id = {agent.agent_id: agent for agent in agents}
    if len(by_id) != len(agents):
        raise ValueError("two agents of this app have one agent id")
    if not agents and not graphs:
        raise ValueError("an agent app needs at least one agent or graph")

    def profiles() -> list[CapabilityProfile]:
        return [
            a.profile.model_copy(update={"bid_app_id": settings.app_id if a.bids == "self" else None})
            for a in agents
        ]

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        store = DaprAgentStateStore(ctx.repository(STATE_NAMESPACE, AgentState), settings.retention_seconds)
        monitor = (
            UncertaintyStepMonitor(ctx.sidecar, settings.uncertainty_app_id)
            if settings.uncertainty_app_id
            else None
        )
        actors = ActorClient(ctx.sidecar)
        outcomes = DaprOutcomeHistory(ctx.repository(LEARNING_NAMESPACE, RecentOutcomes))
        escalator = EscalationService(escalation_actors(actors))
        meter = RunMeter(ctx.publisher)
        for agent in agents:
            if agent.runner is not None:
                agent.runner.attach(state_store=store, cost_publisher=meter, monitor=monitor,
                                    escalator=escalator, outcomes=outcomes)  # fmt: skip
        tasks = task_actors(actors)
        deadlines = RunDeadlines(by_id, store, meter, tasks)
        host = ctx.workflows()
        host.workflow(AGENT_RUN, agent_run, on_failure=agent_run_failed)
        for agent in agents:
            if agent.workflows is not None:
                host.attach(agent.workflows)
        graph_runs = GraphRuns(
            graphs,
            ctx.repository(GRAPH_RUN_NAMESPACE, GraphRunRecord),
            escalator,
            host,
            publisher=ctx.publisher,
            task_actors=tasks,
            task_links=ctx.repository(GRAPH_TASK_NAMESPACE, TaskLink),
            wait_links=ctx.repository(GRAPH_WAIT_NAMESPACE, WaitLink),
            planner=PlannerClient(ctx.sidecar, settings.planner_app_id),
            debates=DebateClient(ctx.sidecar, settings.debate_app_id),
        )
        graph_runs.register()
        graph_runs.subscribe(ctx.subscriptions)

        @app.put("/v1/graphs/{graph_id}/runs/{run_id}", response_model=GraphRunAccepted)
        async def start_graph_run(graph_id: PathId, run_id: PathId, request: Request) -> GraphRunAccepted:
            """Start a run of the graph on the state in the body (the graph's state as JSON);
            the same request again is a repeat."""
            return await graph_runs.start(graph_id, run_id, await request.body())

        @app.get("/v1/graphs/{graph_id}/runs/{run_id}", response_model=GraphRunRecord)
        async def show_graph_run(graph_id: PathId, run_id: PathId) -> GraphRunRecord:
            return await graph_runs.show(graph_id, run_id)

        run_slots = asyncio.Semaphore(settings.max_runs_in_flight)
        reporting: set[str] = set()
        """Runs (by workflow instance) whose outcome is being recorded and announced."""

        async def execute(start: AgentRunStart) -> RunProgress:
            award = start.award
            agent = by_id[award.agent_id]

            async def run() -> RunProgress:
                await run_slots.acquire()
                agent.runs_in_flight += 1
                try:
                    # A run resumed after a crash may come before warm-up listed the MCP tools.
                    await _connect_tools(agent, settings)
                    with (
                        step_span("agent.execute", start.traceparent, _run_attributes(award)),
                        durable_call_scope(start.instance),
                    ):
                        return await _execute(agent, award, store, meter)
                finally:
                    agent.runs_in_flight -= 1
                    run_slots.release()

            # Its deadline counts from the award: the wait for a run slot is within it too.
            progress = await deadlines.bounded(award, start.instance, start.deadline, run)
            reporting.add(start.instance)
            try:
                return await reported(progress, start.traceparent)
            finally:
                reporting.discard(start.instance)

        async def resume(decision: AgentRunDecision) -> RunProgress:
            award = decision.award
            agent = by_id[award.agent_id]

            async def run() -> RunProgress:
                await run_slots.acquire()
                agent.runs_in_flight += 1
                try:
                    await _connect_tools(agent, settings)
                    # Each decision continues the run once: its calls are numbered afresh.
                    with (
                        step_span("agent.resume", decision.traceparent, _run_attributes(award)),
                        durable_call_scope(f"{decision.instance}.{decision.decided.escalation_id}"),
                    ):
                        return await _resume(agent, decision, store, monitor, tasks, meter)
                finally:
                    agent.runs_in_flight -= 1
                    run_slots.release()

            progress = await deadlines.bounded(award, decision.instance, decision.deadline, run)
            return await reported(progress, decision.traceparent)

        async def deadline_passed(start: AgentRunStart) -> RunProgress:
            """The run's workflow timer: the run ends at its deadline, if it has not yet."""
            with step_span("agent.deadline", start.traceparent, _run_attributes(start.award)):
                progress = await deadlines.passed(start)
            return await reported(progress, start.traceparent)

        async def reported(progress: RunProgress, traceparent: str | None) -> RunProgress:
            """A run that ended announces its outcome in the step that ended it."""
            if progress.outcome is None or progress.reported:
                return progress
            await report(AgentRunReport(outcome=progress.outcome, traceparent=traceparent))
            return progress.model_copy(update={"reported": True})

        async def report(report: AgentRunReport) -> None:
            """The outcome on the board (it acknowledges the award, within its window), which
            announces what it records. One the board refuses goes to the dead-letter topic
            with the board's reason, so the refusal is seen, not only logged here."""
            outcome = report.outcome
            with step_span("agent.report", report.traceparent, {"task_id": outcome.task_id}):
                try:
                    await tasks(outcome.task_id).mark_outcome(outcome)
                except AgoraError as exc:
                    if not exc.permanent:
                        raise
                    reason = f"{exc.code}: {exc.message}"
                    log.warning(
                        "the board refused a run's outcome",
                        extra={"task_id": outcome.task_id, "agent_id": outcome.agent_id, "reason": reason},
                    )
                    await ctx.publisher.dead_letter(
                        DeadLetter(
                            topic=topics.TASK_OUTCOME.name,
                            message_id=f"outcome:{outcome.task_id}",
                            subscriber=settings.app_id,
                            reason=f"the task board refused the outcome: {reason}",
                            payload=outcome.model_dump(mode="json"),
                        )
                    )

        host.activity(EXECUTE, execute)
        host.activity(RESUME, resume)
        host.activity(REPORT, report)
        host.activity(DEADLINE, deadline_passed)

        @app.get("/v1/agents/{agent_id}/learning", response_model=AgentLearning)
        async def learning(agent_id: PathId) -> AgentLearning:
            """What an agent learnt from its recent runs, and how its patterns fare."""
            agent = by_id.get(agent_id)
            if agent is None:
                raise NotFound(f"no agent {agent_id!r} in this app", agent_id=agent_id)
            if agent.runner is None:
                return AgentLearning(agent_id=agent_id, outcomes=0, patterns=[], effectiveness=[])
            return await agent.runner.learning(agent_id)

        @app.post("/v1/bids", response_model=BidOffer)
        async def bid(solicitation: BidSolicitation) -> BidOffer:
            agent = by_id.get(solicitation.agent_id)
            if agent is None:
                raise NotFound(
                    f"no agent {solicitation.agent_id!r} in this app", agent_id=solicitation.agent_id
                )
            if not agent.profile.skill_tags or not set(solicitation.task.required_skills) <= set(
                agent.profile.skill_tags
            ):
                raise InvalidArgument(f"agent {agent.agent_id} lacks a required skill of the task")
            try:
                return await asyncio.wait_for(
                    agent.bid(solicitation.task), solicitation.respond_within_ms / 1000
                )
            except TimeoutError:
                raise BidTooLate(
                    f"agent {agent.agent_id} did not estimate the task within "
                    f"{solicitation.respond_within_ms} ms",
                    agent_id=agent.agent_id,
                ) from None

        async def on_award(award: TaskAwarded) -> None:
            if award.agent_id not in by_id:
                return  # another app's agent
            if first_delivery(award):
                attempt, acknowledged = award.attempt, False
            else:
                board = await checked_with_board(award)
                if board is None:
                    return
                attempt, acknowledged = len(board.awards), board.awards[-1].acknowledged_at is not None
            start = AgentRunStart(
                award=award,
                traceparent=current_traceparent(),
                instance_id=run_instance(award.task_id, attempt),
                # A board that does not date its awards: the run's budget counts from now.
                deadline=run_deadline(award.spec, award.awarded_at or datetime.now(UTC)),
            )
            if acknowledged:
                # Only a run a workflow holds is acknowledged before its outcome: a redelivery
                # of its award finds it there (and starts it, should that have been cut short).
                await host.start_once(AGENT_RUN, start.instance, start)
                return
            inline_seconds = min(settings.inline_run_seconds, award.acknowledge_within_ms / 3000)
            if inline_seconds > 0 and await ran_inline(start, inline_seconds):
                return  # ended, recorded on the board and announced
            await host.start_once(AGENT_RUN, start.instance, start)
            # The workflow holds the run now, however long it takes: the award is taken.
            held = AwardAcknowledgement(agent_id=award.agent_id, award_token=award.award_token)
            await _unless_refused(
                tasks(award.task_id).acknowledge_award(held),
                "the award passed on before its run was taken; its outcome will be refused",
                {"task_id": award.task_id, "agent_id": award.agent_id},
            )

        async def checked_with_board(award: TaskAwarded) -> TaskRecord | None:
            """The board's record of an award that may have been handled before (a redelivery,
            or one that waited in the broker), if the award is still this agent's to run: it
            holds the award (its token, its turn not passed on) and the event agrees with it."""
            held = AwardAcknowledgement(agent_id=award.agent_id, award_token=award.award_token)
            try:
                board = await tasks(award.task_id).verify_award(held)
            except AgoraError as exc:
                if not exc.permanent:
                    raise
                raise RejectMessage(f"{exc.code}: {exc.message}") from exc
            winning = board.allocation.winning_bid if board.allocation else None
            if board.spec != award.spec or winning != award.bid:
                raise RejectMessage(f"award for {award.task_id} does not match the task board's record")
            if board.outcome is not None:
                # A redelivery of an award whose task is done: nothing to run. The board
                # announced the outcome as it recorded it, unless it went down in between and its
                # reporter too; recording the same outcome again has the board announce it again
                # (its subscribers take each task's outcome once).
                if board.outcome.agent_id == award.agent_id:
                    await report(AgentRunReport(outcome=board.outcome, traceparent=current_traceparent()))
                return None
            return board

        async def ran_inline(start: AgentRunStart, seconds: float) -> bool:
            """Run the award in its delivery for up to `seconds`; whether it ended with its
            outcome recorded and announced. A run still going is stopped (its workflow runs it
            from the start, on whichever replica the engine picks, so it never runs twice at
            once); a paused or broken one is left to its workflow too, which finds it paused or
            retries."""
            run = ctx.spawn(execute(start), name=f"run {start.instance}")
            await asyncio.wait({run}, timeout=seconds)
            if not run.done():
                if start.instance not in reporting:
                    run.cancel()
                    await asyncio.wait({run})
                    return False
                # Its outcome may be on the board already: stopping it now could leave that
                # outcome unannounced, and a second run's outcome refused. It finishes.
                await asyncio.wait({run})
            failure = None if run.cancelled() else run.exception()
            if failure is not None:
                log.warning(
                    "a run failed in its award's delivery; its workflow runs it again",
                    extra={"task_id": start.award.task_id, "reason": repr(failure)[:300]},
                )
                return False
            return not run.cancelled() and run.result().reported

        ctx.subscriptions.subscribe(topics.TASK_AWARDED, on_award, idempotent=True)

        async def on_resolved(event: EscalationResolved) -> None:
            if event.waiting_party.kind is WaitingPartyKind.GRAPH_RUN:
                await graph_decided(event)
                return
            if event.waiting_party.kind not in (WaitingPartyKind.SESSION, WaitingPartyKind.TASK):
                return
            # A paused run waits in the workflow of the task it runs, when one of this app's
            # agents holds that task on the board; anything else is someone else's to continue.
            try:
                board = await tasks(event.waiting_party.id).get_task()
            except NotFound:
                return
            holder = board.allocation.winning_agent_id if board.allocation else None
            if holder not in by_id or board.outcome is not None:
                return  # not this app's, or its run ended (at its deadline, say): nothing waits
            run = run_instance(event.waiting_party.id, len(board.awards))
            await RUN_DECISIONS.relay(host, escalation_actors(actors), event, run)

        async def graph_decided(event: EscalationResolved) -> None:
            """A decision for a graph run of this app that waits on it goes to its workflow."""
            if await graph_runs.waits_here(event.waiting_party.id, event.escalation_id):
                run = graph_instance(event.waiting_party.id)
                await GRAPH_DECISIONS.relay(host, escalation_actors(actors), event, run)

        ctx.subscriptions.subscribe(topics.ESCALATION_RESOLVED, on_resolved, idempotent=True)

    async def warm_up(ctx: ServiceContext) -> None:
        for agent in agents:  # before registering: an agent bids only once its tools are there
            await _connect_tools(agent, settings)
        registry = RegistryClient(ctx.sidecar, settings.registry_app_id)
        for profile in profiles():
            await registry.register(profile, lease_seconds=settings.agent_lease_seconds)
        log.info(
            "agents registered", extra={"agents": sorted(by_id), "lease_s": settings.agent_lease_seconds}
        )
        ctx.spawn_daemon(_renew(registry, profiles(), settings.agent_lease_seconds), name="agent leases")

    async def stop(ctx: ServiceContext) -> None:
        registry = RegistryClient(ctx.sidecar, settings.registry_app_id)
        try:
            for profile in profiles():
                await registry.register(profile, lease_seconds=MIN_LEASE_SECONDS)
        except Exception as exc:  # the registry stopping too (one app hosts both): leases lapse anyway
            log.warning(
                "the registry could not shorten the agents' leases; they lapse on their own",
                extra={"reason": repr(exc)[:300], "within_s": settings.agent_lease_seconds},
            )
            return
        log.info("agents leave the market", extra={"agents": sorted(by_id), "within_s": MIN_LEASE_SECONDS})

    return ServiceModule("agents", setup=setup, warm_up=warm_up, stop=stop)


async def _unless_refused(call: Awaitable[object], refused: str, extra: dict[str, str]) -> None:
    """Await a call on the board; its permanent refusal is logged as `refused` with the reason
    (a transient failure raises, so the delivery or workflow step is tried again)."""
    try:
        await call
    except AgoraError as exc:
        if not exc.permanent:
            raise
        log.warning(refused, extra={**extra, "reason": f"{exc.code}: {exc.message}"})


FRESH_AWARD_SECONDS = 5.0
"""An award delivered within this time of being made is its first delivery: the broker hands a
message out again only once it has gone unacknowledged for its processing timeout (15 s), well
past this, with room for the clocks of two hosts to differ."""


def first_delivery(award: TaskAwarded, now: datetime | None = None) -> bool:
    """Whether the award is run at once, without asking the board first: only the board may
    publish awards (its topic's scopes), and it refuses an outcome without the award's token,
    so what the check would add for an award this young is the answer to "was this handled
    before?", which only a redelivery needs."""
    if award.awarded_at is None:
        return False  # from a board that does not say when it made the award
    age = ((now or datetime.now(UTC)) - award.awarded_at).total_seconds()
    return -FRESH_AWARD_SECONDS < age < FRESH_AWARD_SECONDS


def _run_attributes(award: TaskAwarded) -> dict[str, Any]:
    return {"task_id": award.task_id, "agent_id": award.agent_id}


def run_instance(task_id: str, turn: int = 1) -> str:
    """The workflow instance that runs the `turn`-th award of a task in its agent app: one per
    award, so a task a person hands over to another agent of the same app is a run of its own."""
    return f"run.{task_id}" if turn <= 1 else f"run.{task_id}.{turn}"


async def _connect_tools(agent: Agent, settings: AgentAppSettings) -> None:
    """The agent's tools from MCP servers, listed through the app's sidecar (once)."""
    if agent.runner is not None and agent.runner.tools.sources:
        await agent.runner.tools.connect(settings.dapr_http_endpoint)


async def _execute(
    agent: Agent, award: TaskAwarded, store: AgentStateStore, meter: RunMeter | None = None
) -> RunProgress:
    """Run the award: the agent's handler, or its runner on the task's description within the
    task's budget. A run that fails (its budget, its iteration limit, a model that is gone)
    ends as a failed outcome with the reason and what it spent; a run the step monitor paused
    waits for a person."""
    if agent.handler is not None:
        result = await agent.handler(award)
        return RunProgress(
            outcome=TaskOutcome(
                task_id=award.task_id,
                agent_id=award.agent_id,
                actual_success=result.success,
                actual_cost_usd=result.cost_usd,
                actual_steps=result.steps,
                partial=result.partial,
                summary=result.summary,
                input_tokens=result.input_tokens,
                output_tokens=result.output_tokens,
                award_token=award.award_token,
            )
        )
    assert agent.runner is not None
    saved = await store.load(agent.agent_id, award.task_id)
    if saved is not None and saved.status is RunStatus.WAITING_FOR_HUMAN:
        # This step ran before and paused the run (then the app stopped before the engine
        # recorded it): the run waits for that escalation's decision, not for a second one.
        return RunProgress(waiting_on=saved.escalation_id)
    definition = agent.definition
    # A run may take twice the steps its bid estimated, within the agent's maximum.
    allowance = min(agent.profile.max_steps, 2 * max(1, award.bid.estimated_steps))
    if meter is not None:
        meter.begin(agent.agent_id, award.task_id)
    return await _progress(
        agent,
        award,
        store,
        agent.runner.run(
            definition,
            award.spec.description,
            session_id=award.task_id,
            budget_usd=award.spec.budget_usd,
            max_iterations=allowance,
            checkpoints=award.spec.checkpoints,
        ),
    )


async def _resume(
    agent: Agent,
    decision: AgentRunDecision,
    store: AgentStateStore,
    monitor: UncertaintyStepMonitor | None,
    tasks: Callable[[str], TaskActorInterface],
    meter: RunMeter | None = None,
) -> RunProgress:
    """Go on with a paused run as the person decided: abort ends it failed, reassign hands the
    task to another bidder; skip leaves out the step a gate held before it ran (the run goes
    on without it), or ends a run paused after a step as partial; anything else continues it
    with the decision (and a new prompt or guidance) as the next message, a held step going as
    decided."""
    award, decided = decision.award, decision.decided
    assert agent.runner is not None
    saved = await store.load(agent.agent_id, award.task_id)
    if saved is None:
        raise NotFound(f"no saved run of agent {agent.agent_id} for task {award.task_id}")
    if saved.status is not RunStatus.WAITING_FOR_HUMAN or saved.escalation_id != decided.escalation_id:
        # Applied before (the app stopped before the engine recorded it): as the run now stands.
        return _progress_of(agent, award, saved)
    if (
        isinstance(decided.decision, EscalationResponse)
        and decided.decision.action is EscalationAction.REASSIGN
    ):
        return await _hand_over(agent, award, decided, decided.decision, saved, store, tasks)
    action = str(decided.decision.action)
    if action == "abort" or (action == "skip" and saved.held is None):
        reason = f"{action} by {decided.decided_by}"[:MAX_NOTE_CHARS]
        ended = saved.model_copy(update={"status": RunStatus.FAILED, "reason": reason})
        await store.save(ended)
        outcome = _outcome_of(agent, award, ended)
        return RunProgress(outcome=outcome.model_copy(update={"partial": action == "skip"}))
    if monitor is not None:
        await monitor.decision_taken(award.task_id, decided.escalation_id)
    if meter is not None:
        meter.begin(agent.agent_id, award.task_id, saved)
    return await _progress(
        agent,
        award,
        store,
        agent.runner.resume(
            agent.agent_id, award.task_id, resume_message(decided.decision), decision=decided.decision
        ),
    )


async def _hand_over(
    agent: Agent,
    award: TaskAwarded,
    decided: EscalationResolved,
    decision: EscalationResponse,
    saved: AgentState,
    store: AgentStateStore,
    tasks: Callable[[str], TaskActorInterface],
) -> RunProgress:
    """Give the task up for the bidder a person chose (or the next-best one): the board awards
    it again and the run ends with no outcome of its own. A hand-over the board refuses (the
    bidder chosen is gone from the task, nobody is left) ends the run failed, saying why."""
    who = decided.decided_by or "a person"
    given_up = HandOver(
        agent_id=award.agent_id,
        award_token=award.award_token,
        to_agent=decision.reassign_to,
        escalation_id=decided.escalation_id,
        decided_by=who,
    )
    try:
        board = await tasks(award.task_id).hand_over(given_up)
    except AgoraError as exc:
        if not exc.permanent:
            raise
        reason = f"reassign by {who} could not be done: {exc.code}: {exc.message}"[:MAX_NOTE_CHARS]
        ended = saved.model_copy(update={"status": RunStatus.FAILED, "reason": reason})
        await store.save(ended)
        return RunProgress(outcome=_outcome_of(agent, award, ended))
    successor = board.awards[-1].agent_id if board.awards else "another agent"
    reason = f"handed over to {successor} by {who}"[:MAX_NOTE_CHARS]
    await store.save(
        saved.model_copy(update={"status": RunStatus.FAILED, "reason": reason, "handed_over": True})
    )
    return RunProgress(handed_over=True)


async def _progress(
    agent: Agent, award: TaskAwarded, store: AgentStateStore, running: Awaitable[ExecutionResult]
) -> RunProgress:
    try:
        run = await running
    except AgoraError as exc:
        reason = failure_summary(exc)
        spent = await store.load(award.agent_id, award.task_id)
        if spent is None:
            return RunProgress(outcome=failed_outcome(award, reason))
        failed = spent.model_copy(update={"status": RunStatus.FAILED, "output": "", "reason": reason})
        return RunProgress(outcome=_outcome_of(agent, award, failed))
    if run.status is RunStatus.WAITING_FOR_HUMAN:
        return RunProgress(waiting_on=run.escalation_id)
    return RunProgress(
        outcome=TaskOutcome(
            task_id=award.task_id,
            agent_id=award.agent_id,
            actual_success=run.status is RunStatus.COMPLETED,
            actual_cost_usd=charged(agent, run.total_cost_usd, run.iterations),
            actual_steps=run.iterations,
            summary=_summary(run.status, run.output, run.reason),
            input_tokens=run.input_tokens,
            output_tokens=run.output_tokens,
            tools_called=run.tools_called,
            award_token=award.award_token,
        )
    )


def charged(agent: Agent, model_cost_usd: float, steps: int) -> float:
    """What a run cost: its model calls at their prices, plus the agent's own price for each
    step (`cost_per_step_usd`: what it charges for its work, as its bids say)."""
    return round(model_cost_usd + steps * agent.profile.cost_per_step_usd, 6)


def _summary(status: RunStatus, output: str, reason: str) -> str:
    """An outcome's summary: the answer of a run that completed, why one that failed did."""
    said = (reason or output) if status is RunStatus.FAILED else (output or reason)
    return said[:MAX_TEXT_CHARS]


def _progress_of(agent: Agent, award: TaskAwarded, state: AgentState) -> RunProgress:
    if state.status is RunStatus.WAITING_FOR_HUMAN:
        return RunProgress(waiting_on=state.escalation_id)
    if state.handed_over:
        return RunProgress(handed_over=True)
    return RunProgress(outcome=_outcome_of(agent, award, state))


def _outcome_of(agent: Agent, award: TaskAwarded, state: AgentState) -> TaskOutcome:
    """The outcome a saved run's state shows (a run that ended, or is ended now)."""
    return TaskOutcome(
        task_id=award.task_id,
        agent_id=award.agent_id,
        actual_success=state.status is RunStatus.COMPLETED,
        actual_cost_usd=charged(agent, state.cost_usd, state.iterations),
        actual_steps=state.iterations,
        summary=_summary(state.status, state.output, state.reason),
        input_tokens=state.input_tokens,
        output_tokens=state.output_tokens,
        tools_called=state.tools_called,
        award_token=award.award_token,
    )


async def _renew(registry: RegistryClient, profiles: list[CapabilityProfile], lease_seconds: int) -> None:
    interval = lease_seconds / 3
    while True:
        await asyncio.sleep(interval)
        try:
            for profile in profiles:
                await registry.register(profile, lease_seconds=lease_seconds)
        except Exception as exc:  # the registry restarting: try again soon
            log.warning("renewing the agents' leases failed; retrying", extra={"reason": repr(exc)[:300]})
            await asyncio.sleep(RENEW_RETRY_SECONDS)


def load_agents(path: Path) -> list[Agent]:
    """The agents a Python file defines: its `agents` list, else every module-level `Agent`."""
    agents, _ = load_app(path)
    if not agents:
        raise ValueError(f"{path} defines no agents (an `agents` list of `Agent`, or module-level `Agent`s)")
    return agents


def load_apps(paths: Sequence[Path]) -> tuple[list[Agent], list[CompiledGraph[Any]]]:
    """The agents and graphs of several files (`load_app` each), together."""
    agents: list[Agent] = []
    graphs: list[CompiledGraph[Any]] = []
    for path in paths:
        more_agents, more_graphs = load_app(path)
        agents += more_agents
        graphs += more_graphs
    return agents, graphs


def file_list(value: str) -> list[Path]:
    """The files named in a setting that may name several (separated like PATH entries)."""
    return [Path(entry) for entry in value.split(os.pathsep) if entry]


def load_app(path: Path) -> tuple[list[Agent], list[CompiledGraph[Any]]]:
    """What a Python file puts in an agent app: its agents (its `agents` list, else every
    module-level `Agent`) and its graphs (its `graphs` list, else every module-level compiled
    graph). One of the two may be empty, not both."""
    spec = importlib.util.spec_from_file_location(f"agora_agents_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agents = _declared(module, "agents", Agent)
    graphs = _declared(module, "graphs", CompiledGraph)
    if not agents and not graphs:
        raise ValueError(f"{path} defines no agents and no graphs (an `agents` or `graphs` list)")
    return agents, graphs


def _declared(module: Any, name: str, kind: type[T]) -> list[T]:
    declared = getattr(module, name, None)
    found = (
        list(declared) if declared is not None else [v for v in vars(module).values() if isinstance(v, kind)]
    )
    if not all(isinstance(item, kind) for item in found):
        raise ValueError(f"`{name}` lists something that is not a {kind.__name__}")
    return found


def create_agent_app(
    agents: Sequence[Agent],
    settings: AgentAppSettings | None = None,
    graphs: Sequence[CompiledGraph[Any]] = (),
) -> FastAPI:
    settings = settings or AgentAppSettings()
    return create_service_app(settings, [agent_app_module(agents, settings, graphs)])


def serve_agents(
    agents: Sequence[Agent],
    settings: AgentAppSettings | None = None,
    graphs: Sequence[CompiledGraph[Any]] = (),
) -> None:
    """Serve `agents` (and `graphs`) as an agent app beside its own daprd (blocks until stopped)."""
    settings = settings or AgentAppSettings()
    serve(create_agent_app(agents, settings, graphs), settings)
