"""What Agora relies on of the Dapr SDK's private names (`agora.runtime.dapr_private`) and of
`Actor`'s protected subclass interface: an SDK upgrade that changes one of them fails here,
naming what changed, before it fails a service."""

from __future__ import annotations

import json
import typing
from datetime import timedelta
from typing import Any

from dapr.actor import Actor, ActorId, ActorInterface
from dapr.actor.runtime._type_information import ActorTypeInformation
from dapr.actor.runtime.context import ActorRuntimeContext
from dapr.actor.runtime.manager import ActorManager
from dapr.actor.runtime.mock_actor import create_mock_actor
from dapr.actor.runtime.state_manager import ActorStateManager
from dapr.clients.base import DaprActorClientBase
from dapr.ext.workflow import DaprWorkflowContext, RetryPolicy, when_all, when_any
from dapr.ext.workflow._durabletask.internal.helpers import new_failure_details
from dapr.ext.workflow._durabletask.task import is_error_non_retryable

from agora.runtime.actor_host import ModelSerializer, StateSerializer
from agora.runtime.actor_interface import actor_method
from agora.runtime.dapr_private import NonRetryableError, Task, reminder_registration, stage_new_state


class RecordingSidecar(DaprActorClientBase):  # type: ignore[misc]
    """The actor runtime's calls to its sidecar, recorded; state reads find `stored`."""

    def __init__(self, stored: dict[str, Any] | None = None) -> None:
        self.stored = stored or {}
        self.calls: list[tuple[str, Any]] = []

    async def get_state(self, actor_type: str, actor_id: str, name: str) -> bytes:
        self.calls.append(("get_state", name))
        return json.dumps(self.stored[name]).encode() if name in self.stored else b""

    async def save_state_transactionally(self, actor_type: str, actor_id: str, data: bytes) -> None:
        self.calls.append(("save_state", json.loads(data)))

    async def register_reminder(self, actor_type: str, actor_id: str, name: str, data: bytes) -> None:
        self.calls.append(("register_reminder", (actor_type, actor_id, name, data)))

    async def invoke_method(self, *args: object) -> bytes:
        raise NotImplementedError

    async def unregister_reminder(self, *args: object) -> None:
        raise NotImplementedError

    async def register_timer(self, *args: object) -> None:
        raise NotImplementedError

    async def unregister_timer(self, *args: object) -> None:
        raise NotImplementedError


class ProbeInterface(ActorInterface):
    @actor_method(name="Touch")
    async def touch(self) -> None: ...


class Probe(Actor, ProbeInterface):  # type: ignore[misc]
    """Counts its activations, through the hook the SDK documents for subclasses."""

    activations = 0

    async def _on_activate(self) -> None:
        type(self).activations += 1

    async def touch(self) -> None:
        return None


def hosted_probe(sidecar: RecordingSidecar) -> Probe:
    """A `Probe` on the SDK's own runtime context and state manager, serialized as apps
    register actors."""
    context = ActorRuntimeContext(
        ActorTypeInformation.create(Probe), ModelSerializer(), StateSerializer(), sidecar, None
    )
    return Probe(context, ActorId("p-1"))


async def test_a_reminder_registered_from_outside_has_the_body_of_one_the_actor_registers() -> None:
    for period in (None, timedelta(minutes=1)):
        sidecar = RecordingSidecar()
        await hosted_probe(sidecar).register_reminder("deadline", b"\x00state", timedelta(seconds=5), period)
        [(_, (actor_type, actor_id, name, body))] = sidecar.calls
        assert (actor_type, actor_id, name) == ("Probe", "p-1", "deadline")
        assert reminder_registration("deadline", b"\x00state", timedelta(seconds=5), period) == body
    assert json.loads(body) == {
        "reminderName": "deadline",
        "dueTime": "0h0m5s0ms0μs",
        "period": "0h1m0s0ms0μs",
        "data": "AHN0YXRl",
    }


async def test_a_staged_new_state_is_added_by_the_next_save_without_reading_the_store() -> None:
    sidecar = RecordingSidecar()
    manager = hosted_probe(sidecar)._state_manager
    assert type(manager) is ActorStateManager

    assert stage_new_state(manager, "state", {"count": 1}, 60)
    await manager.save_state()

    upsert = {"key": "state", "value": {"count": 1}, "metadata": {"ttlInSeconds": "60"}}
    assert sidecar.calls == [("save_state", [{"operation": "upsert", "request": upsert}])]


async def test_a_state_the_turn_already_changed_is_not_staged_again() -> None:
    sidecar = RecordingSidecar()
    manager = hosted_probe(sidecar)._state_manager
    await manager.set_state("state", {"count": 1})

    assert not stage_new_state(manager, "state", {"count": 2}, None)
    await manager.save_state()

    saved = [call for call in sidecar.calls if call[0] == "save_state"]
    assert saved == [
        ("save_state", [{"operation": "upsert", "request": {"key": "state", "value": {"count": 1}}}])
    ]


def test_nothing_is_staged_in_the_sdks_test_double() -> None:
    mock = create_mock_actor(Probe, "p-1")
    assert type(mock._state_manager) is not ActorStateManager
    assert not stage_new_state(mock._state_manager, "state", {"count": 1}, None)


def test_the_workflow_engine_does_not_retry_a_non_retryable_error() -> None:
    policy = RetryPolicy(first_retry_interval=timedelta(seconds=1), max_number_of_attempts=3).obj
    failure = new_failure_details(NonRetryableError("plan.draft: KeyError"))
    assert failure.errorType == "NonRetryableError"
    assert is_error_non_retryable(failure.errorType, policy)
    assert not is_error_non_retryable(new_failure_details(ValueError("x")).errorType, policy)


def test_the_steps_a_workflow_schedules_are_of_the_task_type() -> None:
    for schedule in ("call_activity", "call_child_workflow", "wait_for_external_event", "create_timer"):
        declared = typing.get_type_hints(getattr(DaprWorkflowContext, schedule))["return"]
        assert (typing.get_origin(declared) or declared) is Task, schedule
    for combine in (when_all, when_any):
        [taken] = typing.get_args(typing.get_type_hints(combine)["tasks"])
        assert (typing.get_origin(taken) or taken) is Task, combine.__name__


async def test_the_runtime_activates_an_actor_through_its_on_activate_hook() -> None:
    sidecar = RecordingSidecar()
    context = ActorRuntimeContext(
        ActorTypeInformation.create(Probe),
        ModelSerializer(),
        StateSerializer(),
        sidecar,
        lambda ctx, actor_id: Probe(ctx, actor_id),
    )
    Probe.activations = 0
    await ActorManager(context).dispatch(ActorId("p-2"), "Touch", b"")
    assert Probe.activations == 1
