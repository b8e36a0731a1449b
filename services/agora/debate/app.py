"""The debate app: takes debates (`agora.debates`, `PUT /v1/debates/{id}`), runs each as a Dapr
workflow (`agora.debate.workflow`), shows them round by round (`GET /v1/debates...`), and hands
a person's decision on a split debate (`agora.escalation.resolved`, checked against the
`Escalation` actor) to the debate that waits for it."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import FastAPI, Header, Query
from starlette.responses import StreamingResponse

from agora.core import topics
from agora.core.debate.config import DebaterConfig, UnusableModel
from agora.core.debate.gate import Calibration, DebateOutcome, NotDecidable
from agora.core.debate.record import (
    FINAL_DEBATE_STATES,
    DebateAccepted,
    DebateList,
    DebateRecord,
    DebateState,
    new_debate_record,
)
from agora.core.debate.request import DebateId, DebateRequest, DebateSubmission, submission_of
from agora.core.debate.rounds import Position
from agora.core.errors import NotFound, conflict_between
from agora.core.escalation.record import WaitingPartyKind
from agora.core.limits import MAX_PAGE_SIZE
from agora.core.messages import EscalationResolved
from agora.debate import steps
from agora.debate.activities import DebateActivities
from agora.debate.workflow import (
    DEBATE_DECISIONS,
    DEBATE_RUN,
    READ_DECISION,
    Calibrate,
    DebateStart,
    debate_failed,
    debate_run,
)
from agora.llm import ModelClient, ModelSettings, model_client_from_settings
from agora.runtime.actor_client import ActorClient
from agora.runtime.batched_writes import BatchedWrites
from agora.runtime.clients import escalation_actors
from agora.runtime.decision_watch import DecisionWatch
from agora.runtime.event_streams import (
    EVENT_ROUTE,
    event_stream_response,
    last_seen,
    state_streams,
)
from agora.runtime.service import PathId, ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings
from agora.runtime.status_index import IdSet, StatusIndex
from agora.runtime.workflows import RunRecords, run_trace

log = logging.getLogger(__name__)

APP_ID = "debate"
DEBATE_NAMESPACE = "debate:record"
CALIBRATION_NAMESPACE = "debate:calibration"
STATUS_INDEX_NAMESPACE = "debate:status"
ANSWER_NAMESPACE = "debate:answer"


class DebateSettings(ServiceSettings):
    app_id: str = APP_ID


def debate_module(settings: DebateSettings | None = None) -> ServiceModule:
    settings = settings or DebateSettings()

    watches: list[DecisionWatch[Any, Any]] = []

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        escalations = escalation_actors(ActorClient(ctx.sidecar))
        debates = RunRecords(
            ctx.repository(DEBATE_NAMESPACE, DebateRecord),
            StatusIndex(ctx.repository(STATUS_INDEX_NAMESPACE, IdSet)),
            lambda record: str(record.state),
            lambda record: record.created_at,
        )
        clients: dict[tuple[str, str], ModelClient] = {}

        def model_for(debater: DebaterConfig) -> ModelClient:
            """One client per backend and model id; the rest of the settings from the environment."""
            key = (debater.backend, debater.model_id)
            if key not in clients:
                chosen = ModelSettings().model_copy(update={"backend": debater.backend})
                if debater.model_id:
                    chosen = chosen.model_copy(update={"model": debater.model_id})
                clients[key] = model_client_from_settings(
                    chosen, ctx.sidecar, offline_answers=steps.offline_answers
                )
            return clients[key]

        host = ctx.workflows()
        host.workflow(DEBATE_RUN, debate_run, on_failure=debate_failed)
        calibration = ctx.repository(CALIBRATION_NAMESPACE, Calibration)
        answers = ctx.repository(ANSWER_NAMESPACE, Position)
        activities = DebateActivities(
            model_for, ctx.publisher, debates, escalations, calibration, answers, BatchedWrites(answers)
        )
        activities.register(host)
        host.activity(READ_DECISION, DEBATE_DECISIONS.reading(escalations))

        async def start(request: DebateRequest) -> DebateAccepted:
            """Start the debate's workflow unless a debate with this id exists (the same request
            again is a repeat; another one is refused). Every model it names must be usable
            here (`UNUSABLE_MODEL` otherwise)."""
            config = request.config
            for debater in [
                *config.debaters,
                config.router,
                *([config.judge_config] if config.judge_config else []),
            ]:
                try:
                    model_for(debater)
                except ValueError as exc:
                    raise UnusableModel(f"debater {debater.debater_id}: {exc}") from exc
            earlier = await earlier_request(request.debate_id)
            if earlier is not None:
                return await repeat(request, earlier)
            traceparent, parent = run_trace(request.debate_id, "debate")
            begin = DebateStart(request=request, traceparent=traceparent, parent_traceparent=parent)
            if not await host.start_once(DEBATE_RUN, request.debate_id, begin):
                earlier = await earlier_request(request.debate_id)  # scheduled by a racing request
                if earlier is not None:
                    return await repeat(request, earlier)
                return DebateAccepted(debate_id=request.debate_id, state=DebateState.RUNNING, created=False)
            log.info("debate started", extra={"debate_id": request.debate_id})
            return DebateAccepted(debate_id=request.debate_id, state=DebateState.RUNNING, created=True)

        async def earlier_request(debate_id: str) -> DebateSubmission | None:
            """What a debate of this id was asked for: its record, or (scheduled a moment ago,
            not saved yet) its workflow's input."""
            record = await debates.get(debate_id)
            if record is not None:
                return record.request
            started = await host.input_of(debate_id, DebateStart)
            return submission_of(started.request) if started is not None else None

        async def repeat(request: DebateRequest, earlier: DebateSubmission) -> DebateAccepted:
            """The same request again is a repeat; another request under a used id is refused,
            naming what differs."""
            if earlier != submission_of(request):
                raise conflict_between("debate", request.debate_id, earlier, submission_of(request))
            await host.wake_if_pending(request.debate_id)  # asked again: a run stuck before its start goes
            existing = await debates.get(request.debate_id)
            state = existing.state if existing is not None else DebateState.RUNNING
            return DebateAccepted(debate_id=request.debate_id, state=state, created=False)

        @app.put("/v1/debates/{debate_id}", response_model=DebateAccepted)
        async def submit(debate_id: DebateId, submission: DebateSubmission) -> DebateAccepted:
            return await start(DebateRequest(debate_id=debate_id, **submission.model_dump()))

        async def read_debate(debate_id: str) -> DebateRecord:
            """The debate's record, or the record of one whose workflow is scheduled but has not
            written it yet."""
            found = await debates.get(debate_id)
            if found is not None:
                return found
            starting = await host.starting(debate_id, DebateStart)
            if starting is None:
                raise NotFound(f"no debate {debate_id}", debate_id=debate_id)
            begin, scheduled_at = starting
            return new_debate_record(begin.request, scheduled_at).model_copy(
                update={"traceparent": begin.traceparent}
            )

        @app.get("/v1/debates/{debate_id}", response_model=DebateRecord)
        async def show(debate_id: PathId) -> DebateRecord:
            return await read_debate(debate_id)

        debate_streams = state_streams(
            "debate", read_debate, lambda record: record.state in FINAL_DEBATE_STATES
        )

        @app.get("/v1/debates/{debate_id}/events", **EVENT_ROUTE)
        async def debate_event_stream(
            debate_id: PathId, last_event_id: Annotated[str | None, Header()] = None
        ) -> StreamingResponse:
            """The debate as it is, then each change of it, as Server-Sent Events (`debate`, the
            record; its id the record's revision + 1), from after `Last-Event-ID`, until it
            ends (then an `end` event)."""
            record = await read_debate(debate_id)  # an unknown debate: 404 before any event
            return event_stream_response(debate_streams.stream(debate_id, record, last_seen(last_event_id)))

        @app.get("/v1/debates", response_model=DebateList)
        async def list_debates(
            state: DebateState | None = None,
            limit: int = Query(default=50, ge=1, le=MAX_PAGE_SIZE),
            offset: int = Query(default=0, ge=0),
        ) -> DebateList:
            """One page of the debates in `state` (by id), or with no state of every debate (newest first)."""
            total, page = await debates.page(str(state) if state is not None else None, limit, offset)
            return DebateList(state=state, total=total, debates=page)

        @app.post("/v1/debates/{debate_id}/outcome", response_model=DebateRecord)
        async def outcome(debate_id: PathId, known: DebateOutcome) -> DebateRecord:
            """The right answer of an ended debate, once it is known: it calibrates the gate."""
            record = await show(debate_id)
            result = record.result
            if record.state not in FINAL_DEBATE_STATES or result is None or not result.rounds:
                raise NotDecidable(f"debate {debate_id} is {record.state} with no final round to learn from")
            label = Calibrate(
                debate_id=debate_id,
                config=record.request.config,
                final=result.rounds[-1],
                right_answer=known.right_answer,
            )
            await activities.calibrate(label)
            return record

        async def on_debate(request: DebateRequest) -> None:
            await start(request)

        async def on_resolved(event: EscalationResolved) -> None:
            if event.waiting_party.kind is WaitingPartyKind.DEBATE:
                await DEBATE_DECISIONS.relay(host, escalations, event, event.waiting_party.id)

        ctx.subscriptions.subscribe(topics.DEBATES, on_debate)
        ctx.subscriptions.subscribe(topics.ESCALATION_RESOLVED, on_resolved, idempotent=True)
        watch = DecisionWatch(
            debates,
            str(DebateState.WAITING_FOR_HUMAN),
            lambda record: record.debate_id,
            lambda record: record.escalation_id,
            DEBATE_DECISIONS,
            host,
            escalations,
        )
        watches.append(watch)

    async def warm_up(ctx: ServiceContext) -> None:
        for watch in watches:
            ctx.spawn_daemon(watch.watch_forever(), name="debate decision watch")

    return ServiceModule("debate", setup=setup, warm_up=warm_up)


def create_app(settings: DebateSettings | None = None) -> FastAPI:
    settings = settings or DebateSettings()
    return create_service_app(settings, [debate_module(settings)])


def main() -> None:
    settings = DebateSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
