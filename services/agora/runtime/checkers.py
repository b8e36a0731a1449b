"""How the task board asks a task's checker app (`agora.core.acceptance.CheckerApp`): one
service invocation through its own sidecar, its answer validated as any input."""

from __future__ import annotations

import asyncio

from pydantic import ValidationError

from agora.core.acceptance import CheckerApp
from agora.core.contracts import CheckAnswer, CheckRequest
from agora.core.errors import AgoraError, describe_field_errors, field_errors
from agora.runtime.sidecar import DaprError, DaprSidecar, SidecarUnavailable

__all__ = ["CheckAnswerInvalid", "CheckNotAnswered", "Checkers"]

MAX_REASON_CHARS = 500


class CheckNotAnswered(Exception):
    """The check's checker app or judge gave no answer this time (down, its sidecar's refusal,
    an error of its own, past its time): worth another try."""


class CheckAnswerInvalid(Exception):
    """The check's checker app or judge answered, but not in its contract (or refused the
    request as invalid): another try would get the same."""


class Checkers:
    def __init__(self, sidecar: DaprSidecar) -> None:
        self._sidecar = sidecar

    async def ask(self, check: CheckerApp, request: CheckRequest) -> CheckAnswer:
        try:
            async with asyncio.timeout(check.timeout_s):
                answer = await self._sidecar.invoke(
                    check.app_id,
                    check.method,
                    json_body=request.model_dump(mode="json"),
                    timeout=check.timeout_s,
                )
        except TimeoutError:
            raise CheckNotAnswered(f"no answer within {check.timeout_s:g} s") from None
        except (DaprError, SidecarUnavailable) as exc:
            raise CheckNotAnswered(str(exc)[:MAX_REASON_CHARS]) from None
        except AgoraError as exc:
            if exc.http_status >= 500:
                raise CheckNotAnswered(f"{exc.code}: {exc.message}"[:MAX_REASON_CHARS]) from None
            raise CheckAnswerInvalid(
                f"refused the request: {exc.code}: {exc.message}"[:MAX_REASON_CHARS]
            ) from None
        except ValueError as exc:  # an answer that is not JSON
            raise CheckAnswerInvalid(
                f"answered something that is not JSON: {exc}"[:MAX_REASON_CHARS]
            ) from None
        try:
            return CheckAnswer.model_validate(answer)
        except ValidationError as exc:
            why = describe_field_errors(field_errors(exc.errors()), exc.error_count())
            raise CheckAnswerInvalid(f"answered out of its contract: {why}"[:MAX_REASON_CHARS]) from None
