"""The escalation app: hosts `Escalation` actors and the human interface (HTTP, reached
through Dapr service invocation: `/v1.0/invoke/escalation/method/v1/escalations...`)."""

from __future__ import annotations

import asyncio
import hmac
import logging

from fastapi import FastAPI, Header, Query

from agora.core import topics
from agora.core.contracts import DeadlineExtension, Decision, EscalationList, ResumeRequest
from agora.core.errors import InvalidArgument, NotFound, Unauthorized
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.escalation.record import EscalationRecord, EscalationStatus, ParkRequest, WaitingPartyKind
from agora.core.limits import MAX_PAGE_SIZE
from agora.core.messages import EscalationOutcome
from agora.core.outcomes.learner import OutcomeLearner
from agora.core.outcomes.record import SheetOutcome
from agora.core.task_lifecycle import successor
from agora.escalation.actors import Escalation, EscalationDeps
from agora.escalation.outcomes import OUTCOME_INDEX_NAMESPACE, OUTCOME_NAMESPACE, DaprOutcomeStore, outcome_of
from agora.runtime.actor import ActorClient
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

log = logging.getLogger(__name__)

APP_ID = "escalation"
STATUS_INDEX_NAMESPACE = "escalation:status"


class EscalationSettings(ServiceSettings):
    app_id: str = APP_ID
    api_token: str | None = None
    """AGORA_API_TOKEN: when set, deciding an escalation needs header `x-agora-token` with it."""


PAGE_READS_AT_ONCE = 16
"""Records read at once for a page of a listing (a page of 500 read all at once kept the app
too busy to answer its health check)."""


def escalation_module(settings: EscalationSettings | None = None) -> ServiceModule:
    settings = settings or EscalationSettings()

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        index = StatusIndex(ctx.repository(STATUS_INDEX_NAMESPACE, IdSet))
        learner = OutcomeLearner(
            DaprOutcomeStore(
                ctx.repository(OUTCOME_NAMESPACE, SheetOutcome),
                ctx.repository(OUTCOME_INDEX_NAMESPACE, IdSet),
                retention_seconds=settings.retention_seconds,
            )
        )
        ctx.host_actor(Escalation, EscalationDeps(ctx.publisher, index, learner, settings.retention_seconds))
        escalations = escalation_actors(ActorClient(ctx.sidecar))
        tasks = task_actors(ActorClient(ctx.sidecar))

        @app.get("/v1/escalations", response_model=EscalationList)
        async def list_escalations(
            status: EscalationStatus | None = None,
            limit: int = Query(default=50, ge=1, le=MAX_PAGE_SIZE),
            offset: int = Query(default=0, ge=0),
        ) -> EscalationList:
            """One page of the escalations in `status`, or with no status of every escalation
            kept, the newest first. Only the page's records are read."""
            ids = (
                await index.newest_first_in(str(status)) if status is not None else await index.newest_first()
            )
            page = await asyncio.gather(*(listed(i) for i in ids[offset : offset + limit]))
            return EscalationList(
                status=status,
                total=len(ids),
                escalations=[r for r in page if r is not None and (status is None or r.status is status)],
            )

        page_reads = asyncio.Semaphore(PAGE_READS_AT_ONCE)

        async def listed(escalation_id: str) -> EscalationRecord | None:
            """A listed escalation's record; None (left out of the page, with a warning) when the
            listing names one that has none, so one stale entry never fails the whole page."""
            try:
                async with page_reads:
                    return await escalations(escalation_id).get()
            except NotFound:
                log.warning("listed escalation has no record", extra={"escalation_id": escalation_id})
                return None

        @app.get("/v1/escalations/{escalation_id}", response_model=EscalationRecord)
        async def show(escalation_id: PathId) -> EscalationRecord:
            return await escalations(escalation_id).get()

        @app.put("/v1/escalations/{escalation_id}", response_model=EscalationRecord)
        async def park(escalation_id: PathId, request: ParkRequest) -> EscalationRecord:
            return await escalations(escalation_id).park(request)

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
            if (
                isinstance(request.decision, EscalationResponse)
                and request.decision.action is EscalationAction.REASSIGN
            ):
                await check_reassignment(escalation_id, request.decision)
            return await escalations(escalation_id).resolve(decision)

        async def check_reassignment(escalation_id: str, decision: EscalationResponse) -> None:
            """A reassignment is refused up front, with why, unless the escalation pauses the
            run of a task an agent took and someone else bid for it: the holder hands the task
            over only after the decision is made, when nobody is there to be told it cannot."""
            record = await escalations(escalation_id).get()
            if not record.waiting:
                return  # decided already: the actor refuses the decision, saying by whom
            party = record.waiting_party
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

    return ServiceModule("escalation", setup=setup)


def create_app(settings: EscalationSettings | None = None) -> FastAPI:
    settings = settings or EscalationSettings()
    return create_service_app(settings, [escalation_module(settings)])


def main() -> None:
    settings = EscalationSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
