"""The calling side of actors: `ActorClient.proxy(Interface, actor_id)` (or an `Actors` family)
answers an object typed as the actor's interface (`agora.runtime.interfaces`), whose methods call
the actor through the sidecar and read the answer into the declared result type, as the Dapr
SDK's `ActorProxy.create(..., ActorInterface)` does; a typed error the actor answered is raised
as that error on the caller's side."""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel, TypeAdapter

from agora.core.errors import error_from
from agora.runtime.actor_interface import (
    ActorAnswer,
    AgoraActorInterface,
    actor_methods,
    type_adapter,
    wire_name,
)
from agora.runtime.dapr_private import reminder_registration
from agora.runtime.sidecar import DaprSidecar

__all__ = ["ACTOR_CALL_TIMEOUT_SECONDS", "ActorClient", "Actors"]

Iface = TypeVar("Iface", bound=AgoraActorInterface)

ACTOR_CALL_TIMEOUT_SECONDS = 60.0
"""How long a caller waits for an actor method. Calls to one actor run one at a time, so under
load a call may wait its turn for a while; giving up early and sending it again would only
queue a second copy behind the first (which the app keeps running)."""


class ActorClient:
    """Calls actor methods through the sidecar (`/v1.0/actors/...`), carrying the trace."""

    def __init__(
        self,
        sidecar: DaprSidecar,
        timeout_seconds: float = ACTOR_CALL_TIMEOUT_SECONDS,
        *,
        retry_timeouts: bool = True,
    ) -> None:
        self._sidecar = sidecar
        self._timeout = timeout_seconds
        self._retry_timeouts = retry_timeouts
        """Whether a call that timed out is sent again (a read answering a person is not: the
        person gets a typed 503 within the timeout, and may ask again)."""

    @classmethod
    def for_reads(cls, sidecar: DaprSidecar) -> ActorClient:
        """A client for reads that answer people's requests: one attempt, bounded by
        `AGORA_READ_TIMEOUT_SECONDS`; a read that does not answer in time raises
        `SidecarUnavailable`, which apps answer as a typed 503."""
        return cls(sidecar, sidecar.settings.read_timeout_seconds, retry_timeouts=False)

    async def call(self, actor_type: str, actor_id: str, method: str, payload: Any = None) -> Any:
        """Call `method` with `payload` (a model, as the method's interface declares) and return
        its result as JSON data; a typed error answer is raised as that error."""
        path = f"/v1.0/actors/{actor_type}/{actor_id}/method/{method}"
        if isinstance(payload, BaseModel):
            response = await self._sidecar.request(
                "PUT",
                path,
                content=payload.model_dump_json().encode(),
                headers={"content-type": "application/json"},
                timeout=self._timeout,
                idempotent=self._retry_timeouts,
            )
        else:
            response = await self._sidecar.request(
                "PUT", path, json_body=payload, timeout=self._timeout, idempotent=self._retry_timeouts
            )
        envelope = ActorAnswer.model_validate_json(response.content) if response.content else ActorAnswer()
        if envelope.error is not None:
            raise error_from(envelope.error.error, envelope.error.message, envelope.error.details)
        return envelope.result

    def proxy(self, interface: type[Iface], actor_id: str) -> Iface:
        """The actor `actor_id` of `interface`'s type, as an object typed as `interface`: each
        method calls the actor and answers the declared result type (a typed error answer is
        raised as that error)."""
        return cast(Iface, _proxy_class(interface)(self, interface.actor_type, actor_id))

    async def register_reminder(
        self,
        actor_type: str,
        actor_id: str,
        name: str,
        state: bytes,
        due: timedelta,
        period: timedelta | None,
    ) -> None:
        """Register a reminder on an actor from outside it (no turn of the actor needed); the
        actor's `receive_reminder` gets `state` as it would from its own registration."""
        body = reminder_registration(name, state, due, period)
        path = f"/v1.0/actors/{actor_type}/{actor_id}/reminders/{name}"
        await self._sidecar.request(
            "PUT", path, content=body, headers={"content-type": "application/json"}, timeout=self._timeout
        )


class Actors(Generic[Iface]):
    """The actors of one type: `actors(actor_id)` is the typed proxy of the one with that id."""

    def __init__(self, client: ActorClient, interface: type[Iface]) -> None:
        self.client = client
        self.interface = interface

    def __call__(self, actor_id: str) -> Iface:
        return self.client.proxy(self.interface, actor_id)


class _ActorProxy:
    def __init__(self, client: ActorClient, actor_type: str, actor_id: str) -> None:
        self._client = client
        self._actor_type = actor_type
        self._actor_id = actor_id

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._actor_type}/{self._actor_id}>"


@functools.cache
def _proxy_class(interface: type[AgoraActorInterface]) -> type[_ActorProxy]:
    methods: dict[str, Callable[..., Any]] = {}
    for name, method in actor_methods(interface).items():
        hints = typing.get_type_hints(method)
        result = type_adapter(hints.pop("return", Any))
        methods[name] = _proxy_method(wire_name(method), result, takes_argument=bool(hints))
    return type(f"{interface.__name__}Proxy", (_ActorProxy,), methods)


def _proxy_method(wire: str, result: TypeAdapter[Any], *, takes_argument: bool) -> Callable[..., Any]:
    async def call(self: _ActorProxy, *argument: BaseModel) -> Any:
        if len(argument) != int(takes_argument):
            raise TypeError(f"{wire} takes {int(takes_argument)} argument, got {len(argument)}")
        payload = argument[0] if argument else None
        answer = await self._client.call(self._actor_type, self._actor_id, wire, payload)
        return result.validate_python(answer)

    call.__name__ = wire
    return call
