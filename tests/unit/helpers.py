"""Helpers shared by the unit tests."""

from __future__ import annotations

from typing import Any, cast

from dapr.actor import Actor
from dapr.actor.runtime.mock_state_manager import MockStateManager


def mock_state(actor: Actor) -> dict[str, Any]:
    """What an actor made by `create_mock_actor` has saved, by state name."""
    return cast(MockStateManager, actor._state_manager)._mock_state
