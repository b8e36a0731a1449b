"""A checker app in a few lines: a team's own test of a task's output, which the task board calls
by service invocation when a task names it (`acceptance.check.kind: checker_app`).

    from agora.sdk.checks import CheckAnswer, CheckRequest, serve_checker

    def balanced(request: CheckRequest) -> CheckAnswer:
        ok = ledger_balances(request.outcome.summary)
        return CheckAnswer(passed=ok, reason="the ledger balances" if ok else "the ledger is off")

    serve_checker(balanced)          # beside its own daprd: APP_ID, APP_PORT, DAPR_HTTP_PORT

The function may be async. What it raises is an answer too: an `AgoraError` as its typed error,
anything else as 503 UNAVAILABLE, which the board tries again (and then leaves the outcome
unchecked, never passed). A checker is judged by its answer alone: it never writes the verdict.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable

from fastapi import FastAPI
from pydantic import AliasChoices, Field

from agora.core.contracts import CheckAnswer, CheckRequest
from agora.core.errors import AgoraError, Unavailable
from agora.runtime.service import ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings

__all__ = ["CheckFunction", "CheckerSettings", "checker_app", "serve_checker"]

log = logging.getLogger(__name__)

CheckFunction = Callable[[CheckRequest], CheckAnswer | Awaitable[CheckAnswer]]


class CheckerSettings(ServiceSettings):
    app_id: str = Field(default="checker", validation_alias=AliasChoices("AGORA_APP_ID", "APP_ID"))
    route: str = "check"
    """AGORA_ROUTE: the method the tasks name (`CheckerApp.method`)."""


def checker_module(check: CheckFunction, route: str = "check") -> ServiceModule:
    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        @app.post(f"/{route.strip('/')}", response_model=CheckAnswer)
        async def answer(request: CheckRequest) -> CheckAnswer:
            try:
                result = check(request)
                answered = await result if inspect.isawaitable(result) else result
            except AgoraError:
                raise
            except Exception as exc:
                log.exception("the check raised", extra={"task_id": request.spec.task_id})
                raise Unavailable(f"the check raised {type(exc).__name__}: {exc}"[:500]) from None
            return CheckAnswer.model_validate(answered)

    return ServiceModule("checker", setup=setup)


def checker_app(check: CheckFunction, settings: CheckerSettings | None = None) -> FastAPI:
    settings = settings or CheckerSettings()
    return create_service_app(settings, [checker_module(check, settings.route)])


def serve_checker(check: CheckFunction, settings: CheckerSettings | None = None) -> None:
    """Serve `check` as a checker app beside its own daprd (blocks until stopped)."""
    settings = settings or CheckerSettings()
    serve(checker_app(check, settings), settings)
