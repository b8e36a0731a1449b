"""What both sides of an actor call share: the interfaces that declare an actor's methods (and
the Dapr actor type implementing them), the name Dapr routes each method's calls by, and the
answer every method gives (`ActorAnswer`). The calling side is `agora.runtime.actor_client`, the
hosting side `agora.runtime.actor_host`, as the Dapr SDK has `dapr.actor.client` and
`dapr.actor.runtime` beside `dapr.actor.actor_interface`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, cast

from dapr.actor import ActorInterface, actormethod
from pydantic import BaseModel, TypeAdapter

from agora.core.errors import ErrorBody

__all__ = ["ActorAnswer", "AgoraActorInterface", "actor_method", "actor_methods", "type_adapter", "wire_name"]

F = TypeVar("F", bound=Callable[..., Any])


def actor_method(name: str) -> Callable[[F], F]:
    """Declare an interface method and the name Dapr routes its calls by: the SDK's
    `actormethod`, typed, so the method keeps its signature for mypy (and for the proxies)."""
    return cast(Callable[[F], F], actormethod(name=name))


class AgoraActorInterface(ActorInterface):  # type: ignore[misc]
    """An actor interface that names the Dapr actor type implementing it (its host class's
    name), so a typed proxy needs nothing else to reach it."""

    actor_type: ClassVar[str]


def actor_methods(interface: type[ActorInterface]) -> dict[str, Callable[..., Any]]:
    """The methods an actor interface declares (with those of the interfaces it extends), by
    their Python name."""
    found: dict[str, Callable[..., Any]] = {}
    for cls in reversed(interface.__mro__):
        if isinstance(cls, type) and issubclass(cls, ActorInterface):
            found.update(
                (name, member) for name, member in vars(cls).items() if hasattr(member, "__actormethod__")
            )
    return found


def wire_name(method: Callable[..., Any]) -> str:
    """The name Dapr routes an interface method's calls by (its `actormethod` name)."""
    name = getattr(method, "__actormethod__", None)
    return name if isinstance(name, str) else method.__name__


class ActorAnswer(BaseModel):
    """What every actor method answers (`actor_host.actor_endpoint`): its result, or the typed
    error as the `ErrorBody` every error answer has."""

    result: Any = None
    error: ErrorBody | None = None


@functools.cache
def type_adapter(data_type: Any) -> TypeAdapter[Any]:
    """The validator of a method's declared argument or result type, made once per type."""
    return TypeAdapter(data_type)
