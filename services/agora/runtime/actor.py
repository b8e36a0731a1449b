"""Base class for Dapr actors whose whole state is one pydantic model."""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from dapr.actor import Actor
from pydantic import BaseModel

S = TypeVar("S", bound=BaseModel)

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
