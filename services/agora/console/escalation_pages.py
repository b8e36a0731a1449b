"""The inbox and each escalation's page, over the escalation service: the waiting escalations
(each page of them read once per refresh interval, whoever has it open), one escalation with its
decision form, the state an open page polls, and the two forms a decider posts (a decision, a
later deadline). A form is sent with the digests of the page it was filled in on: the service
refuses it when the escalation changed since, and the page then says what changed."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from agora.console.auth import Person
from agora.console.decision_form import FormRefused, deadline_extension, decision_request
from agora.console.escalation_views import (
    EscalationState,
    escalation_href,
    escalation_values,
    inbox_values,
    refusal,
)
from agora.console.inbox import AGE_CHOICES, CONFIDENCE_CHOICES, INBOX_PAGE_SIZE, InboxFilter, SharedReadings
from agora.console.pages import SECURITY_HEADERS, PageError, Pages
from agora.console.sessions import Sessions, to_sign_in
from agora.core.contracts import EscalationList
from agora.core.errors import AgoraError, IllegalTransition, NotFound
from agora.core.escalation.digest import ContextChanged, changed_fields, decode_field_digests, field_digests
from agora.core.escalation.record import AgentNotWaiting, EscalationRecord, EscalationStatus, WaitingPartyKind
from agora.core.limits import ID_PATTERN, MAX_ID_CHARS
from agora.runtime.clients import EscalationClient
from agora.runtime.sidecar import DaprError, SidecarUnavailable

__all__ = ["EscalationPages", "unreachable", "valid_id"]

log = logging.getLogger(__name__)


def valid_id(escalation_id: str) -> str:
    if len(escalation_id) > MAX_ID_CHARS or not re.match(ID_PATTERN, escalation_id):
        raise PageError(404, "there is no escalation with that id")
    return escalation_id


def unreachable(exc: Exception) -> PageError:
    log.warning("the escalation service did not answer", extra={"reason": repr(exc)[:300]})
    return PageError(503, "the escalation service is not answering; try again in a moment")


class EscalationPages:
    """`/inbox`, `/inbox/rows` (the rows an open inbox swaps in) and `/escalations/{id}` with
    its `state`, `decision` and `deadline`."""

    def __init__(
        self, escalations: EscalationClient, sessions: Sessions, pages: Pages, refresh_seconds: float
    ) -> None:
        self._escalations = escalations
        self._sessions = sessions
        self._pages = pages
        self._waiting: SharedReadings[InboxFilter, EscalationList] = SharedReadings(
            self._waiting_page, refresh_seconds / 2, time.monotonic
        )

    def install(self, app: FastAPI) -> None:
        route = app.add_api_route
        route("/inbox", self.inbox, methods=["GET"], include_in_schema=False)
        route("/inbox/rows", self.inbox_rows, methods=["GET"], include_in_schema=False)
        route("/escalations/{escalation_id}", self.show, methods=["GET"], include_in_schema=False)
        route("/escalations/{escalation_id}/state", self.state, methods=["GET"], include_in_schema=False)
        route("/escalations/{escalation_id}/decision", self.decide, methods=["POST"], include_in_schema=False)
        route("/escalations/{escalation_id}/deadline", self.extend, methods=["POST"], include_in_schema=False)

    async def inbox(self, request: Request) -> Response:
        signed = self._sessions.who(request)
        if signed is None:
            return to_sign_in(request)
        shown = InboxFilter.of_query(request.query_params)
        rows, total = await self._waiting_now(shown)
        return self._pages.render(
            "inbox.html",
            person=signed[0],
            csrf=self._sessions.csrf_token(signed[1]),
            kinds=[str(k) for k in WaitingPartyKind],
            ages=AGE_CHOICES,
            confidences=CONFIDENCE_CHOICES,
            **inbox_values(rows, total, shown, datetime.now(UTC)),
        )

    async def inbox_rows(self, request: Request) -> Response:
        self._sessions.signed_in(request)
        shown = InboxFilter.of_query(request.query_params)
        rows, total = await self._waiting_now(shown)
        return self._pages.render("inbox_rows.html", **inbox_values(rows, total, shown, datetime.now(UTC)))

    async def show(self, escalation_id: str, request: Request) -> Response:
        signed = self._sessions.who(request)
        if signed is None:
            return to_sign_in(request)
        record = await self._fetch(valid_id(escalation_id))
        return self._page(record, *signed)

    async def state(self, escalation_id: str, request: Request) -> JSONResponse:
        self._sessions.signed_in(request)
        record = await self._fetch(valid_id(escalation_id))
        return JSONResponse(EscalationState.of(record).model_dump(mode="json"), headers=SECURITY_HEADERS)

    async def decide(self, escalation_id: str, request: Request) -> Response:
        person, nonce, form = await self._sessions.decider_form(
            request, "decide again", "escalations but not decide them"
        )
        record = await self._fetch(valid_id(escalation_id))
        try:
            request_model = decision_request(form, record, person.name)
        except FormRefused as exc:
            return self._page(record, person, nonce, 422, problems=exc.problems, form=form)
        try:
            decided = await self._escalations.resume(record.escalation_id, request_model)
        except (AgentNotWaiting, ContextChanged) as exc:
            return await self._refused(exc, record, person, nonce, form)
        except AgoraError as exc:
            return self._page(record, person, nonce, exc.http_status, notice=exc.message, form=form)
        except (DaprError, SidecarUnavailable) as exc:
            raise unreachable(exc) from None
        log.info(
            "decided",
            extra={"escalation_id": decided.escalation_id, "person": person.name,
                   "action": str(request_model.decision.action)},
        )  # fmt: skip
        self._waiting.forget()
        return RedirectResponse(escalation_href(decided.escalation_id), status_code=303)

    async def extend(self, escalation_id: str, request: Request) -> Response:
        person, nonce, form = await self._sessions.decider_form(
            request, "try again", "escalations but not move deadlines"
        )
        record = await self._fetch(valid_id(escalation_id))
        try:
            extension = deadline_extension(form, record, person.name, datetime.now(UTC))
        except FormRefused as exc:
            return self._page(record, person, nonce, 422, problems=exc.problems)
        try:
            extended = await self._escalations.extend_deadline(record.escalation_id, extension)
        except (AgentNotWaiting, ContextChanged) as exc:
            return await self._refused(exc, record, person, nonce, form)
        except (IllegalTransition, AgoraError) as exc:
            return self._page(record, person, nonce, exc.http_status, notice=exc.message)
        except (DaprError, SidecarUnavailable) as exc:
            raise unreachable(exc) from None
        log.info("deadline extended", extra={"escalation_id": extended.escalation_id, "person": person.name})
        return RedirectResponse(escalation_href(extended.escalation_id), status_code=303)

    async def _fetch(self, escalation_id: str) -> EscalationRecord:
        try:
            return await self._escalations.get(escalation_id)
        except NotFound:
            raise PageError(404, f"there is no escalation {escalation_id}") from None
        except (DaprError, SidecarUnavailable, AgoraError) as exc:
            raise unreachable(exc) from None

    async def _waiting_page(self, shown: InboxFilter) -> EscalationList:
        offset = shown.page * INBOX_PAGE_SIZE
        waiting_status = EscalationStatus.WAITING_FOR_HUMAN
        return await self._escalations.listed(waiting_status, INBOX_PAGE_SIZE, offset, shown.listing)

    async def _waiting_now(self, shown: InboxFilter) -> tuple[list[EscalationRecord], int]:
        try:
            listing = await self._waiting.get(shown)
        except (DaprError, SidecarUnavailable, AgoraError) as exc:
            raise unreachable(exc) from None
        return listing.escalations, listing.total

    def _page(
        self,
        record: EscalationRecord,
        person: Person,
        nonce: str,
        status: int = 200,
        *,
        problems: Mapping[str, str] | None = None,
        notice: str | None = None,
        changed: list[str] | None = None,
        form: Mapping[str, str] | None = None,
    ) -> HTMLResponse:
        """The escalation's page for `person`, with what a refused form said (`escalation_values`)."""
        shown = escalation_values(record, problems=problems, notice=notice, changed=changed, form=form)
        return self._pages.render(
            "escalation.html", status, person=person, csrf=self._sessions.csrf_token(nonce), **shown
        )

    async def _refused(
        self, exc: AgoraError, shown: EscalationRecord, person: Person, nonce: str, form: Mapping[str, str]
    ) -> HTMLResponse:
        """The escalation as it is now, with why the request was refused and which of the
        fields its page showed changed since."""
        current = await self._fetch(shown.escalation_id)
        before = decode_field_digests(form.get("shown_fields", ""))
        changed = changed_fields(before, field_digests(current)) if before else []
        log.info("request refused", extra={"escalation_id": shown.escalation_id, "reason": exc.code})
        return self._page(current, person, nonce, 409, notice=refusal(current), changed=changed, form=form)
