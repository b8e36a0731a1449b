"""PydanticActor: state loaded on activation, persisted by commit, dropped by forget."""

from __future__ import annotations

from dapr.actor import ActorInterface, actormethod
from dapr.actor.runtime.mock_actor import create_mock_actor
from pydantic import BaseModel

from agora.runtime.actor import STATE_KEY, PydanticActor
from tests.unit.helpers import mock_state


class CounterState(BaseModel):
    count: int = 0
    history: list[str] = []


class CounterInterface(ActorInterface):
    @actormethod(name="Add")
    async def add(self, label: str) -> int: ...


class Counter(PydanticActor[CounterState, None], CounterInterface):
    state_model = CounterState

    async def add(self, label: str) -> int:
        self.state.count += 1
        self.state.history.append(label)
        await self.commit()
        return self.state.count


async def test_new_actor_starts_from_the_initial_state() -> None:
    actor = create_mock_actor(Counter, "c1")
    await actor._on_activate()
    assert actor.state == CounterState()


async def test_commit_persists_json_and_reactivation_reloads_it() -> None:
    actor = create_mock_actor(Counter, "c1")
    await actor._on_activate()
    assert await actor.add("a") == 1
    assert await actor.add("b") == 2
    stored = mock_state(actor)[STATE_KEY]
    assert stored == {"count": 2, "history": ["a", "b"]}

    reborn = create_mock_actor(Counter, "c1", initstate={STATE_KEY: stored})
    await reborn._on_activate()
    assert reborn.state.count == 2 and reborn.snapshot() == stored


async def test_forget_removes_state() -> None:
    actor = create_mock_actor(Counter, "c1", initstate={STATE_KEY: {"count": 5, "history": []}})
    await actor._on_activate()
    await actor.forget()
    assert STATE_KEY not in mock_state(actor)
    assert actor.state == CounterState()
