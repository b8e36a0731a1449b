"""The Dapr Python SDK's private names Agora relies on, all in this one module: each is here
because the SDK offers no public way to do what it does, and each is pinned by
`tests/unit/test_dapr_private.py`, so an SDK upgrade that changes one fails there first.

- `reminder_registration` builds a reminder's registration body with `ActorReminderData`
  (`dapr.actor.runtime._reminder_data`), as the SDK's own `Actor.register_reminder` does:
  `ActorClient.register_reminder` registers a reminder on an actor from outside it (the
  escalation service sets a deadline's reminder as it parks one), and the actor's
  `receive_reminder` must read it as one it registered itself.
- `stage_new_state` writes a state change into the actor state manager's tracker of unsaved
  changes (`ActorStateManager._get_contextual_state_tracker`): `PydanticActor.commit` adds a new
  actor's first state there, where `set_state` would first ask the store whether it exists (a
  read on every new actor's first write) though the activation just found it absent.
- `NonRetryableError` (`dapr.ext.workflow._durabletask.task`, not exported by
  `dapr.ext.workflow`): the failure the workflow engine does not retry, recognized by its type
  name; `WorkflowHost` raises it for an activity's permanent failure.
- `Task` (the same module, not exported either): the type of the steps a workflow schedules, as
  `DaprWorkflowContext.call_activity`, `call_child_workflow`, `wait_for_external_event` and
  `create_timer` declare it and `when_all`/`when_any` take them; `agora.runtime.workflows` types
  a scheduled step with it.

Not here: `Actor._on_activate` and `Actor._state_manager`, the hook and the state of an actor
that the SDK documents for its subclasses (its `Actor` example overrides `_on_activate`); the
same test pins them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dapr.actor.runtime._reminder_data import ActorReminderData
from dapr.actor.runtime.state_change import StateChangeKind
from dapr.actor.runtime.state_manager import ActorStateManager, StateMetadata
from dapr.ext.workflow._durabletask.task import NonRetryableError, Task
from dapr.serializers import DefaultJSONSerializer

__all__ = ["NonRetryableError", "Task", "reminder_registration", "stage_new_state"]


def reminder_registration(name: str, state: bytes, due: timedelta, period: timedelta | None) -> bytes:
    """The body of `PUT /v1.0/actors/{type}/{id}/reminders/{name}` for a reminder that fires
    first after `due` (then every `period`, if given) with `state`."""
    body: bytes = DefaultJSONSerializer().serialize(ActorReminderData(name, state, due, period).as_dict())
    return body


def stage_new_state(
    manager: ActorStateManager[Any], name: str, value: object, ttl_seconds: int | None
) -> bool:
    """Stage the state `name` as added, for the manager's next `save_state`, without the read
    `set_state` makes first; for a state the caller knows the store does not hold. Nothing is
    staged (False) when the current turn already changed `name`, or when `manager` is not the
    SDK's own (the SDK's test double tracks changes its own way)."""
    if type(manager) is not ActorStateManager:
        return False
    unsaved = manager._get_contextual_state_tracker()
    if name in unsaved:
        return False
    unsaved[name] = StateMetadata(value, StateChangeKind.add, ttl_seconds)
    return True
