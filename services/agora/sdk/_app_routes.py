"""An agent app's HTTP routes: bids for its agents (`POST /v1/bids`), what an agent learnt, its
graphs' runs, and the A2A agents a person joins to it. The handlers are functions of what they
read, so each runs without the app."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import FastAPI, Header, Request
from fastapi.responses import StreamingResponse

from agora.core.contracts import (
    A2AAgentJoin,
    A2AAgentJoined,
    A2AAgentsJoined,
    AgentLearning,
    BidOffer,
    BidSolicitation,
)
from agora.core.errors import BidTooLate, InvalidArgument, NotFound
from agora.runtime.event_streams import (
    EVENT_ROUTE,
    EventStreams,
    event_stream_response,
    last_seen,
    state_streams,
)
from agora.runtime.service import PathId
from agora.sdk._agent import Agent
from agora.sdk._app_a2a_joined import JoinedA2AAgents
from agora.sdk._app_leases import AgentLeases
from agora.sdk._app_run_feeds import RunFeeds, RunLog
from agora.sdk._graph_runs import ENDED, GraphRunAccepted, GraphRunRecord, GraphRuns
from agora.sdk._runner import RunEvent

__all__ = ["add_routes", "agent_bid", "agent_learning"]


async def agent_bid(agents: dict[str, Agent], solicitation: BidSolicitation) -> BidOffer:
    """The agent's own estimate of the task, within the time the market waits for it."""
    agent = agents.get(solicitation.agent_id)
    if agent is None:
        raise NotFound(f"no agent {solicitation.agent_id!r} in this app", agent_id=solicitation.agent_id)
    if not agent.profile.skill_tags or not set(solicitation.task.required_skills) <= set(
        agent.profile.skill_tags
    ):
        raise InvalidArgument(f"agent {agent.agent_id} lacks a required skill of the task")
    try:
        async with asyncio.timeout(solicitation.respond_within_ms / 1000):
            return await agent.bid(solicitation.task)
    except TimeoutError:
        raise BidTooLate(
            f"agent {agent.agent_id} did not estimate the task within {solicitation.respond_within_ms} ms",
            agent_id=agent.agent_id,
        ) from None


async def agent_learning(agents: dict[str, Agent], agent_id: str) -> AgentLearning:
    """What an agent learnt from its recent runs, and how its patterns fare."""
    agent = agents.get(agent_id)
    if agent is None:
        raise NotFound(f"no agent {agent_id!r} in this app", agent_id=agent_id)
    if agent.runner is None:
        return AgentLearning(agent_id=agent_id, outcomes=0, patterns=[], effectiveness=[])
    return await agent.runner.learning(agent_id)


def add_routes(
    app: FastAPI,
    agents: dict[str, Agent],
    graph_runs: GraphRuns,
    joined: JoinedA2AAgents,
    leases: AgentLeases,
    run_streams: EventStreams[RunLog, tuple[int, RunEvent]],
    feeds: RunFeeds,
) -> None:
    @app.get("/v1/runs/{task_id}/events", **EVENT_ROUTE)
    async def run_event_stream(
        task_id: PathId, last_event_id: Annotated[str | None, Header()] = None
    ) -> StreamingResponse:
        """The events of the task's run going on in this app (each model step, each tool's
        result, the model's text as it streams, the end), as Server-Sent Events from after
        `Last-Event-ID`, live until the run ends (then an `end` event); 404 when no run of the
        task goes on here."""
        log = feeds.log_of(task_id)
        return event_stream_response(run_streams.stream(task_id, log, last_seen(last_event_id)))

    @app.get("/v1/a2a-agents", response_model=A2AAgentsJoined)
    async def joined_a2a_agents() -> A2AAgentsJoined:
        """The A2A agents people joined to this app (not those of its files and settings)."""
        return await joined.listed()

    @app.put("/v1/a2a-agents/{agent_id}", response_model=A2AAgentJoined)
    async def join_a2a_agent(agent_id: PathId, join: A2AAgentJoin) -> A2AAgentJoined:
        """Put the A2A agent whose card is at `card_url` on the market as `agent_id`, from this
        app (every replica of it serves it); its card must be readable now."""
        entry = await joined.join(agent_id, join)
        await leases.register_now(agent_id)
        return entry

    @app.delete("/v1/a2a-agents/{agent_id}", response_model=A2AAgentJoined)
    async def leave_a2a_agent(agent_id: PathId) -> A2AAgentJoined:
        """Take a joined A2A agent off the market (its lease cut to the shortest); a run of it
        under way finishes."""
        entry = await joined.leave(agent_id)
        await leases.register_now(agent_id)
        return entry

    @app.put("/v1/graphs/{graph_id}/runs/{run_id}", response_model=GraphRunAccepted)
    async def start_graph_run(graph_id: PathId, run_id: PathId, request: Request) -> GraphRunAccepted:
        """Start a run of the graph on the state in the body (the graph's state as JSON);
        the same request again is a repeat."""
        return await graph_runs.start(graph_id, run_id, await request.body())

    @app.get("/v1/graphs/{graph_id}/runs/{run_id}", response_model=GraphRunRecord)
    async def show_graph_run(graph_id: PathId, run_id: PathId) -> GraphRunRecord:
        return await graph_runs.show(graph_id, run_id)

    graph_run_streams = state_streams(
        "graph_run", lambda key: graph_runs.show(*key.split("/", 1)), lambda record: record.status in ENDED
    )

    @app.get("/v1/graphs/{graph_id}/runs/{run_id}/events", **EVENT_ROUTE)
    async def graph_run_event_stream(
        graph_id: PathId, run_id: PathId, last_event_id: Annotated[str | None, Header()] = None
    ) -> StreamingResponse:
        """The run as it is, then each change of it (a node run, a wait, its end), as Server-Sent
        Events (`graph_run`, the record; its id the record's revision + 1), from after
        `Last-Event-ID`, until it ends (then an `end` event)."""
        record = await graph_runs.show(graph_id, run_id)  # an unknown run: 404 before any event
        key = f"{graph_id}/{run_id}"
        return event_stream_response(graph_run_streams.stream(key, record, last_seen(last_event_id)))

    @app.get("/v1/agents/{agent_id}/learning", response_model=AgentLearning)
    async def learning(agent_id: PathId) -> AgentLearning:
        """What an agent learnt from its recent runs, and how its patterns fare."""
        return await agent_learning(agents, agent_id)

    @app.post("/v1/bids", response_model=BidOffer)
    async def bid(solicitation: BidSolicitation) -> BidOffer:
        return await agent_bid(agents, solicitation)
