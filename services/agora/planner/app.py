"""The planner app: takes plan requests (`agora.plans`, `PUT /v1/plans/{id}`), runs each plan as
a Dapr workflow (`agora.planner.workflow`), and shows plans (`GET /v1/plans...`).

It also hears how the plans' market tasks end (`agora.task.outcome.recorded`, the board's own
word; `agora.task.rejected`, and `agora.task.award_lapsed` when the board failed a task nobody
acknowledged: only for tasks that name this app as their `reply_to`) and how their escalations
are decided (`agora.escalation.resolved`), and passes each on to the workflow that waits for it
as an external event: only after the source of truth agrees (the `Task` actor holds the
rejection or failure; the `Escalation` actor holds the decision), and only for tasks a plan
posted (`planner:task:<task id>` names its workflow).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import FastAPI, Header, Query
from starlette.responses import StreamingResponse

from agora.core import topics
from agora.core.errors import NotFound, conflict_between
from agora.core.escalation.record import WaitingPartyKind
from agora.core.limits import MAX_PAGE_SIZE
from agora.core.messages import EscalationResolved
from agora.core.plans.record import FINAL_STATES, PlanAccepted, PlanList, PlanRecord, PlanState, new_record
from agora.core.plans.request import PlanId, PlanRequest, PlanSubmission, submission_of
from agora.core.plans.run import given_plan
from agora.core.task_waits import TaskEnded, TaskLink
from agora.llm import ModelSettings, model_client_from_settings
from agora.planner import steps
from agora.planner.activities import PlannerActivities
from agora.planner.workflow import (
    PLAN_DECISIONS,
    PLAN_RUN,
    READ_DECISION,
    SUBGOAL_RUN,
    PlanStart,
    plan_failed,
    plan_run,
    subgoal_run,
)
from agora.runtime.actor_client import ActorClient
from agora.runtime.clients import escalation_actors, task_actors
from agora.runtime.decision_watch import DecisionWatch
from agora.runtime.event_streams import (
    EVENT_ROUTE,
    event_stream_response,
    last_seen,
    state_streams,
)
from agora.runtime.service import (
    PathId,
    ServiceContext,
    ServiceModule,
    check_deadline_ahead,
    create_service_app,
    serve,
)
from agora.runtime.settings import ServiceSettings
from agora.runtime.status_index import IdSet, StatusIndex
from agora.runtime.task_ends import TaskEndRelay
from agora.runtime.workflows import RunRecords, run_trace

log = logging.getLogger(__name__)

APP_ID = "planner"
PLAN_NAMESPACE = "planner:plan"
STATUS_INDEX_NAMESPACE = "planner:status"
TASK_LINK_NAMESPACE = "planner:task"


class PlannerSettings(ServiceSettings):
    app_id: str = APP_ID


def planner_module(settings: PlannerSettings | None = None) -> ServiceModule:
    settings = settings or PlannerSettings()

    watches: list[DecisionWatch[Any, Any]] = []

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        actors = ActorClient(ctx.sidecar)
        tasks, escalations = task_actors(actors), escalation_actors(actors)
        plans = RunRecords(
            ctx.repository(PLAN_NAMESPACE, PlanRecord),
            StatusIndex(ctx.repository(STATUS_INDEX_NAMESPACE, IdSet)),
            lambda record: str(record.state),
            lambda record: record.created_at,
        )
        links = ctx.repository(TASK_LINK_NAMESPACE, TaskLink)
        model = model_client_from_settings(
            ModelSettings(), ctx.sidecar, offline_answers=steps.offline_answers
        )
        host = ctx.workflows()
        host.workflow(PLAN_RUN, plan_run, on_failure=plan_failed)
        host.workflow(SUBGOAL_RUN, subgoal_run)
        PlannerActivities(model, ctx.publisher, plans, links, tasks, escalations).register(host)
        host.activity(READ_DECISION, PLAN_DECISIONS.reading(escalations))

        async def earlier_request(plan_id: str) -> PlanSubmission | None:
            """What a plan of this id was asked for: its record, or (scheduled a moment ago, not
            saved yet) its workflow's input."""
            record = await plans.get(plan_id)
            if record is not None:
                return record.request
            started = await host.input_of(plan_id, PlanStart)
            return submission_of(started.request) if started is not None else None

        async def repeat(request: PlanRequest, earlier: PlanSubmission) -> PlanAccepted:
            """The same request again is a repeat (a redelivery, a caller's retry); another
            request under a used id is refused, naming what differs."""
            if earlier != submission_of(request):
                raise conflict_between("plan", request.plan_id, earlier, submission_of(request))
            await host.wake_if_pending(request.plan_id)  # asked again: a run stuck before its start goes
            existing = await plans.get(request.plan_id)
            state = existing.state if existing is not None else PlanState.PLANNING
            return PlanAccepted(plan_id=request.plan_id, state=state, created=False)

        async def start(request: PlanRequest) -> PlanAccepted:
            """Start the plan's workflow unless a plan with this id exists (idempotent). A plan
            the request brings must validate (`InvalidPlan` names every problem); a deadline
            must still be ahead."""
            given_plan(request)
            earlier = await earlier_request(request.plan_id)
            if earlier is not None:
                return await repeat(request, earlier)
            check_deadline_ahead(request.deadline)
            traceparent, parent = run_trace(request.plan_id, "run")
            start = PlanStart(request=request, traceparent=traceparent, parent_traceparent=parent)
            if not await host.start_once(PLAN_RUN, request.plan_id, start):
                earlier = await earlier_request(request.plan_id)  # scheduled by a racing request
                if earlier is not None:
                    return await repeat(request, earlier)
                return PlanAccepted(plan_id=request.plan_id, state=PlanState.PLANNING, created=False)
            log.info("plan started", extra={"plan_id": request.plan_id})
            return PlanAccepted(plan_id=request.plan_id, state=PlanState.PLANNING, created=True)

        @app.put("/v1/plans/{plan_id}", response_model=PlanAccepted)
        async def submit(plan_id: PlanId, submission: PlanSubmission) -> PlanAccepted:
            return await start(PlanRequest(plan_id=plan_id, **submission.model_dump()))

        async def read_plan(plan_id: str) -> PlanRecord:
            """The plan's record, or the record of one whose workflow is scheduled but has not
            written it yet."""
            found = await plans.get(plan_id)
            if found is not None:
                return found
            starting = await host.starting(plan_id, PlanStart)
            if starting is None:
                raise NotFound(f"no plan {plan_id}", plan_id=plan_id)
            begin, scheduled_at = starting
            return new_record(begin.request, scheduled_at).model_copy(
                update={"traceparent": begin.traceparent}
            )

        @app.get("/v1/plans/{plan_id}", response_model=PlanRecord)
        async def show(plan_id: PathId) -> PlanRecord:
            return await read_plan(plan_id)

        plan_streams = state_streams("plan", read_plan, lambda record: record.state in FINAL_STATES)

        @app.get("/v1/plans/{plan_id}/events", **EVENT_ROUTE)
        async def plan_event_stream(
            plan_id: PathId, last_event_id: Annotated[str | None, Header()] = None
        ) -> StreamingResponse:
            """The plan as it is, then each change of it, as Server-Sent Events (`plan`, the
            record; its id the record's revision + 1), from after `Last-Event-ID`, until it
            ends (then an `end` event)."""
            record = await read_plan(plan_id)  # an unknown plan: 404 before any event
            return event_stream_response(plan_streams.stream(plan_id, record, last_seen(last_event_id)))

        @app.get("/v1/plans", response_model=PlanList)
        async def list_plans(
            state: PlanState | None = None,
            limit: int = Query(default=50, ge=1, le=MAX_PAGE_SIZE),
            offset: int = Query(default=0, ge=0),
        ) -> PlanList:
            """One page of the plans in `state` (by id), or with no state of every plan (newest first)."""
            total, page = await plans.page(str(state) if state is not None else None, limit, offset)
            return PlanList(state=state, total=total, plans=page)

        async def on_plan(request: PlanRequest) -> None:
            await start(request)

        async def raise_ended(instance_id: str, event: str, ended: TaskEnded) -> None:
            await host.client.raise_workflow_event(instance_id, event, data=ended.model_dump(mode="json"))

        TaskEndRelay(links, tasks, raise_ended).subscribe(ctx.subscriptions)

        async def on_resolved(event: EscalationResolved) -> None:
            if event.waiting_party.kind is WaitingPartyKind.PLAN_STEP:
                await PLAN_DECISIONS.relay(host, escalations, event, event.waiting_party.id)

        ctx.subscriptions.subscribe(topics.PLANS, on_plan)
        ctx.subscriptions.subscribe(topics.ESCALATION_RESOLVED, on_resolved, idempotent=True)
        watch = DecisionWatch(
            plans,
            str(PlanState.WAITING_FOR_HUMAN),
            lambda record: record.plan_id,
            lambda record: record.stop.escalation_id if record.stop is not None else None,
            PLAN_DECISIONS,
            host,
            escalations,
        )
        watches.append(watch)

    async def warm_up(ctx: ServiceContext) -> None:
        for watch in watches:
            ctx.spawn_daemon(watch.watch_forever(), name="plan decision watch")

    return ServiceModule("planner", setup=setup, warm_up=warm_up)


def create_app(settings: PlannerSettings | None = None) -> FastAPI:
    settings = settings or PlannerSettings()
    return create_service_app(settings, [planner_module(settings)])


def main() -> None:
    settings = PlannerSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
