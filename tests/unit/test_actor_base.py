"""PydanticActor: state loaded on activation, persisted by commit, dropped by forget, read again
after a turn that failed."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import pytest
from dapr.actor import ActorId, ActorInterface, actormethod
from dapr.actor.runtime._type_information import ActorTypeInformation
from dapr.actor.runtime.context import ActorRuntimeContext
from dapr.actor.runtime.manager import ActorManager
from dapr.actor.runtime.mock_actor import create_mock_actor
from dapr.clients.base import DaprActorClientBase
from fastapi import FastAPI
from pydantic import BaseModel
from starlette.testclient import TestClient

from agora.core.errors import InvalidArgument
from agora.runtime import service
from agora.runtime.actor_host import (
    STATE_KEY,
    ModelSerializer,
    PydanticActor,
    StateSerializer,
    actor_endpoint,
)
from agora.runtime.actor_interface import ActorAnswer
from agora.runtime.service import ServiceContext, ServiceModule, create_service_app
from agora.runtime.settings import ServiceSettings
from tests.unit.helpers import mock_state, until


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


class StoreDown(Exception):
    pass


class FlakyStore(DaprActorClientBase):  # type: ignore[misc]
    """The actor runtime's state calls against a dict, with saves that can be made to fail."""

    def __init__(self) -> None:
        self.saved: dict[str, Any] = {}
        self.failing = False

    async def get_state(self, actor_type: str, actor_id: str, name: str) -> bytes:
        return json.dumps(self.saved[name]).encode() if name in self.saved else b""

    async def save_state_transactionally(self, actor_type: str, actor_id: str, data: bytes) -> None:
        if self.failing:
            raise StoreDown("the state store is down")
        for operation in json.loads(data):
            request = operation["request"]
            if operation["operation"] == "upsert":
                self.saved[request["key"]] = request["value"]
            else:
                self.saved.pop(request["key"], None)

    async def invoke_method(self, *args: object) -> bytes:
        raise NotImplementedError

    async def register_reminder(self, *args: object) -> None:
        raise NotImplementedError

    async def unregister_reminder(self, *args: object) -> None:
        raise NotImplementedError

    async def register_timer(self, *args: object) -> None:
        raise NotImplementedError

    async def unregister_timer(self, *args: object) -> None:
        raise NotImplementedError


class TurnWatch:
    """What a test sees of the calls on a `Ledger`: how many are blocked waiting for the
    actor's turn, which `RecordWhenLetGo` calls have theirs, and the event that lets those
    finish."""

    def __init__(self) -> None:
        self.waiting_for_turn = 0
        self.started: list[str] = []
        self.let_go = asyncio.Event()


class WatchedTurnLock(asyncio.Lock):
    """The actor's turn lock, counting in `watch` the calls blocked on it (a call that takes
    it at once counts in and out within one step, so no other task ever sees it counted)."""

    def __init__(self, watch: TurnWatch) -> None:
        super().__init__()
        self._watch = watch

    async def acquire(self) -> Literal[True]:
        self._watch.waiting_for_turn += 1
        try:
            return await super().acquire()
        finally:
            self._watch.waiting_for_turn -= 1


class LedgerInterface(ActorInterface):
    @actormethod(name="Record")
    async def record(self, label: str) -> ActorAnswer: ...

    @actormethod(name="RecordOrRefuse")
    async def record_or_refuse(self, label: str) -> ActorAnswer: ...

    @actormethod(name="RecordWhenLetGo")
    async def record_when_let_go(self, label: str) -> ActorAnswer: ...


class Ledger(PydanticActor[CounterState, TurnWatch], LedgerInterface):
    """Records each label once, as an idempotent handler of a redelivered message does."""

    state_model = CounterState

    def __init__(self, ctx: ActorRuntimeContext, actor_id: ActorId, deps: TurnWatch) -> None:
        super().__init__(ctx, actor_id, deps)
        self._turn_lock = WatchedTurnLock(deps)  # the lock `turn` takes, so a test sees who waits

    @actor_endpoint
    async def record(self, label: str) -> int:
        if label not in self.state.history:
            self.state.history.append(label)
            await self.commit()
        return len(self.state.history)

    @actor_endpoint
    async def record_when_let_go(self, label: str) -> int:
        self.state.history.append(f"start {label}")
        self.deps.started.append(label)
        await self.deps.let_go.wait()
        self.state.history.append(f"end {label}")
        await self.commit()
        return len(self.state.history)

    @actor_endpoint
    async def record_or_refuse(self, label: str) -> int:
        self.state.history.append(label)  # changed before the check fails, and never saved
        raise InvalidArgument(f"{label!r} refused")


def _hosted_ledger(store: FlakyStore, watch: TurnWatch | None = None) -> ActorManager:
    context = ActorRuntimeContext(
        ActorTypeInformation.create(Ledger),
        ModelSerializer(),
        StateSerializer(),  # as the app registers them
        store,
        lambda ctx, actor_id: Ledger(ctx, actor_id, watch or TurnWatch()),
    )
    return ActorManager(context)


async def _call(manager: ActorManager, method: str, label: str) -> ActorAnswer:
    raw = await manager.dispatch(ActorId("l1"), method, json.dumps(label).encode())
    return ActorAnswer.model_validate_json(raw)


async def test_a_redelivery_after_a_failed_save_reads_the_store_and_saves_again() -> None:
    store = FlakyStore()
    manager = _hosted_ledger(store)
    store.failing = True
    with pytest.raises(StoreDown):
        await _call(manager, "Record", "task-1")
    store.failing = False

    # The same message again: the store never got "task-1", so it must be recorded now.
    assert (await _call(manager, "Record", "task-1")).result == 1
    assert store.saved[STATE_KEY]["history"] == ["task-1"]


async def test_a_change_made_by_a_turn_that_answered_an_error_is_not_seen_by_the_next() -> None:
    store = FlakyStore()
    manager = _hosted_ledger(store)
    refused = await _call(manager, "RecordOrRefuse", "bad")
    assert refused.error is not None and refused.error.error == InvalidArgument.code

    assert (await _call(manager, "Record", "good")).result == 1
    assert store.saved[STATE_KEY]["history"] == ["good"]


def test_an_app_hosting_actors_has_dapr_deactivate_them_after_the_idle_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The app's own tracing set-up and shutdown would end the tracer provider other tests use.
    monkeypatch.setattr(service, "configure_tracing", lambda app_id: None)
    monkeypatch.setattr(service, "shutdown_tracing", lambda: None)

    def setup(ctx: ServiceContext, _: FastAPI) -> None:
        ctx.host_actor(Counter, None)

    settings = ServiceSettings(app_id="counters", actor_idle_seconds=120)
    with TestClient(create_service_app(settings, [ServiceModule("counters", setup=setup)])) as app:
        config = app.get("/dapr/config").json()
    assert config["entities"] == ["Counter"]
    assert config["actorIdleTimeout"].startswith("0h2m0s")


async def test_calls_that_reach_the_app_together_run_one_after_the_other() -> None:
    """As when the sidecar let a second call in because the first one's caller gave up."""
    store = FlakyStore()
    watch = TurnWatch()
    manager = _hosted_ledger(store, watch)
    await _call(manager, "Record", "activated")
    first = asyncio.create_task(_call(manager, "RecordWhenLetGo", "first"))
    second = asyncio.create_task(_call(manager, "RecordWhenLetGo", "second"))
    # Both calls reached the actor: the first has its turn, the second waits for it.
    await until(lambda: watch.started == ["first"] and watch.waiting_for_turn == 1)
    watch.let_go.set()
    await asyncio.gather(first, second)
    history = store.saved[STATE_KEY]["history"]
    assert history == ["activated", "start first", "end first", "start second", "end second"]
