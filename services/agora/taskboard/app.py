"""The task board app: hosts `Task` actors and answers task queries."""

from __future__ import annotations

import contextlib
import hashlib
from datetime import UTC, datetime
from typing import Annotated

from fastapi import FastAPI, Header
from fastapi.responses import StreamingResponse
from pydantic import Field

from agora.core import task_lifecycle as lifecycle
from agora.core import topics
from agora.core.acceptance import CHECKER_FIRST_RETRY_S, checker_backoff
from agora.core.contracts import TaskList, TaskPublished
from agora.core.errors import NotFound
from agora.core.escalation.record import WaitingPartyKind
from agora.core.market import AllocationStatus, TaskSpec
from agora.core.messages import EscalationResolved, TaskCancel, TaskDispute
from agora.core.task_lifecycle import (
    CHECK_ESCALATION_PREFIX,
    DEFAULT_ACK_SECONDS,
    MAX_ACK_SECONDS,
    TaskRecord,
)
from agora.core.topics import TASKS
from agora.llm import ModelSettings, model_client_from_settings
from agora.runtime.actor_client import ActorClient
from agora.runtime.checkers import Checkers
from agora.runtime.clients import agent_runs_actors, escalation_actors, task_actors
from agora.runtime.event_streams import (
    DEFAULT_BUFFER_EVENTS,
    DEFAULT_POLL_SECONDS,
    EVENT_ROUTE,
    event_stream_response,
    last_seen,
)
from agora.runtime.service import PathId, ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings
from agora.runtime.status_index import IdSet, StatusIndex
from agora.taskboard.actors import QUEUE_RETRY_SECONDS, STATUS_INDEX_NAMESPACE, Task, TaskBoardDeps
from agora.taskboard.agent_runs import AgentRuns
from agora.taskboard.award_watch import DEFAULT_SWEEP_SECONDS, AwardWatch
from agora.taskboard.event_streams import TaskEventStreams
from agora.taskboard.judge import Judge
from agora.taskboard.listings import TaskListings
from agora.taskboard.run_slots import RunSlots

APP_ID = "taskboard"


class TaskBoardSettings(ServiceSettings):
    app_id: str = APP_ID
    award_ack_seconds: float = Field(default=DEFAULT_ACK_SECONDS, gt=0, le=MAX_ACK_SECONDS)
    """AGORA_AWARD_ACK_SECONDS: how long a winner's runtime has to acknowledge an award (the
    task's `deadline_ms` when shorter) before the next-best bid gets it."""
    event_poll_seconds: float = Field(default=DEFAULT_POLL_SECONDS, gt=0, le=10)
    """AGORA_EVENT_POLL_SECONDS: how often a watched task's record is read for its event
    streams (one read per watched task per replica, whatever the number of watchers)."""
    event_buffer: int = Field(default=DEFAULT_BUFFER_EVENTS, ge=1, le=10_000)
    """AGORA_EVENT_BUFFER: events a watcher may leave unread before it is dropped (with the
    reason; it resumes with Last-Event-ID)."""
    checker_retry_seconds: float = Field(default=CHECKER_FIRST_RETRY_S, gt=0, le=60)
    """AGORA_CHECKER_RETRY_SECONDS: how long the board waits before asking a task's checker app
    again when it did not answer (each next wait four times longer; `CHECKER_ATTEMPTS` tries)."""
    people_apps: list[str] = Field(default_factory=lambda: ["console"], max_length=16)
    """AGORA_PEOPLE_APPS: the apps people act through (their disputes name the person). Any
    other app disputes only the tasks that answer to it, in its own name."""
    award_sweep_seconds: float = Field(default=DEFAULT_SWEEP_SECONDS, gt=0, le=60)
    """AGORA_AWARD_SWEEP_SECONDS: how often this replica looks for awards whose acknowledgment
    window has ended (a window ends up to this much late)."""
    run_limits: bool = True
    """AGORA_RUN_LIMITS: hold every award to its agent's `max_concurrent_runs` (false: award
    agents any number of runs at once, as a market of agents that scale themselves may want)."""
    queue_retry_seconds: float = Field(default=QUEUE_RETRY_SECONDS, ge=1, le=3600)
    """AGORA_QUEUE_RETRY_SECONDS: how often a task waiting for a run slot is tried again besides
    the announcements of freed slots (what a lost announcement can delay it by)."""


def taskboard_module(settings: TaskBoardSettings | None = None) -> ServiceModule:
    settings = settings or TaskBoardSettings()

    watch: dict[str, AwardWatch] = {}

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        listings = TaskListings(settings.retention_seconds)
        index = StatusIndex(ctx.repository(STATUS_INDEX_NAMESPACE, IdSet), ttl_seconds=listings.ttl_seconds)
        tasks = task_actors(ActorClient(ctx.sidecar))
        readers = task_actors(ActorClient.for_reads(ctx.sidecar))
        runs = agent_runs_actors(ActorClient(ctx.sidecar))
        slots = RunSlots(runs, tasks, readers, ctx.spawn)
        ctx.host_actor(AgentRuns, None)
        ctx.host_actor(
            Task,
            TaskBoardDeps(
                ctx.publisher,
                index,
                Checkers(ctx.sidecar),
                settings.award_ack_seconds,
                settings.retention_seconds,
                checker_backoff(settings.checker_retry_seconds),
                Judge(model_client_from_settings(ModelSettings(), ctx.sidecar)),
                escalation_actors(ActorClient(ctx.sidecar)),
                agent_runs=runs if settings.run_limits else None,
                queue_retry_seconds=settings.queue_retry_seconds,
                full_agent_seen=slots.full_agent_seen,
            ),
        )
        ctx.subscriptions.subscribe(topics.AGENT_RUN_FREED, slots.on_run_freed)
        watch["watch"] = AwardWatch(index, tasks)

        @app.get("/v1/tasks", response_model=TaskList)
        async def list_tasks(status: AllocationStatus) -> TaskList:
            listed = await index.list_all(listings.listings_of(status, datetime.now(UTC)))
            return TaskList(status=status, task_ids=listed)

        @app.post("/v1/tasks", response_model=TaskPublished, status_code=202)
        async def publish_task(spec: TaskSpec) -> TaskPublished:
            """For clients that reach the board but not the broker (the console's MCP tools):
            the task goes to the market's topic from here. The same task published again is the
            same message (its id is its content's digest), taken once."""
            digest = hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:32]
            event_id = await ctx.publisher.publish(TASKS, spec, message_id=f"task-{digest}")
            return TaskPublished(task_id=spec.task_id, event_id=event_id)

        @app.get("/v1/tasks/{task_id}", response_model=TaskRecord)
        async def show_task(task_id: PathId) -> TaskRecord:
            return await readers(task_id).get_task()

        @app.post("/v1/tasks/{task_id}/cancel", response_model=TaskRecord)
        async def cancel_task(task_id: PathId, cancel: TaskCancel) -> TaskRecord:
            """A person cancels the task (the console's people; its access policy admits no
            other app): the task as it stands after the cancel. An ended task is refused
            (409 `TASK_ENDED`); a cancelled one is answered as it is."""
            return await tasks(task_id).cancel(cancel)

        @app.post("/v1/tasks/{task_id}/dispute", response_model=TaskRecord)
        async def dispute_task(
            task_id: PathId, dispute: TaskDispute, dapr_caller_app_id: str | None = Header(default=None)
        ) -> TaskRecord:
            """A person (through one of `people_apps`) or the app the task answers to (its
            `reply_to`, in its own name) disputes the task's finished outcome within its
            window: the task as it stands after, its verdict and end as the dispute says. One
            without an outcome, past its window or disputed already is refused (409
            `NOT_DISPUTABLE`); the same dispute again is answered as it is; another app's is
            refused (403 `FORBIDDEN`). The caller is who its sidecar says it is (Dapr's
            `dapr-caller-app-id`; the access policy admits the callers)."""
            caller = dapr_caller_app_id
            if caller is not None and caller != settings.app_id and caller not in settings.people_apps:
                lifecycle.check_app_dispute(await readers(task_id).get_task(), caller, dispute.disputed_by)
            return await tasks(task_id).dispute(dispute)

        async def on_resolved(event: EscalationResolved) -> None:
            """A person decided an escalation: one of a task's failed check is applied by its
            `Task` actor, which reads the decision off the escalation's own record (the
            announcement only says when to look)."""
            if event.waiting_party.kind is WaitingPartyKind.TASK and event.escalation_id.startswith(
                CHECK_ESCALATION_PREFIX
            ):
                with contextlib.suppress(NotFound):  # no such task here: not the board's to apply
                    await tasks(event.waiting_party.id).person_decided()

        ctx.subscriptions.subscribe(topics.ESCALATION_RESOLVED, on_resolved, idempotent=True)

        streams = TaskEventStreams(
            lambda task_id: readers(task_id).get_task(),
            poll_seconds=settings.event_poll_seconds,
            buffer_events=settings.event_buffer,
        )

        @app.get("/v1/tasks/{task_id}/events", **EVENT_ROUTE)
        async def task_event_stream(
            task_id: PathId, last_event_id: Annotated[str | None, Header()] = None
        ) -> StreamingResponse:
            """The task's events as Server-Sent Events, from after `Last-Event-ID`, live until
            its final status (then an `end` event)."""
            record = await readers(task_id).get_task()  # an unknown task: 404 before any event
            return event_stream_response(streams.stream(task_id, record, last_seen(last_event_id)))

    async def warm_up(ctx: ServiceContext) -> None:
        ctx.spawn_daemon(
            watch["watch"].sweep_forever(settings.award_sweep_seconds, settings.award_ack_seconds),
            name="award watch",
        )

    return ServiceModule("taskboard", setup=setup, warm_up=warm_up)


def create_app(settings: TaskBoardSettings | None = None) -> FastAPI:
    settings = settings or TaskBoardSettings()
    return create_service_app(settings, [taskboard_module(settings)])


def main() -> None:
    settings = TaskBoardSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
