"""The console's read-only pages of the work the escalations belong to: the task board by
status and each task with its bids, scores and outcome; plans and their waves; debates and
their rounds; the agents with their reputation. Each page refreshes itself while open (the
script swaps in the part marked live when it changed)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import Response

from agora.console.settings import ConsoleSettings
from agora.console.traces import JaegerTraces, TracesUnavailable
from agora.core.errors import AgoraError, NotFound
from agora.core.limits import ID_PATTERN, MAX_ID_CHARS
from agora.core.market import AllocationStatus, ReputationRecord
from agora.runtime.clients import (
    DebateClient,
    PlannerClient,
    RegistryClient,
    ReputationClient,
    TaskBoardClient,
)
from agora.runtime.event_streams import event_stream_response
from agora.runtime.sidecar import DaprError, DaprSidecar, SidecarUnavailable

__all__ = ["BOARD_PAGE_SIZE", "Unavailable", "checked_id", "install_boards", "link", "service_answer"]

BOARD_PAGE_SIZE = 50
"""Plans and debates listed (the newest first), and task ids shown per status."""
READS_AT_ONCE = 8

T = TypeVar("T")


class Unavailable(Exception):
    """A page whose service did not answer (or has no such record): status and a sentence."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def link(kind: str, record_id: str) -> str:
    return f"/{kind}/{quote(record_id, safe='')}"


def checked_id(record_id: str, what: str) -> str:
    if len(record_id) > MAX_ID_CHARS or not re.match(ID_PATTERN, record_id):
        raise Unavailable(404, f"there is no {what} with that id")
    return record_id


async def service_answer(call: Awaitable[T], what: str) -> T:
    try:
        return await call
    except NotFound:
        raise Unavailable(404, f"there is no such {what}") from None
    except (DaprError, SidecarUnavailable, AgoraError):
        raise Unavailable(
            503, f"the service holding the {what} is not answering; try again in a moment"
        ) from None


async def _relayed(stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """A service's event stream as it comes; its refusal, or its end by a failure, as a last
    `unavailable` event (the page goes on refreshing itself without it)."""
    try:
        async for chunk in stream:
            yield chunk
    except (DaprError, SidecarUnavailable, AgoraError) as exc:
        reason = "there is no such task" if isinstance(exc, NotFound) else "the task board is not answering"
        yield f"event: unavailable\ndata: {json.dumps({'reason': reason})}\n\n".encode()


def install_boards(
    app: FastAPI,
    sidecar: DaprSidecar,
    settings: ConsoleSettings,
    page: Callable[[Request, str, dict[str, Any]], Response],
    signed_in: Callable[[Request], bool],
) -> None:
    """Add the pages to `app`; `page(request, template, values)` renders one for the person
    signed in (or sends them to sign in), `signed_in(request)` says whether someone is."""
    board = TaskBoardClient(sidecar, settings.app_for("taskboard"))
    registry = RegistryClient(sidecar, settings.app_for("registry"))
    reputations = ReputationClient(sidecar, settings.app_for("reputation"))
    planner = PlannerClient(sidecar, settings.app_for("planner"))
    debater = DebateClient(sidecar, settings.app_for("debate"))
    reads = asyncio.Semaphore(READS_AT_ONCE)

    async def bounded(call: Awaitable[T]) -> T:
        async with reads:
            return await call

    @app.get("/tasks", include_in_schema=False)
    async def tasks(request: Request) -> Response:
        listings = await asyncio.gather(
            *(service_answer(board.listed(status), "task board") for status in AllocationStatus)
        )
        columns = [
            {
                "status": str(listing.status),
                "total": len(listing.task_ids),
                "tasks": [
                    {"id": t, "href": link("tasks", t)} for t in sorted(listing.task_ids)[:BOARD_PAGE_SIZE]
                ],
            }
            for listing in listings
        ]
        return page(request, "tasks.html", {"columns": columns, "shown_at_most": BOARD_PAGE_SIZE})

    @app.get("/tasks/{task_id}", include_in_schema=False)
    async def task(task_id: str, request: Request) -> Response:
        record = await service_answer(board.get(checked_id(task_id, "task")), "task")
        return page(request, "task.html", {"task": record, "traces": jaeger is not None})

    jaeger = JaegerTraces(settings.console_jaeger_url) if settings.console_jaeger_url else None

    @app.get("/tasks/{task_id}/events", include_in_schema=False)
    async def task_events(task_id: str, request: Request) -> Response:
        """The task's live events for its page (the board's stream, passed on): the page
        refreshes its live part on each. Only for a person signed in."""
        if not signed_in(request):
            return Response(status_code=401)
        checked_id(task_id, "task")
        return event_stream_response(_relayed(board.events(task_id, request.headers.get("last-event-id"))))

    @app.get("/tasks/{task_id}/trace", include_in_schema=False)
    async def task_trace(task_id: str, request: Request) -> Response:
        checked_id(task_id, "task")
        if jaeger is None:
            raise Unavailable(404, "the console has no trace store configured (AGORA_CONSOLE_JAEGER_URL)")
        try:
            found = await jaeger.task_trace(settings.app_for("allocator"), task_id)
        except TracesUnavailable as exc:
            raise Unavailable(503, f"the trace store is not answering ({exc})") from None
        return page(
            request, "trace.html", {"task_id": task_id, "timeline": found, "href": link("tasks", task_id)}
        )

    @app.get("/plans", include_in_schema=False)
    async def plans(request: Request) -> Response:
        listing = await service_answer(planner.listed(BOARD_PAGE_SIZE), "plans")
        rows = [{"plan": p, "href": link("plans", p.plan_id)} for p in listing.plans]
        return page(request, "plans.html", {"rows": rows, "total": listing.total})

    @app.get("/plans/{plan_id}", include_in_schema=False)
    async def plan(plan_id: str, request: Request) -> Response:
        record = await service_answer(planner.get(checked_id(plan_id, "plan")), "plan")
        subgoals = {s.id: s for s in record.plan.subgoals} if record.plan is not None else {}
        waves = [[subgoals[i] for i in wave if i in subgoals] for wave in record.waves]
        return page(request, "plan.html", {"plan": record, "waves": waves})

    @app.get("/debates", include_in_schema=False)
    async def debates(request: Request) -> Response:
        listing = await service_answer(debater.listed(BOARD_PAGE_SIZE), "debates")
        rows = [{"debate": d, "href": link("debates", d.debate_id)} for d in listing.debates]
        return page(request, "debates.html", {"rows": rows, "total": listing.total})

    @app.get("/debates/{debate_id}", include_in_schema=False)
    async def debate(debate_id: str, request: Request) -> Response:
        record = await service_answer(debater.get(checked_id(debate_id, "debate")), "debate")
        return page(request, "debate.html", {"debate": record})

    @app.get("/agents", include_in_schema=False)
    async def agents(request: Request) -> Response:
        listing = await service_answer(registry.agents(), "registry")

        async def reputation(agent_id: str) -> ReputationRecord | None:
            try:
                return await bounded(reputations.get(agent_id))
            except (DaprError, SidecarUnavailable, AgoraError):
                return None

        known = await asyncio.gather(*(reputation(a.agent_id) for a in listing.agents))
        rows = [{"agent": a, "reputation": r} for a, r in zip(listing.agents, known, strict=True)]
        return page(request, "agents.html", {"rows": rows})
