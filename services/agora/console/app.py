"""The console app: server-rendered pages (Jinja templates, one small hand-written script for
live updates and countdowns) over the escalation service, which it calls through its own
sidecar as app id `console` (the identity the access-control policy lets decide).

Pages: sign-in, the inbox (waiting escalations, the newest first, filtered, refreshed while
open), one escalation (its context, countdown to the default, the decision form, the audit
trail). A decision is sent with the digest of the page it was made on
(`agora.core.escalation.digest`): the escalation service refuses it when the escalation changed
since, and the page then says what changed.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic import AwareDatetime, BaseModel

from agora.console.auth import (
    Person,
    Role,
    SessionSigner,
    SignInRefused,
    SignInThrottle,
    UserBook,
    load_users,
    proxied_person,
)
from agora.console.boards import Unavailable, install_boards, link
from agora.console.decision_form import (
    EXTENSIONS,
    FIELD_LABELS,
    FormRefused,
    actions_for,
    deadline_extension,
    decision_request,
    prompt_of,
)
from agora.console.inbox import (
    AGE_CHOICES,
    CONFIDENCE_CHOICES,
    INBOX_PAGE_SIZE,
    InboxFilter,
    SharedReadings,
    age_text,
)
from agora.console.settings import ConsoleSettings
from agora.core.contracts import EscalationList
from agora.core.errors import AgoraError, IllegalTransition, NotFound
from agora.core.escalation.digest import (
    ContextChanged,
    changed_fields,
    context_digest,
    decode_field_digests,
    encode_field_digests,
    field_digests,
)
from agora.core.escalation.listing import ListingFilter, confidence_of
from agora.core.escalation.record import AgentNotWaiting, EscalationRecord, EscalationStatus, WaitingPartyKind
from agora.core.limits import ID_PATTERN, MAX_BODY_BYTES, MAX_ID_CHARS
from agora.runtime.clients import EscalationClient
from agora.runtime.service import ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.sidecar import DaprError, SidecarUnavailable

__all__ = ["COOKIE", "EscalationState", "console_module", "create_app", "main"]

log = logging.getLogger(__name__)

COOKIE = "agora_console_session"
STATIC_FILES = {"console.js": "text/javascript", "console.css": "text/css"}
SECURITY_HEADERS = {
    # Nothing but the console's own script and style; no framing, no referrer, no caching of
    # pages that show escalations.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
FORM_FIELDS_AT_MOST = 20


class EscalationState(BaseModel):
    """`GET /escalations/{id}/state`: what an open escalation page compares with what it shows."""

    escalation_id: str
    status: EscalationStatus
    context_digest: str
    decided_by: str | None = None
    decided_at: AwareDatetime | None = None
    action: str | None = None


def _when(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment is not None else "-"


def _number(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"


def templates() -> Environment:
    env = Environment(
        loader=PackageLoader("agora.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["number"] = _number
    env.filters["pathpart"] = _path_part
    return env


class PageError(Exception):
    """A request the console answers with an error page (status and a readable sentence)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _valid_id(escalation_id: str) -> str:
    if len(escalation_id) > MAX_ID_CHARS or not re.match(ID_PATTERN, escalation_id):
        raise PageError(404, "there is no escalation with that id")
    return escalation_id


async def _form(request: Request) -> dict[str, str]:
    """A urlencoded form, bounded like every API body; its first value per field. A form a
    browser posts from another site (its Origin names another host) is refused, whatever
    cookies came with it."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        raise PageError(403, "this form was sent from another site")
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        raise PageError(415, "send the form as application/x-www-form-urlencoded")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise PageError(413, f"the form is larger than the limit of {MAX_BODY_BYTES:,} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise PageError(413, f"the form is larger than the limit of {MAX_BODY_BYTES:,} bytes")
    try:
        parsed = parse_qs(
            body.decode("utf-8", errors="replace"),
            keep_blank_values=True,
            max_num_fields=FORM_FIELDS_AT_MOST,
        )
    except ValueError:
        raise PageError(400, "the form has too many fields") from None
    return {name: values[0] for name, values in parsed.items()}


def console_module(settings: ConsoleSettings) -> ServiceModule:
    book: UserBook = load_users(
        settings.console_users_file,
        settings.console_token,
        Person(name=settings.console_token_user, role=Role(settings.console_token_role)),
    )
    key = settings.console_session_key.encode() if settings.console_session_key else secrets.token_bytes(32)
    signer = SessionSigner(key, settings.console_session_hours * 3600)
    by_name = SignInThrottle(attempts=5)
    by_address = SignInThrottle(attempts=20)  # people behind one proxy share an address
    pages = templates()
    refresh_ms = int(settings.console_refresh_seconds * 1000)

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        escalations = EscalationClient(ctx.sidecar, settings.app_for("escalation"), settings.api_token)

        def who(request: Request) -> tuple[Person, str] | None:
            """The person at the console and their session's nonce (which their CSRF token
            is made from); None when nobody is signed in."""
            proxied = proxied_person(request.headers, settings.console_proxy_user_header, settings.deciders)
            if proxied is not None:
                return proxied, f"proxy:{proxied.name}"
            session = signer.open(request.cookies.get(COOKIE), int(time.time()))
            return (session.person, session.nonce) if session is not None else None

        def render(name: str, status: int = 200, **values: Any) -> HTMLResponse:
            html = pages.get_template(name).render(refresh_ms=refresh_ms, **values)
            return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

        def error_page(status: int, message: str, person: Person | None = None) -> HTMLResponse:
            return render("error.html", status, message=message, person=person)

        @app.exception_handler(PageError)
        async def page_error(request: Request, exc: PageError) -> HTMLResponse:
            signed = who(request)
            return error_page(exc.status, exc.message, signed[0] if signed else None)

        def signed_in(request: Request) -> tuple[Person, str]:
            signed = who(request)
            if signed is None:
                raise PageError(401, "sign in first")
            return signed

        async def fetch(escalation_id: str) -> EscalationRecord:
            try:
                return await escalations.get(escalation_id)
            except NotFound:
                raise PageError(404, f"there is no escalation {escalation_id}") from None
            except (DaprError, SidecarUnavailable, AgoraError) as exc:
                raise _unreachable(exc) from None

        @app.exception_handler(Unavailable)
        async def unavailable(request: Request, exc: Unavailable) -> HTMLResponse:
            signed = who(request)
            return error_page(exc.status, exc.message, signed[0] if signed else None)

        def board_page(request: Request, template: str, values: dict[str, Any]) -> Response:
            signed = who(request)
            if signed is None:
                return to_sign_in(request)
            return render(template, person=signed[0], csrf=signer.csrf_token(signed[1]), **values)

        install_boards(app, ctx.sidecar, settings, board_page)

        @app.get("/static/{name}", include_in_schema=False)
        async def static(name: str) -> Response:
            if name not in STATIC_FILES:
                raise PageError(404, "no such file")
            body = resources.files("agora.console").joinpath("static", name).read_bytes()
            return Response(
                body, media_type=STATIC_FILES[name], headers={"x-content-type-options": "nosniff"}
            )

        @app.get("/", include_in_schema=False)
        async def home() -> RedirectResponse:
            return RedirectResponse("/inbox", status_code=303)

        @app.get("/signin", include_in_schema=False)
        async def signin_page(request: Request) -> Response:
            after = _back_to(request.query_params.get("next", ""))
            if who(request) is not None:
                return RedirectResponse(after, status_code=303)
            return render("signin.html", configured=book.anyone, problem=None, after=after)

        @app.post("/signin", include_in_schema=False)
        async def signin(request: Request) -> Response:
            form = await _form(request)
            name = form.get("name", "")[:256]
            address = request.client.host if request.client else "-"
            now = time.monotonic()
            if not (by_name.allows([name.strip()], now) and by_address.allows([address], now)):
                log.info("sign-in refused: too many tries")
                problem = "too many refused sign-ins; wait a few minutes and try again"
                after = _back_to(form.get("next", ""))
                return render("signin.html", 429, configured=book.anyone, problem=problem, after=after)
            try:
                person = book.sign_in(name, form.get("secret", ""))
            except SignInRefused as exc:
                by_name.refused([name.strip()], now)
                by_address.refused([address], now)
                log.info("sign-in refused")  # never the name or the secret typed
                after = _back_to(form.get("next", ""))
                return render("signin.html", 401, configured=book.anyone, problem=str(exc), after=after)
            cookie, _ = signer.issue(person, int(time.time()))
            log.info("signed in", extra={"person": person.name, "role": str(person.role)})
            response = RedirectResponse(_back_to(form.get("next", "")), status_code=303)
            response.set_cookie(
                COOKIE,
                cookie,
                max_age=settings.console_session_hours * 3600,
                httponly=True,
                samesite="strict",
                secure=settings.console_secure_cookies,
                path="/",
            )
            return response

        @app.post("/signout", include_in_schema=False)
        async def signout(request: Request) -> Response:
            _, nonce = signed_in(request)
            form = await _form(request)
            if not signer.csrf_valid(nonce, form.get("csrf", "")):
                raise PageError(403, "this form is out of date; reload the page and try again")
            response = RedirectResponse("/signin", status_code=303)
            response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
            return response

        async def waiting_page(shown: InboxFilter) -> EscalationList:
            offset = shown.page * INBOX_PAGE_SIZE
            waiting_status = EscalationStatus.WAITING_FOR_HUMAN
            return await escalations.listed(waiting_status, INBOX_PAGE_SIZE, offset, shown.listing)

        waiting: SharedReadings[InboxFilter, EscalationList] = SharedReadings(
            waiting_page, settings.console_refresh_seconds / 2, time.monotonic
        )

        async def waiting_now(shown: InboxFilter) -> tuple[list[EscalationRecord], int]:
            try:
                listing = await waiting.get(shown)
            except (DaprError, SidecarUnavailable, AgoraError) as exc:
                raise _unreachable(exc) from None
            return listing.escalations, listing.total

        def inbox_values(rows: list[EscalationRecord], total: int, shown: InboxFilter) -> dict[str, Any]:
            now = datetime.now(UTC)
            return {
                "rows": [
                    {
                        "record": r,
                        "age": age_text(r.created_at, now),
                        "confidence": confidence_of(r),
                        "href": "/escalations/" + _path_part(r.escalation_id),
                    }
                    for r in rows
                ],
                "total": total,
                "first": shown.page * INBOX_PAGE_SIZE + 1,
                "filter": shown,
                "filtered": shown.listing != ListingFilter(),
                "query": urlencode(shown.query()),
                "newer": urlencode(shown.query(shown.page - 1)) if shown.page > 0 else None,
                "older": urlencode(shown.query(shown.page + 1)) if len(rows) == INBOX_PAGE_SIZE else None,
            }

        @app.get("/inbox", include_in_schema=False)
        async def inbox_page(request: Request) -> Response:
            signed = who(request)
            if signed is None:
                return to_sign_in(request)
            shown = InboxFilter.of_query(request.query_params)
            rows, total = await waiting_now(shown)
            return render(
                "inbox.html",
                person=signed[0],
                csrf=signer.csrf_token(signed[1]),
                kinds=[str(k) for k in WaitingPartyKind],
                ages=AGE_CHOICES,
                confidences=CONFIDENCE_CHOICES,
                **inbox_values(rows, total, shown),
            )

        @app.get("/inbox/rows", include_in_schema=False)
        async def inbox_rows(request: Request) -> Response:
            signed_in(request)
            shown = InboxFilter.of_query(request.query_params)
            rows, total = await waiting_now(shown)
            return render("inbox_rows.html", **inbox_values(rows, total, shown))

        def escalation_page(
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
            return render(
                "escalation.html",
                status,
                person=person,
                csrf=signer.csrf_token(nonce),
                record=record,
                context=record.context,
                confidence=confidence_of(record),
                prompt=prompt_of(record),
                actions=actions_for(record),
                digest=context_digest(record),
                fields=encode_field_digests(field_digests(record)),
                deadline_iso=record.deadline.isoformat() if record.deadline is not None else None,
                problems=problems or {},
                labels=FIELD_LABELS,
                extensions=EXTENSIONS,
                notice=notice,
                changed=changed or [],
                form=form or {},
                href="/escalations/" + _path_part(record.escalation_id),
                belongs_to=_belongs_to(record),
            )

        @app.get("/escalations/{escalation_id}", include_in_schema=False)
        async def show(escalation_id: str, request: Request) -> Response:
            signed = who(request)
            if signed is None:
                return to_sign_in(request)
            record = await fetch(_valid_id(escalation_id))
            return escalation_page(record, *signed)

        @app.get("/escalations/{escalation_id}/state", include_in_schema=False)
        async def state(escalation_id: str, request: Request) -> JSONResponse:
            signed_in(request)
            record = await fetch(_valid_id(escalation_id))
            shown = EscalationState(
                escalation_id=record.escalation_id,
                status=record.status,
                context_digest=context_digest(record),
                decided_by=record.decided_by,
                decided_at=record.decided_at,
                action=str(record.decision.action) if record.decision is not None else None,
            )
            return JSONResponse(shown.model_dump(mode="json"), headers=SECURITY_HEADERS)

        @app.post("/escalations/{escalation_id}/decision", include_in_schema=False)
        async def decide(escalation_id: str, request: Request) -> Response:
            person, nonce = signed_in(request)
            form = await _form(request)
            if not signer.csrf_valid(nonce, form.get("csrf", "")):
                raise PageError(403, "this form is out of date; reload the page and decide again")
            if not person.may_decide:
                raise PageError(403, f"{person.name} may view escalations but not decide them (role viewer)")
            record = await fetch(_valid_id(escalation_id))
            try:
                request_model = decision_request(form, record, person.name)
            except FormRefused as exc:
                return escalation_page(record, person, nonce, 422, problems=exc.problems, form=form)
            try:
                decided = await escalations.resume(record.escalation_id, request_model)
            except (AgentNotWaiting, ContextChanged) as exc:
                return await refused(exc, record, person, nonce, form)
            except AgoraError as exc:
                return escalation_page(record, person, nonce, exc.http_status, notice=exc.message, form=form)
            except (DaprError, SidecarUnavailable) as exc:
                raise _unreachable(exc) from None
            log.info(
                "decided",
                extra={"escalation_id": decided.escalation_id, "person": person.name,
                       "action": str(request_model.decision.action)},
            )  # fmt: skip
            waiting.forget()
            return RedirectResponse("/escalations/" + _path_part(decided.escalation_id), status_code=303)

        async def refused(
            exc: AgoraError, shown: EscalationRecord, person: Person, nonce: str, form: Mapping[str, str]
        ) -> HTMLResponse:
            """The escalation as it is now, with why the request was refused and which of the
            fields its page showed changed since."""
            current = await fetch(shown.escalation_id)
            before = decode_field_digests(form.get("shown_fields", ""))
            changed = changed_fields(before, field_digests(current)) if before else []
            log.info("request refused", extra={"escalation_id": shown.escalation_id, "reason": exc.code})
            notice = _refusal(exc, current)
            return escalation_page(current, person, nonce, 409, notice=notice, changed=changed, form=form)

        @app.post("/escalations/{escalation_id}/deadline", include_in_schema=False)
        async def extend(escalation_id: str, request: Request) -> Response:
            person, nonce = signed_in(request)
            form = await _form(request)
            if not signer.csrf_valid(nonce, form.get("csrf", "")):
                raise PageError(403, "this form is out of date; reload the page and try again")
            if not person.may_decide:
                raise PageError(
                    403, f"{person.name} may view escalations but not move deadlines (role viewer)"
                )
            record = await fetch(_valid_id(escalation_id))
            try:
                extension = deadline_extension(form, record, person.name, datetime.now(UTC))
            except FormRefused as exc:
                return escalation_page(record, person, nonce, 422, problems=exc.problems)
            try:
                extended = await escalations.extend_deadline(record.escalation_id, extension)
            except (AgentNotWaiting, ContextChanged) as exc:
                return await refused(exc, record, person, nonce, form)
            except (IllegalTransition, AgoraError) as exc:
                return escalation_page(record, person, nonce, exc.http_status, notice=exc.message)
            except (DaprError, SidecarUnavailable) as exc:
                raise _unreachable(exc) from None
            log.info(
                "deadline extended", extra={"escalation_id": extended.escalation_id, "person": person.name}
            )
            return RedirectResponse("/escalations/" + _path_part(extended.escalation_id), status_code=303)

    return ServiceModule("console", setup=setup)


def _refusal(exc: AgoraError, current: EscalationRecord) -> str:
    if not current.waiting and current.decision is not None:
        return (
            f"Not applied: this escalation was already decided "
            f"({current.decision.action}) by {current.decided_by or '-'} at {_when(current.decided_at)}."
        )
    return "Not applied: this escalation changed since you opened it. Look at it again before deciding."


BELONGS_TO_PAGES = {
    WaitingPartyKind.TASK: "tasks",
    WaitingPartyKind.PLAN_STEP: "plans",
    WaitingPartyKind.DEBATE: "debates",
}


def _belongs_to(record: EscalationRecord) -> str | None:
    """The console's page of what waits (a session has none)."""
    pages = BELONGS_TO_PAGES.get(record.waiting_party.kind)
    return link(pages, record.waiting_party.id) if pages is not None else None


BACK_TO = re.compile(r"^/(?!/)[A-Za-z0-9/_.~%?=&:+-]{0,512}$")
"""A page of the console to return to after signing in: a path on this site, never another
site's address (`//host`, `https:`) or anything a browser would read differently."""


def _back_to(path: str) -> str:
    return path if BACK_TO.match(path) and "\\" not in path else "/inbox"


def to_sign_in(request: Request) -> RedirectResponse:
    """To the sign-in page, which comes back to this page afterwards."""
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse("/signin?" + urlencode({"next": _back_to(here)}), status_code=303)


def _unreachable(exc: Exception) -> PageError:
    log.warning("the escalation service did not answer", extra={"reason": repr(exc)[:300]})
    return PageError(503, "the escalation service is not answering; try again in a moment")


def _path_part(escalation_id: str) -> str:
    return quote(escalation_id, safe="")


API_DOCS_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
"""FastAPI's API documentation pages: the console has no public API to document, and those pages
load their script from a CDN."""


def create_app(settings: ConsoleSettings | None = None) -> FastAPI:
    settings = settings or ConsoleSettings()
    app = create_service_app(settings, [console_module(settings)])
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) not in API_DOCS_PATHS]
    return app


def main() -> None:
    settings = ConsoleSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
