"""Helpers shared by the unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar, cast

from dapr.actor import Actor
from dapr.actor.runtime.mock_actor import create_mock_actor
from dapr.actor.runtime.mock_state_manager import MockStateManager

from agora.core.acceptance import CheckerApp
from agora.core.contracts import CheckAnswer, CheckRequest
from agora.runtime.actor_interface import ActorAnswer
from agora.runtime.checkers import Checkers, CheckNotAnswered


def mock_state(actor: Actor) -> dict[str, Any]:
    """What an actor made by `create_mock_actor` has saved, by state name."""
    return cast(MockStateManager, actor._state_manager)._mock_state


A = TypeVar("A", bound=Actor)


class ScriptedCheckers(Checkers):
    """Checker apps that answer from a script, in order: a `CheckAnswer`, or an exception to
    raise (`CheckNotAnswered`, `CheckAnswerInvalid`); `asked` holds each request."""

    def __init__(self, *script: CheckAnswer | Exception) -> None:
        self.script = list(script)
        self.asked: list[tuple[CheckerApp, CheckRequest]] = []

    async def ask(self, check: CheckerApp, request: CheckRequest) -> CheckAnswer:
        self.asked.append((check, request))
        if not self.script:
            raise CheckNotAnswered("the script has no answer left")
        answer = self.script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


NO_CHECKERS = ScriptedCheckers()
"""For boards whose tasks name no checker app."""


def hosted(actor_type: type[A], actor_id: str, deps: object, initstate: dict[str, Any] | None = None) -> A:
    """An actor on the SDK's mock runtime (state kept in memory), built with `deps` as its
    hosting app would build it."""
    actor = create_mock_actor(actor_type, actor_id, initstate)
    actor.deps = deps  # type: ignore[attr-defined]
    return actor


def answer_of(value: object) -> ActorAnswer:
    """What an actor method answered over the wire (its result or its typed error)."""
    assert isinstance(value, ActorAnswer), value
    return value


async def until(condition: Callable[[], bool], timeout: float = 1.0) -> None:
    """Let other tasks run until `condition()` holds; fail if it does not within `timeout`
    seconds. A test waits on what it is about to check, not for a time it hopes is enough."""

    async def holds() -> None:
        while not condition():
            await asyncio.sleep(0)

    try:
        await asyncio.wait_for(holds(), timeout)
    except TimeoutError:
        raise AssertionError(f"the awaited condition did not hold within {timeout}s") from None
