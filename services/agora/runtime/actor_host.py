"""The hosting side of actors: actors whose state is one pydantic model, whose methods take and
return models, and whose dependencies are given to each instance.

- `PydanticActor` loads its state on activation, saves it with `commit()`, runs each call and
  reminder in a turn of its own, and keeps finished records for a retention (`expire_in`).
- `ModelSerializer` is the message serializer registered with the Dapr actor runtime: it reads
  a method's argument into the type its interface declares (`post_task(self, spec: TaskSpec)`)
  and writes models as JSON. An argument that fails validation reaches the method as an
  `InvalidActorArgument`, which `actor_endpoint` answers with the typed INVALID_INPUT error.
- `ActorHosting` names an actor type and the dependencies its instances are built with (the
  runtime's `actor_factory`), so nothing is set on the class at start-up and a unit test builds
  an actor with its own fakes.
- `SidecarActorClient` carries the runtime's own calls (state, reminders, timers).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import typing
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Generic, ParamSpec, TypeVar, cast

import orjson
from dapr.actor import Actor, ActorId, ActorInterface
from dapr.actor.runtime.context import ActorRuntimeContext
from dapr.clients.base import DaprActorClientBase
from dapr.serializers import DefaultJSONSerializer, Serializer
from opentelemetry.trace import SpanKind
from pydantic import BaseModel, ValidationError

from agora.core.errors import AgoraError, InvalidArgument, describe_field_errors, field_errors
from agora.runtime.actor_interface import ActorAnswer, type_adapter
from agora.runtime.dapr_private import stage_new_state
from agora.runtime.sidecar import DaprSidecar
from agora.runtime.tracing import tracer

__all__ = [
    "EXPIRE_REMINDER",
    "STATE_KEY",
    "ActorHosting",
    "InvalidActorArgument",
    "ModelSerializer",
    "PydanticActor",
    "SidecarActorClient",
    "StateSerializer",
    "actor_endpoint",
]

S = TypeVar("S", bound=BaseModel)
D = TypeVar("D")
P = ParamSpec("P")
R = TypeVar("R")

STATE_KEY = "state"
EXPIRE_REMINDER = "expire"
"""The reminder that ends a finished record's retention (`PydanticActor.expire_in`)."""


class PydanticActor(Actor, Generic[S, D]):  # type: ignore[misc]
    """Loads `state_model` on activation and persists it with `commit()`; `deps` are what the
    hosting app built this instance with (`ActorHosting`).

    The actor runtime serializes calls per actor id (turn-based concurrency), so a method
    that mutates `self.state` and then commits never interleaves with another call on the
    same actor. State lives in the actor state store under the `state` key; it is stored as
    plain JSON so other tools can read it.
    """

    state_model: ClassVar[type[BaseModel]]
    reload_every_turn: ClassVar[bool] = False
    """Whether `reload` runs at the start of every turn (for an actor whose state others also
    write, so what it holds in memory may be out of date)."""
    state: S
    deps: D
    _turn_lock: asyncio.Lock | None = None
    _stored_absent = False
    """The activation's read found no state (a new actor), and nothing was saved since."""
    _state_in_doubt = False
    _answered_error = False

    def __init__(self, ctx: ActorRuntimeContext, actor_id: ActorId, deps: D) -> None:
        super().__init__(ctx, actor_id)
        self.deps = deps

    async def _on_activate(self) -> None:
        found, raw = await self._state_manager.try_get_state(STATE_KEY)
        self.state = self.state_model.model_validate(raw) if found else self.initial_state()  # type: ignore[assignment]
        self._stored_absent = not found

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """One call of this actor (a method, a reminder), alone.

        Dapr runs an actor's calls one at a time, but only while the caller waits: a caller
        that gives up (its timeout) releases the actor's lock in the sidecar while the app
        still works on the call, and the next call would then run beside it. The app keeps
        the promise itself with a lock per actor.

        A call that raised or answered an error may have changed `self.state` without saving
        it, or its save may have failed (the store down): the in-memory copy is then ahead of
        the store, and the next call would take it as done (an idempotent redelivery would
        find "already recorded" and never save it). The store is the truth: the next call
        reads it again first."""
        if self._turn_lock is None:
            self._turn_lock = asyncio.Lock()
        async with self._turn_lock:
            if self._state_in_doubt or self.reload_every_turn:
                await self.reload()
            self._state_in_doubt, self._answered_error = True, False
            yield  # an exception leaves the state in doubt
            self._state_in_doubt = self._answered_error

    def doubt_state(self) -> None:
        """The current call answers an error: read the state again before the next one."""
        self._answered_error = True

    async def receive_reminder(
        self, name: str, state: bytes, due_time: timedelta, period: timedelta, ttl: timedelta | None = None
    ) -> None:
        """A reminder fired (for subclasses that are `Remindable`): `on_reminder`, in a turn."""
        async with self.turn():
            await self.on_reminder(name, state)

    async def on_reminder(self, name: str, state: bytes) -> None:
        """Handle the reminder `name` registered with `state` (override)."""

    async def reload(self) -> None:
        """Drop the in-memory state (and the runtime's cache of it) and read it from the store."""
        await self._state_manager.clear_cache()
        await self._on_activate()

    def initial_state(self) -> S:
        return self.state_model()  # type: ignore[return-value]

    async def commit(self, ttl_seconds: int | None = None) -> None:
        """Save the state; with `ttl_seconds` the store drops it that long after this write
        (unless written again), which needs Dapr's `ActorStateTTL` feature."""
        value = self.state.model_dump(mode="json")
        # When the activation's read found no state, the runtime would ask the store again
        # whether it exists before adding it (a read on every new actor's first write).
        if not (self._stored_absent and stage_new_state(self._state_manager, STATE_KEY, value, ttl_seconds)):
            await self._state_manager.set_state_ttl(STATE_KEY, value, ttl_seconds)
        await self._state_manager.save_state()
        self._stored_absent = False

    async def expire_in(self, seconds: int) -> None:
        """Call `expired` `seconds` from now: a one-shot reminder (`EXPIRE_REMINDER`), kept by
        the Dapr scheduler, that the actor's `on_reminder` hands to `expired`."""
        await self.register_reminder(EXPIRE_REMINDER, b"", timedelta(seconds=seconds))

    async def drop_reminder(self, name: str) -> None:
        """Unregister the reminder `name`; one already gone (a one-shot that just fired, or
        removed before) is as good, so a failure here never fails the call."""
        with contextlib.suppress(Exception):
            await self.unregister_reminder(name)

    async def expired(self) -> None:
        """The retention of a finished record ended: drop it (override to also unlist it)."""
        await self.forget()

    async def forget(self) -> None:
        """Remove the actor's state; the next activation starts from `initial_state()`."""
        await self._state_manager.try_remove_state(STATE_KEY)
        await self._state_manager.save_state()
        self.state = self.initial_state()

    def snapshot(self) -> dict[str, Any]:
        return self.state.model_dump(mode="json")


@dataclass(frozen=True)
class ActorHosting(Generic[D]):
    """An actor type an app hosts, and the dependencies each of its instances gets."""

    actor_type: type[PydanticActor[Any, D]]
    deps: D

    def factory(self, ctx: ActorRuntimeContext, actor_id: ActorId) -> Actor:
        return self.actor_type(ctx, actor_id, self.deps)

    def resolve_annotations(self) -> None:
        """Make the interface's annotations real types (a module with postponed annotations
        has strings there), so the runtime hands `ModelSerializer` the declared types."""
        for interface in self.actor_type.__mro__:
            if isinstance(interface, type) and issubclass(interface, ActorInterface):
                for member in vars(interface).values():
                    if callable(member) and hasattr(member, "__annotations__"):
                        member.__annotations__ = typing.get_type_hints(member)


@dataclass(frozen=True)
class InvalidActorArgument:
    """An actor method's argument that failed validation (see `ModelSerializer`)."""

    error: ValidationError


class ModelSerializer(Serializer):  # type: ignore[misc]
    """Actor messages as JSON: models in and out by their declared types; everything else (the
    runtime's own reminder and timer bodies) as the SDK's default serializer does it."""

    def __init__(self) -> None:
        self._default = DefaultJSONSerializer()

    def serialize(self, obj: object, custom_hook: Callable[[object], bytes] | None = None) -> bytes:
        if isinstance(obj, BaseModel):
            return obj.model_dump_json().encode()
        serialized: bytes = self._default.serialize(obj, custom_hook)
        return serialized

    def deserialize(
        self, data: bytes, data_type: Any = object, custom_hook: Callable[[bytes], object] | None = None
    ) -> Any:
        if data_type is object or data_type is Any:
            return self._default.deserialize(data, data_type, custom_hook)
        try:
            return type_adapter(data_type).validate_json(data or b"null")
        except ValidationError as exc:
            return InvalidActorArgument(exc)


class StateSerializer(ModelSerializer):
    """Actor state as JSON: a state's JSON data (`PydanticActor.commit` hands over its
    `model_dump`) written by orjson, as the SDK's pure-Python encoder took measurably longer on
    every commit; anything else as `ModelSerializer` writes it."""

    def serialize(self, obj: object, custom_hook: Callable[[object], bytes] | None = None) -> bytes:
        if type(obj) is dict:
            return orjson.dumps(obj)
        return super().serialize(obj, custom_hook)


def actor_endpoint(method: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """Answer an actor method as `ActorAnswer`: its result, or a typed domain error, so
    `ActorClient` raises the same error type on the caller's side (Dapr itself would flatten
    every exception into an opaque 500). The declared type stays the method's own result,
    which is what callers receive."""

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> ActorAnswer:
        for arg in (*args, *kwargs.values()):
            if isinstance(arg, InvalidActorArgument):
                return _invalid(arg.error)
        actor = args[0]
        assert isinstance(actor, PydanticActor), "actor_endpoint decorates PydanticActor methods"
        async with actor.turn():
            try:
                result = await method(*args, **kwargs)
            except AgoraError as exc:
                actor.doubt_state()
                return ActorAnswer(error=exc.body())
            except ValidationError as exc:
                actor.doubt_state()
                return _invalid(exc)
        return ActorAnswer(result=result)

    return cast(Callable[P, Coroutine[Any, Any, R]], wrapper)


def _invalid(exc: ValidationError) -> ActorAnswer:
    errors = field_errors(exc.errors())
    summary = describe_field_errors(errors, exc.error_count())
    return ActorAnswer(error=InvalidArgument(f"invalid {exc.title}: {summary}", errors=errors).body())


class SidecarActorClient(DaprActorClientBase):  # type: ignore[misc]
    """The actor runtime's own calls (actor state, reminders, timers) over the app's pooled,
    traced sidecar client. The SDK's default opens a new connection for every such call and
    leaves them out of the trace; under load that connection churn was most of a task board's
    CPU time."""

    def __init__(self, sidecar: DaprSidecar) -> None:
        self._sidecar = sidecar
        self._tracer = tracer("agora.actors")

    async def _call(
        self,
        operation: str,
        method: str,
        actor_type: str,
        actor_id: str,
        rest: str,
        data: bytes | None = None,
    ) -> bytes:
        """One runtime call under a CLIENT span `actor <operation> <type>`."""
        with self._tracer.start_as_current_span(
            f"actor {operation} {actor_type}",
            kind=SpanKind.CLIENT,
            attributes={"dapr.actor.type": actor_type},
        ):
            headers = {"content-type": "application/json"} if data is not None else None
            path = f"/v1.0/actors/{actor_type}/{actor_id}/{rest}"
            response = await self._sidecar.request(method, path, content=data, headers=headers)
        return response.content

    async def invoke_method(
        self, actor_type: str, actor_id: str, method: str, data: bytes | None = None
    ) -> bytes:
        path = f"/v1.0/actors/{actor_type}/{actor_id}/method/{method}"
        response = await self._sidecar.request("PUT", path, content=data, idempotent=False)
        return response.content

    async def save_state_transactionally(self, actor_type: str, actor_id: str, data: bytes) -> None:
        await self._call("save_state", "PUT", actor_type, actor_id, "state", data)

    async def get_state(self, actor_type: str, actor_id: str, name: str) -> bytes:
        return await self._call("get_state", "GET", actor_type, actor_id, f"state/{name}")

    async def register_reminder(self, actor_type: str, actor_id: str, name: str, data: bytes) -> None:
        await self._call("register_reminder", "PUT", actor_type, actor_id, f"reminders/{name}", data)

    async def unregister_reminder(self, actor_type: str, actor_id: str, name: str) -> None:
        await self._call("unregister_reminder", "DELETE", actor_type, actor_id, f"reminders/{name}")

    async def register_timer(self, actor_type: str, actor_id: str, name: str, data: bytes) -> None:
        await self._call("register_timer", "PUT", actor_type, actor_id, f"timers/{name}", data)

    async def unregister_timer(self, actor_type: str, actor_id: str, name: str) -> None:
        await self._call("unregister_timer", "DELETE", actor_type, actor_id, f"timers/{name}")
