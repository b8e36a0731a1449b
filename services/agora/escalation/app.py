"""The escalation app: hosts `Escalation` actors and the human interface (HTTP, reached
through Dapr service invocation: `/v1.0/invoke/escalation/method/v1/escalations...`)."""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from fastapi import FastAPI, Header, Query, Response
from pydantic import BaseModel

from agora.core import topics
from agora.core.contracts import DeadlineExtension, Decision, EscalationList, ResumeRequest
from agora.core.errors import InvalidArgument, NotFound, Unauthorized
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.escalation.listing import MAX_AGE_MINUTES, ListingFilter
from agora.core.escalation.record import EscalationRecord, EscalationStatus, ParkRequest, WaitingPartyKind
from agora.core.limits import MAX_PAGE_SIZE
from agora.core.messages import EscalationOutcome
from agora.core.outcomes.learner import OutcomeLearner
from agora.core.outcomes.record import StepOutcome
from agora.core.task_lifecycle import (
    CHECK_ESCALATION_PREFIX,
    awaiting_person,
    check_person_action,
    next_turn_for,
    successor,
)
from agora.escalation.actors import ACTOR_TYPE, DEADLINE_REMINDER, Escalation, EscalationDeps
from agora.escalation.listing import LISTING_NAMESPACE, EscalationListings
from agora.escalation.outcomes import OUTCOME_INDEX_NAMESPACE, OUTCOME_NAMESPACE, DaprOutcomeStore, outcome_of
from agora.escalation.store import (
    ADOPTION_NAMESPACE,
    RECORD_NAMESPACE,
    AdoptionDone,
    EscalationSlot,
    EscalationStore,
    adopt_earlier_records,
)
from agora.runtime.actor_client import ActorClient
from agora.runtime.clients import escalation_actors, task_actors
from agora.runtime.service import (
    PathId,
    ServiceContext,
    ServiceModule,
    create_service_app,
    serve,
)
from agora.runtime.settings import ServiceSettings
from agora.runtime.status_index import IdSet, StatusIndex
from agora.runtime.tracing import current_traceparent

log = logging.getLogger(__name__)

APP_ID = "escalation"
STATUS_INDEX_NAMESPACE = "escalation:status"
"""Where earlier versions listed escalations (see `adopt_earlier_records`)."""


class EscalationSettings(ServiceSettings):
    app_id: str = APP_ID
    api_token: str | None = None
    """AGORA_API_TOKEN: when set, deciding an escalation needs header `x-agora-token` with it."""


MAX_OFFSET = 100_000
"""How deep a listing pages (a page beyond reads every row before it)."""


def escalation_module(settings: EscalationSettings | None = None) -> ServiceModule:
    settings = settings or EscalationSettings()

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        earlier = StatusIndex(ctx.repository(STATUS_INDEX_NAMESPACE, IdSet))
        learner = OutcomeLearner(
            DaprOutcomeStore(
                ctx.repository(OUTCOME_NAMESPACE, StepOutcome),
                ctx.repository(OUTCOME_INDEX_NAMESPACE, IdSet),
                retention_seconds=settings.retention_seconds,
            )
        )
        actors = ActorClient(ctx.sidecar)

        async def schedule_deadline(escalation_id: str, due: timedelta) -> None:
            # One-shot: fires once at the deadline (no period).
            await actors.register_reminder(ACTOR_TYPE, escalation_id, DEADLINE_REMINDER, b"", due, None)

        listings = EscalationListings(ctx.repository(LISTING_NAMESPACE, BaseModel))
        store = EscalationStore(
            ctx.repository(RECORD_NAMESPACE, EscalationSlot),
            listings,
            learner=learner,
            schedule_deadline=schedule_deadline,
        )
        ctx.host_actor(Escalation, EscalationDeps(ctx.publisher, store, learner, settings.retention_seconds))
        escalations = escalation_actors(actors)
        tasks = task_actors(actors)

        async def adopt(escalation_id: str) -> None:
            with contextlib.suppress(NotFound):
                await escalations(escalation_id).get()  # the actor moves what it kept

        adoption.append(
            lambda: adopt_earlier_records(
                earlier, store, adopt, ctx.repository(ADOPTION_NAMESPACE, AdoptionDone)
            )
        )

        @app.get("/v1/escalations", response_model=EscalationList)
        async def list_escalations(
            status: EscalationStatus | None = None,
            limit: int = Query(default=50, ge=1, le=MAX_PAGE_SIZE),
            offset: int = Query(default=0, ge=0, le=MAX_OFFSET),
            kind: WaitingPartyKind | None = None,
            older_than_minutes: int | None = Query(default=None, ge=0, le=MAX_AGE_MINUTES),
            below_confidence: float | None = Query(default=None, ge=0.0, le=1.0),
        ) -> Response:
            """One page of the escalations in `status`, or with no status of every escalation
            kept, the newest first, narrowed by what waits, how long it has waited and how
            confident the step was. Reads the listing's directory (and, for a deep or narrow
            page, the segments that may hold matches), then the page's records in one read."""
            shown = ListingFilter(
                kind=kind, older_than_minutes=older_than_minutes, below_confidence=below_confidence
            )
            now = datetime.now(UTC)
            statuses = [status] if status is not None else list(EscalationStatus)
            page = await listings.page(statuses, shown, offset, limit, now)
            found = await store.read_many_raw([row.escalation_id for row in page.rows])
            # The rows are a hint: a record decided (or dropped) since its row was read is left
            # out of a listing it no longer belongs in. What a row is filtered by (the party, the
            # creation time, the confidence) never changes, so the record's status is all to check.
            records = []
            for row in page.rows:
                record = found.get(row.escalation_id, {}).get("record")
                if record is not None and (status is None or record.get("status") == status):
                    records.append(record)
                if len(records) == limit:
                    break
            # Written as stored: each record was written from the model by this service, so it is
            # not parsed and dumped again (most of a page's time otherwise).
            listed = {"status": status, "total": page.total, "escalations": records}
            return Response(orjson.dumps(listed), media_type="application/json")

        @app.get("/v1/escalations/{escalation_id}", response_model=EscalationRecord)
        async def show(escalation_id: PathId) -> EscalationRecord:
            return await escalations(escalation_id).get()

        @app.put("/v1/escalations/{escalation_id}", response_model=EscalationRecord)
        async def park(escalation_id: PathId, request: ParkRequest) -> Response:
            # The record is created by a first write, whoever parks it: this needs no turn of
            # the escalation's actor.
            record = await store.park(escalation_id, request, current_traceparent())
            return Response(record.model_dump_json(), media_type="application/json")

        @app.post("/v1/escalations/{escalation_id}/resume", response_model=EscalationRecord)
        async def resume(
            escalation_id: PathId, request: ResumeRequest, x_agora_token: str | None = Header(default=None)
        ) -> EscalationRecord:
            if settings.api_token and not hmac.compare_digest(x_agora_token or "", settings.api_token):
                raise Unauthorized("deciding an escalation needs a valid x-agora-token header")
            decision = Decision(
                response=request.decision,
                who=request.who,
                why=request.why,
                context_digest=request.context_digest,
            )
            if isinstance(request.decision, EscalationResponse):
                await check_fits(escalation_id, request.decision)
            return await escalations(escalation_id).resolve(decision)

        async def check_fits(escalation_id: str, decision: EscalationResponse) -> None:
            """A decision is refused up front, with why, when it cannot be carried out: nobody
            is there to be told once it is made. A task's failed check (`check-<task>.<turn>`)
            takes skip, abort or reassign; a reassignment needs a paused run of a task an agent
            took (or a failed check) and someone else who bid for it."""
            failed_check = escalation_id.startswith(CHECK_ESCALATION_PREFIX)
            if not failed_check and decision.action is not EscalationAction.REASSIGN:
                return
            record = await escalations(escalation_id).get()
            if not record.waiting:
                return  # decided already: the actor refuses the decision, saying by whom
            party = record.waiting_party
            if failed_check and party.kind is WaitingPartyKind.TASK:
                check_person_action(decision.action)
                if decision.action is not EscalationAction.REASSIGN:
                    return
                board = await tasks(party.id).get_task()
                if awaiting_person(board):
                    next_turn_for(board, decision.reassign_to)
                    return
            if decision.action is not EscalationAction.REASSIGN:
                return
            if party.kind not in (WaitingPartyKind.TASK, WaitingPartyKind.SESSION):
                raise InvalidArgument(
                    f"a reassignment hands a task's paused run to another agent; escalation "
                    f"{escalation_id} waits for a {party.kind} ({party.id})"
                )
            try:
                board = await tasks(party.id).get_task()
            except NotFound:
                raise InvalidArgument(
                    f"escalation {escalation_id} waits for {party.kind} {party.id}, which is no task "
                    "on the board: there is nothing to reassign"
                ) from None
            successor(board, decision.reassign_to)

        @app.post("/v1/escalations/{escalation_id}/deadline", response_model=EscalationRecord)
        async def extend_deadline(
            escalation_id: PathId,
            extension: DeadlineExtension,
            x_agora_token: str | None = Header(default=None),
        ) -> EscalationRecord:
            """A later deadline for a waiting escalation; guarded like a decision."""
            if settings.api_token and not hmac.compare_digest(x_agora_token or "", settings.api_token):
                raise Unauthorized("moving an escalation's deadline needs a valid x-agora-token header")
            return await escalations(escalation_id).extend_deadline(extension)

        async def on_outcome(event: EscalationOutcome) -> None:
            record = await escalations(event.escalation_id).get()
            learnt = outcome_of(record, event.succeeded)
            if learnt is not None:
                await learner.record(learnt)

        ctx.subscriptions.subscribe(topics.ESCALATION_OUTCOME, on_outcome)

    adoption: list[Callable[[], Coroutine[Any, Any, None]]] = []

    async def warm_up(ctx: ServiceContext) -> None:
        # In the background, retried until done: it needs this app's own actors answering.
        for adopt in adoption:
            ctx.spawn_daemon(adopt(), name="adopt earlier escalation records")

    return ServiceModule("escalation", setup=setup, warm_up=warm_up)


def create_app(settings: EscalationSettings | None = None) -> FastAPI:
    settings = settings or EscalationSettings()
    return create_service_app(settings, [escalation_module(settings)])


def main() -> None:
    settings = EscalationSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
