"""Signing in to the console and out of it: the sign-in page, the sign-in form checked against
the users file (or the configured token), with guessing slowed per name and per address, and
signing out."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from agora.console.auth import SignInRefused, SignInThrottle, UserBook
from agora.console.forms import read_form
from agora.console.pages import Pages
from agora.console.sessions import Sessions, back_to

__all__ = ["SignInPages"]

log = logging.getLogger(__name__)


class SignInPages:
    """`GET /signin`, `POST /signin` and `POST /signout`."""

    def __init__(
        self,
        book: UserBook,
        sessions: Sessions,
        pages: Pages,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._book = book
        self._sessions = sessions
        self._pages = pages
        self._clock = clock
        self._by_name = SignInThrottle(attempts=5)
        self._by_address = SignInThrottle(attempts=20)  # people behind one proxy share an address

    def install(self, app: FastAPI) -> None:
        app.add_api_route("/signin", self.page, methods=["GET"], include_in_schema=False)
        app.add_api_route("/signin", self.sign_in, methods=["POST"], include_in_schema=False)
        app.add_api_route("/signout", self.sign_out, methods=["POST"], include_in_schema=False)

    async def page(self, request: Request) -> Response:
        after = back_to(request.query_params.get("next", ""))
        if self._sessions.who(request) is not None:
            return RedirectResponse(after, status_code=303)
        return self._pages.render("signin.html", configured=self._book.anyone, problem=None, after=after)

    async def sign_in(self, request: Request) -> Response:
        form = await read_form(request)
        name = form.get("name", "")[:256]
        address = request.client.host if request.client else "-"
        now = self._clock()
        after = back_to(form.get("next", ""))
        if not (self._by_name.allows([name.strip()], now) and self._by_address.allows([address], now)):
            log.info("sign-in refused: too many tries")
            problem = "too many refused sign-ins; wait a few minutes and try again"
            return self._pages.render(
                "signin.html", 429, configured=self._book.anyone, problem=problem, after=after
            )
        try:
            person = self._book.sign_in(name, form.get("secret", ""))
        except SignInRefused as exc:
            self._by_name.refused([name.strip()], now)
            self._by_address.refused([address], now)
            log.info("sign-in refused")  # never the name or the secret typed
            return self._pages.render(
                "signin.html", 401, configured=self._book.anyone, problem=str(exc), after=after
            )
        log.info("signed in", extra={"person": person.name, "role": str(person.role)})
        response = RedirectResponse(after, status_code=303)
        self._sessions.start(response, person)
        return response

    async def sign_out(self, request: Request) -> Response:
        _, nonce = self._sessions.signed_in(request)
        form = await read_form(request)
        self._sessions.check_csrf(nonce, form, "try again")
        response = RedirectResponse("/signin", status_code=303)
        self._sessions.end(response)
        return response
