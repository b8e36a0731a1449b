"""Base class for Dapr actors whose whole state is one pydantic model."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Generic, ParamSpec, TypeVar

from dapr.actor import Actor
from dapr.clients.base import DaprActorClientBase
from opentelemetry.trace import SpanKind
from pydantic import BaseModel, ValidationError

from agora.core.errors import AgoraError, InvalidInput, error_from
from agora.runtime.errors import describe_field_errors, field_errors
from agora.runtime.sidecar import DaprSidecar
from agora.runtime.tracing import tracer

S = TypeVar("S", bound=BaseModel)
P = ParamSpec("P")

STATE_KEY = "state"


class PydanticActor(Actor, Generic[S]):  # type: ignore[misc]
    """Loads `state_model` on activation and persists it with `commit()`.

    The actor runtime serializes calls per actor id (turn-based concurrency), so a method
    that mutates `self.state` and then commits never interleaves with another call on the
    same actor. State lives in the actor state store under the `state` key; it is stored as
    plain JSON so other tools can read it.
    """

    state_model: ClassVar[type[BaseModel]]
    state: S

    async def _on_activate(self) -> None:
        found, raw = await self._state_manager.try_get_state(STATE_KEY)
        self.state = self.state_model.model_validate(raw) if found else self.initial_state()  # type: ignore[assignment]

    def initial_state(self) -> S:
        return self.state_model()  # type: ignore[return-value]

    async def commit(self) -> None:
        await self._state_manager.set_state(STATE_KEY, self.state.model_dump(mode="json"))
        await self._state_manager.save_state()

    async def forget(self) -> None:
        """Remove the actor's state; the next activation starts from `initial_state()`."""
        await self._state_manager.try_remove_state(STATE_KEY)
        await self._state_manager.save_state()
        self.state = self.initial_state()

    def snapshot(self) -> dict[str, Any]:
        return self.state.model_dump(mode="json")


def actor_endpoint(method: Callable[P, Awaitable[Any]]) -> Callable[P, Awaitable[dict[str, Any]]]:
    """Wrap an actor method's answer as `{"result": ...}`, and a typed domain error as
    `{"error": {"code", "message"}}`, so `ActorClient` raises the same error type on the
    caller's side (Dapr itself would flatten every exception into an opaque 500)."""

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        try:
            result = await method(*args, **kwargs)
        except AgoraError as exc:
            return {"error": {"code": exc.code, "message": exc.message}}
        except ValidationError as exc:
            errors = field_errors(exc.errors())
            invalid = InvalidInput(f"invalid {exc.title}: {describe_field_errors(errors, exc.error_count())}")
            return {"error": {"code": invalid.code, "message": invalid.message}}
        if isinstance(result, BaseModel):
            result = result.model_dump(mode="json")
        return {"result": result}

    return wrapper


class ActorFault(BaseModel):
    code: str
    message: str


class ActorAnswer(BaseModel):
    """What every actor method answers (`actor_endpoint`): its result, or the typed error."""

    result: Any = None
    error: ActorFault | None = None


ACTOR_CALL_TIMEOUT_SECONDS = 60.0
"""How long a caller waits for an actor method. Calls to one actor run one at a time, so under
load a call may wait its turn for a while; giving up early and sending it again would only
queue a second copy behind the first (which the app keeps running)."""


class ActorClient:
    """Calls actor methods through the sidecar (`/v1.0/actors/...`), carrying the trace."""

    def __init__(self, sidecar: DaprSidecar, timeout_seconds: float = ACTOR_CALL_TIMEOUT_SECONDS) -> None:
        self._sidecar = sidecar
        self._timeout = timeout_seconds

    async def call(self, actor_type: str, actor_id: str, method: str, payload: Any = None) -> Any:
        body = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload
        response = await self._sidecar.request(
            "PUT",
            f"/v1.0/actors/{actor_type}/{actor_id}/method/{method}",
            json_body=body,
            timeout=self._timeout,
        )
        envelope = ActorAnswer.model_validate_json(response.content) if response.content else ActorAnswer()
        if envelope.error is not None:
            raise error_from(envelope.error.code, envelope.error.message)
        return envelope.result


class SidecarActorClient(DaprActorClientBase):  # type: ignore[misc]
    """The actor runtime's own calls (actor state, reminders, timers) over the app's pooled,
    traced sidecar client. The SDK's default opens a new connection for every such call and
    leaves them out of the trace; under load that connection churn was most of a task board's
    CPU time."""

    def __init__(self, sidecar: DaprSidecar) -> None:
        self._sidecar = sidecar
        self._tracer = tracer("agora.actors")

    def _traced(self, operation: str, actor_type: str) -> Any:
        return self._tracer.start_as_current_span(
            f"actor {operation} {actor_type}",
            kind=SpanKind.CLIENT,
            attributes={"dapr.actor.type": actor_type},
        )

    @staticmethod
    def _path(actor_type: str, actor_id: str, rest: str) -> str:
        return f"/v1.0/actors/{actor_type}/{actor_id}/{rest}"

    async def invoke_method(
        self, actor_type: str, actor_id: str, method: str, data: bytes | None = None
    ) -> bytes:
        path = self._path(actor_type, actor_id, f"method/{method}")
        response = await self._sidecar.request("PUT", path, content=data, idempotent=False)
        return response.content

    async def save_state_transactionally(self, actor_type: str, actor_id: str, data: bytes) -> None:
        with self._traced("save_state", actor_type):
            await self._sidecar.request(
                "PUT",
                self._path(actor_type, actor_id, "state"),
                content=data,
                headers={"content-type": "application/json"},
            )

    async def get_state(self, actor_type: str, actor_id: str, name: str) -> bytes:
        with self._traced("get_state", actor_type):
            response = await self._sidecar.request("GET", self._path(actor_type, actor_id, f"state/{name}"))
        return response.content

    async def register_reminder(self, actor_type: str, actor_id: str, name: str, data: bytes) -> None:
        with self._traced("register_reminder", actor_type):
            await self._sidecar.request(
                "PUT",
                self._path(actor_type, actor_id, f"reminders/{name}"),
                content=data,
                headers={"content-type": "application/json"},
            )

    async def unregister_reminder(self, actor_type: str, actor_id: str, name: str) -> None:
        with self._traced("unregister_reminder", actor_type):
            await self._sidecar.request("DELETE", self._path(actor_type, actor_id, f"reminders/{name}"))

    async def register_timer(self, actor_type: str, actor_id: str, name: str, data: bytes) -> None:
        await self._sidecar.request(
            "PUT",
            self._path(actor_type, actor_id, f"timers/{name}"),
            content=data,
            headers={"content-type": "application/json"},
        )

    async def unregister_timer(self, actor_type: str, actor_id: str, name: str) -> None:
        await self._sidecar.request("DELETE", self._path(actor_type, actor_id, f"timers/{name}"))
