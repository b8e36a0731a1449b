"""Services call each other's actors by the type names in `ActorType`; Dapr registers an
actor under its class name. The two must agree."""

from agora.core.messages import ActorType
from agora.escalation.actors import Escalation
from agora.reputation.actors import Reputation
from agora.taskboard.actors import Task
from agora.uncertainty.actors import SessionUncertainty
from agora.worker.actors import WorkerAgent


def test_every_actor_type_names_its_actor_class() -> None:
    classes = [Task, Reputation, WorkerAgent, Escalation, SessionUncertainty]
    assert sorted(cls.__name__ for cls in classes) == sorted(member.value for member in ActorType)
