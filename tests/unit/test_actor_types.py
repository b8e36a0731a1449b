"""Services reach each other's actors through proxies typed as the actors' interfaces: the
interface names the Dapr actor type (its host class's name) and the wire name of each method,
and nothing else in the code names an actor method by string."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from dapr.actor.runtime._type_utils import get_dispatchable_attrs
from pydantic import BaseModel

from agora.core.messages import ActorType
from agora.core.task_lifecycle import TaskRecord
from agora.escalation.actors import Escalation
from agora.reputation.actors import Reputation
from agora.runtime.actor_client import ActorClient, Actors
from agora.runtime.actor_host import PydanticActor
from agora.runtime.actor_interface import AgoraActorInterface, actor_methods, wire_name
from agora.runtime.interfaces import TaskInterface
from agora.taskboard.actors import Task
from agora.taskboard.agent_runs import AgentRuns
from agora.uncertainty.actors import SessionUncertainty

HOSTS: list[type[PydanticActor[Any, Any]]] = [Task, AgentRuns, Reputation, Escalation, SessionUncertainty]
ROOT = Path(__file__).resolve().parents[2]
SPEC = {"task_id": "t-1", "description": "d", "required_skills": ["s"]}


class RecordingClient(ActorClient):
    """The actor client a proxy calls through: records each call, answers `answer`."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str, str, Any]] = []

    async def call(self, actor_type: str, actor_id: str, method: str, payload: Any = None) -> Any:
        self.calls.append((actor_type, actor_id, method, payload))
        return self.answer


def interface_of(host: type[Any]) -> type[AgoraActorInterface]:
    return next(
        c
        for c in host.__mro__
        if c is not host and issubclass(c, AgoraActorInterface) and c.__dict__.get("actor_type")
    )


def test_every_actor_type_names_its_host_class_and_its_interface() -> None:
    assert sorted(host.__name__ for host in HOSTS) == sorted(member.value for member in ActorType)
    for host in HOSTS:
        assert interface_of(host).actor_type == host.__name__
        assert interface_of(host).__name__ == f"{host.__name__}Interface"  # one naming pattern


def test_every_interface_method_is_routed_by_its_own_name_and_implemented_by_its_host() -> None:
    for host in HOSTS:
        for name, method in actor_methods(interface_of(host)).items():
            assert wire_name(method) == name
            assert getattr(host, name) is not method, f"{host.__name__}.{name} is not implemented"


async def test_a_proxy_calls_the_actor_method_and_answers_the_declared_model() -> None:
    client = RecordingClient(TaskRecord.model_validate({"spec": SPEC}).model_dump(mode="json"))
    tasks = Actors(client, TaskInterface)
    spec = TaskRecord.model_validate({"spec": SPEC}).spec

    record = await tasks("t-1").post_task(spec)

    assert isinstance(record, TaskRecord) and record.spec == spec
    assert client.calls == [("Task", "t-1", "post_task", spec)]


async def test_a_proxy_refuses_a_call_with_the_wrong_number_of_arguments() -> None:
    proxy: Any = RecordingClient(None).proxy(TaskInterface, "t-1")
    with pytest.raises(TypeError, match="get_task takes 0 argument"):
        await proxy.get_task(TaskRecord.model_validate({"spec": SPEC}).spec)


def _calls_naming_a_method(path: Path) -> list[str]:
    """Calls shaped like `x.call(actor_type, actor_id, "method", ...)`: an actor method named
    by a string literal."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "call"
            and len(node.args) >= 3
            and isinstance(node.args[2], ast.Constant)
            and isinstance(node.args[2].value, str)
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_code_names_an_actor_method_by_string() -> None:
    sources = [p for folder in ("services", "tests", "bench") for p in (ROOT / folder).rglob("*.py")]
    assert [hit for path in sources for hit in _calls_naming_a_method(path)] == []


def test_the_models_actors_take_are_the_contract_models() -> None:
    for host in HOSTS:
        for method in actor_methods(interface_of(host)).values():
            for name, kind in method.__annotations__.items():
                if name != "return" and isinstance(kind, type):
                    assert issubclass(kind, BaseModel), f"{host.__name__}.{method.__name__}({name})"


def test_the_actor_runtime_routes_every_interface_method_to_its_host() -> None:
    for host in HOSTS:
        routed = set(get_dispatchable_attrs(host))
        assert routed == {wire_name(m) for m in actor_methods(interface_of(host)).values()}, host.__name__
