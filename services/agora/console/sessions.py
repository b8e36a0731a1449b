"""Who a request to the console comes from: the person named by the authenticating proxy's
header (when the console trusts one) or by a signed session cookie, the CSRF token their forms
carry, and the page sign-in sends them back to."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Mapping
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import RedirectResponse, Response

from agora.console.auth import Person, SessionSigner, proxied_person
from agora.console.forms import read_form
from agora.console.pages import PageError
from agora.console.settings import ConsoleSettings

__all__ = ["BACK_TO", "COOKIE", "Sessions", "back_to", "to_sign_in"]

COOKIE = "agora_console_session"

BACK_TO = re.compile(r"^/(?!/)[A-Za-z0-9/_.~%?=&:+-]{0,512}$")
"""A page of the console to return to after signing in: a path on this site, never another
site's address (`//host`, `https:`) or anything a browser would read differently."""


def back_to(path: str) -> str:
    return path if BACK_TO.match(path) and "\\" not in path else "/inbox"


def to_sign_in(request: Request) -> RedirectResponse:
    """To the sign-in page, which comes back to this page afterwards."""
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse("/signin?" + urlencode({"next": back_to(here)}), status_code=303)


class Sessions:
    """The people signed in to the console: each holds a session cookie (or is named by the
    proxy), and each session's nonce makes the CSRF token of its forms."""

    def __init__(
        self, settings: ConsoleSettings, signer: SessionSigner, clock: Callable[[], float] = time.time
    ) -> None:
        self._settings = settings
        self._signer = signer
        self._clock = clock

    @classmethod
    def of_settings(cls, settings: ConsoleSettings) -> Sessions:
        """Sessions signed with the configured key (shared between replicas), or with a
        random key of this process when none is configured."""
        key = (
            settings.console_session_key.encode() if settings.console_session_key else secrets.token_bytes(32)
        )
        return cls(settings, SessionSigner(key, settings.console_session_hours * 3600))

    def who(self, request: Request) -> tuple[Person, str] | None:
        """The person at the console and their session's nonce (which their CSRF token is made
        from); None when nobody is signed in."""
        settings = self._settings
        proxied = proxied_person(request.headers, settings.console_proxy_user_header, settings.deciders)
        if proxied is not None:
            return proxied, f"proxy:{proxied.name}"
        session = self._signer.open(request.cookies.get(COOKIE), int(self._clock()))
        return (session.person, session.nonce) if session is not None else None

    def person(self, request: Request) -> Person | None:
        signed = self.who(request)
        return signed[0] if signed is not None else None

    def signed_in(self, request: Request) -> tuple[Person, str]:
        """`who`, for a request that only a person signed in may make."""
        signed = self.who(request)
        if signed is None:
            raise PageError(401, "sign in first")
        return signed

    async def decider_form(
        self, request: Request, again: str, what: str
    ) -> tuple[Person, str, dict[str, str]]:
        """A form only a decider may post: the person, their session's nonce and the form, once
        its CSRF token is checked (`again`: what they do after reloading) and their role allows
        `what` (a viewer is refused 403, saying so)."""
        person, nonce = self.signed_in(request)
        form = await read_form(request)
        self.check_csrf(nonce, form, again)
        if not person.may_decide:
            raise PageError(403, f"{person.name} may view {what} (role viewer)")
        return person, nonce, form

    def csrf_token(self, nonce: str) -> str:
        return self._signer.csrf_token(nonce)

    def check_csrf(self, nonce: str, form: Mapping[str, str], again: str) -> None:
        """Refuse a form without the token of the session it is posted in (`again`: what the
        person does after reloading the page)."""
        if not self._signer.csrf_valid(nonce, form.get("csrf", "")):
            raise PageError(403, f"this form is out of date; reload the page and {again}")

    def start(self, response: Response, person: Person) -> None:
        """Sign `person` in: `response` sets their session cookie."""
        cookie, _ = self._signer.issue(person, int(self._clock()))
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=self._settings.console_session_hours * 3600,
            httponly=True,
            samesite="strict",
            secure=self._settings.console_secure_cookies,
            path="/",
        )

    @staticmethod
    def end(response: Response) -> None:
        """Sign the person out: `response` drops their session cookie."""
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
