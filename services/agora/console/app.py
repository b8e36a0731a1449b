"""The console app: server-rendered pages (Jinja templates, one small hand-written script for
live updates and countdowns) over the escalation service, which it calls through its own
sidecar as app id `console` (the identity the access-control policy lets decide).

Its rooms: who is signed in (`sessions`) and signing in (`signin`); the inbox and each
escalation with its decision form (`escalation_pages`, showing `escalation_views`); the boards of
the work escalations belong to (`boards`); pages and error pages (`pages`). Here they are put
together into the app, with the console's script and style and the error pages of refused
requests.
"""

from __future__ import annotations

import asyncio
from importlib import resources
from importlib.metadata import version
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from mcp.server.fastmcp import FastMCP
from starlette.routing import Route

from agora.console.a2a_server import MarketAgent, a2a_routes
from agora.console.api_keys import load_api_keys
from agora.console.auth import Person, Role, load_users
from agora.console.boards import Unavailable, install_boards
from agora.console.escalation_pages import EscalationPages
from agora.console.mcp_server import MCP_PATH, MarketTools, market_mcp
from agora.console.pages import PageError, Pages
from agora.console.sessions import Sessions, to_sign_in
from agora.console.settings import ConsoleSettings
from agora.console.signin import SignInPages
from agora.console.task_disputes import TaskDisputes
from agora.runtime.clients import (
    DebateClient,
    EscalationClient,
    PlannerClient,
    RegistryClient,
    TaskBoardClient,
)
from agora.runtime.service import ServiceContext, ServiceModule, create_service_app, serve

__all__ = ["console_module", "create_app", "main"]

STATIC_FILES = {"console.js": "text/javascript", "console.css": "text/css"}

API_DOCS_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
"""FastAPI's API documentation pages: the console has no public API to document, and those pages
load their script from a CDN."""


async def static(name: str) -> Response:
    """`GET /static/{name}`: the console's script and style, nothing else."""
    if name not in STATIC_FILES:
        raise PageError(404, "no such file")
    body = resources.files("agora.console").joinpath("static", name).read_bytes()
    return Response(body, media_type=STATIC_FILES[name], headers={"x-content-type-options": "nosniff"})


async def home() -> RedirectResponse:
    return RedirectResponse("/inbox", status_code=303)


class PersonPages:
    """Pages only a person signed in sees, rendered for them; a request without a session is
    sent to sign in, and a refused one gets the error page (still showing who is signed in)."""

    def __init__(self, sessions: Sessions, pages: Pages) -> None:
        self._sessions = sessions
        self._pages = pages

    def page(self, request: Request, template: str, values: dict[str, Any]) -> Response:
        signed = self._sessions.who(request)
        if signed is None:
            return to_sign_in(request)
        return self._pages.render(
            template, person=signed[0], csrf=self._sessions.csrf_token(signed[1]), **values
        )

    async def error(self, request: Request, exc: Exception) -> HTMLResponse:
        if not isinstance(exc, PageError | Unavailable):
            raise exc
        return self._pages.error(exc.status, exc.message, self._sessions.person(request))


def console_module(settings: ConsoleSettings) -> ServiceModule:
    token_person = Person(name=settings.console_token_user, role=Role(settings.console_token_role))
    book = load_users(settings.console_users_file, settings.console_token, token_person)
    sessions = Sessions.of_settings(settings)
    pages = Pages(settings.console_refresh_seconds)
    person_pages = PersonPages(sessions, pages)
    sign_in = SignInPages(book, sessions, pages)

    keys = load_api_keys(settings.console_api_keys_file, settings.console_token, token_person)
    mcp: dict[str, FastMCP] = {}

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        escalations = EscalationClient(ctx.sidecar, settings.app_for("escalation"), settings.api_token)
        tools = MarketTools(
            TaskBoardClient(ctx.sidecar, settings.app_for("taskboard")),
            RegistryClient(ctx.sidecar, settings.app_for("registry")),
            PlannerClient(ctx.sidecar, settings.app_for("planner")),
            DebateClient(ctx.sidecar, settings.app_for("debate")),
            escalations,
        )
        agent = MarketAgent(
            TaskBoardClient(ctx.sidecar, settings.app_for("taskboard")),
            RegistryClient(ctx.sidecar, settings.app_for("registry")),
            escalations,
            default_skills=settings.a2a_default_skills,
        )
        app.router.routes.extend(a2a_routes(agent, keys, settings.public_url, version("agora")))
        mcp["server"] = market_mcp(tools, keys, settings.public_url)
        # The MCP app's own route (with the SDK's bearer middleware) answers at its path.
        app.router.routes.append(Route(MCP_PATH, endpoint=mcp["server"].streamable_http_app()))
        app.add_exception_handler(PageError, person_pages.error)
        app.add_exception_handler(Unavailable, person_pages.error)
        install_boards(
            app, ctx.sidecar, settings, person_pages.page, lambda request: sessions.who(request) is not None
        )
        app.add_api_route("/static/{name}", static, methods=["GET"], include_in_schema=False)
        app.add_api_route("/", home, methods=["GET"], include_in_schema=False)
        sign_in.install(app)
        EscalationPages(escalations, sessions, pages, settings.console_refresh_seconds).install(app)
        board = TaskBoardClient(ctx.sidecar, settings.app_for("taskboard"))
        TaskDisputes(board, sessions, pages, traces=bool(settings.console_jaeger_url)).install(app)

    async def warm_up(ctx: ServiceContext) -> None:
        ctx.spawn_daemon(_serve_mcp(mcp["server"]), name="MCP sessions")

    return ServiceModule("console", setup=setup, warm_up=warm_up)


async def _serve_mcp(server: FastMCP) -> None:
    """The MCP session manager's task group, for as long as the app runs (stateless: each
    request's task lives in it only while it is answered)."""
    async with server.session_manager.run():
        await asyncio.Event().wait()


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
