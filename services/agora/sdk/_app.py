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

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI

from agora.core import topics
from agora.core.contracts import A2AAgentsJoined
from agora.core.task_waits import TaskLink
from agora.runtime.actor_client import ActorClient
from agora.runtime.clients import DebateClient, PlannerClient, escalation_actors, task_actors
from agora.runtime.service import ServiceContext, ServiceModule, create_service_app, serve
from agora.sdk._a2a import A2AAgent, A2ASent
from agora.sdk._agent import Agent
from agora.sdk._app_a2a_joined import JOINED_NAMESPACE, JoinedA2AAgents
from agora.sdk._app_a2a_sent import SENT_NAMESPACE, StoredSentMessages
from agora.sdk._app_activities import RunActivities
from agora.sdk._app_deadlines import RunDeadlines
from agora.sdk._app_decisions import DecisionRelay
from agora.sdk._app_intake import AwardIntake
from agora.sdk._app_leases import AgentLeases
from agora.sdk._app_meter import RunMeter
from agora.sdk._app_routes import add_routes
from agora.sdk._app_run_feeds import RunFeeds, run_event_streams
from agora.sdk._app_settings import AgentAppSettings
from agora.sdk._app_stores import (
    LEARNING_NAMESPACE,
    STATE_NAMESPACE,
    BoardProgress,
    DaprAgentStateStore,
    DaprOutcomeHistory,
    EscalationService,
    RecentOutcomes,
)
from agora.sdk._graph import CompiledGraph
from agora.sdk._graph_runs import GRAPH_DECISIONS, GraphRunRecord, GraphRuns, WaitLink
from agora.sdk._graph_runs import READ_DECISION as GRAPH_READ_DECISION
from agora.sdk._monitor import UncertaintyStepMonitor
from agora.sdk._runner import AgentState

__all__ = [
    "AgentAppSettings",
    "agent_app_module",
    "create_agent_app",
    "serve_agents",
]

GRAPH_RUN_NAMESPACE = "graph:run"
GRAPH_TASK_NAMESPACE = "graph:task"
GRAPH_WAIT_NAMESPACE = "graph:wait"


def agent_app_module(
    agents: Sequence[Agent], settings: AgentAppSettings, graphs: Sequence[CompiledGraph[Any]] = ()
) -> ServiceModule:
    by_id = {agent.agent_id: agent for agent in agents}
    if len(by_id) != len(agents):
        raise ValueError("two agents of this app have one agent id")
    if not agents and not graphs:
        raise ValueError("an agent app needs at least one agent or graph")

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        """Wire the app's parts to its sidecar: the stores its runners keep their states and
        outcomes in, the run's workflow and activities, its graphs' runs, its routes, and the
        awards and decisions it takes."""
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
        tasks = task_actors(actors)
        progress = BoardProgress(tasks)
        sent = StoredSentMessages(ctx.repository(SENT_NAMESPACE, A2ASent), settings.retention_seconds)

        def equip(agent: Agent) -> None:
            """The app's stores and services, given to an agent it serves (at the start, or
            joined later through its API)."""
            agent.escalator = escalator
            agent.progress = progress
            if isinstance(agent, A2AAgent):
                agent.sent = sent
            if agent.runner is not None:
                agent.runner.attach(state_store=store, cost_publisher=meter, monitor=monitor,
                                    escalator=escalator, outcomes=outcomes)  # fmt: skip

        for agent in agents:
            equip(agent)
        deadlines = RunDeadlines(by_id, store, meter, tasks)
        feeds = RunFeeds()
        activities = RunActivities(
            by_id,
            store,
            monitor,
            meter,
            deadlines,
            tasks,
            ctx.publisher,
            app_id=settings.app_id,
            dapr_http_endpoint=settings.dapr_http_endpoint,
            max_runs_in_flight=settings.max_runs_in_flight,
            feeds=feeds,
        )
        host = ctx.workflows()
        activities.register(host)
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
        host.activity(GRAPH_READ_DECISION, GRAPH_DECISIONS.reading(escalation_actors(actors)))
        graph_runs.subscribe(ctx.subscriptions)
        joined = JoinedA2AAgents(
            ctx.repository(JOINED_NAMESPACE, A2AAgentsJoined), by_id, settings.dapr_http_endpoint, equip
        )
        leases.joined = joined
        add_routes(app, by_id, graph_runs, joined, leases, run_event_streams(feeds), feeds)
        intake = AwardIntake(by_id, tasks, host, activities, ctx.spawn, settings.inline_run_seconds)
        ctx.subscriptions.subscribe(topics.TASK_AWARDED, intake.on_award, idempotent=True)
        ctx.subscriptions.subscribe(topics.TASK_CANCELLED, intake.on_cancelled, idempotent=True)
        relay = DecisionRelay(by_id, tasks, host, escalation_actors(actors), graph_runs)
        ctx.subscriptions.subscribe(topics.ESCALATION_RESOLVED, relay.on_resolved, idempotent=True)

    leases = AgentLeases(by_id, settings)
    return ServiceModule("agents", setup=setup, warm_up=leases.warm_up, stop=leases.stop)


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
