"""Several modules of one app may handle one topic; the topic keeps one payload type."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from agora.core import topics
from agora.core.limits import MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.market import TaskSpec
from agora.core.messages import DeadLetter, DeregisterAgent, Topic
from agora.core.topics import EVERY_CHANNEL, channel
from agora.runtime.pubsub import MessageDeduplicator, RejectMessage, Subscriptions
from agora.runtime.settings import ServiceSettings


class Ping(BaseModel):
    n: int


PING = channel("agora.ping", Ping)


class Pong(BaseModel):
    n: int


def subscriptions() -> Subscriptions:
    return Subscriptions(ServiceSettings(), publisher=None, deduplicator=MessageDeduplicator(None, 60))  # type: ignore[arg-type]


async def test_handlers_of_one_topic_share_one_subscription_and_all_run() -> None:
    subs = subscriptions()
    seen: list[tuple[str, int]] = []

    async def first(p: Ping) -> None:
        seen.append(("first", p.n))

    async def second(p: Ping) -> None:
        seen.append(("second", p.n))

    subs.subscribe(PING, first)
    subs.subscribe(PING, second)
    [sub] = subs._subscriptions
    event: dict[str, Any] = {"id": "e-1", "data": {"n": 7}}
    import json

    assert await subs.deliver(sub, json.dumps(event).encode(), {}) == "SUCCESS"
    assert seen == [("first", 7), ("second", 7)]
    assert await subs.deliver(sub, json.dumps(event).encode(), {}) == "SUCCESS"
    assert len(seen) == 2, "a redelivered event is not handled again"


def test_one_topic_keeps_one_payload_type() -> None:
    subs = subscriptions()

    async def handle(_: Any) -> None: ...

    subs.subscribe(PING, handle)
    with pytest.raises(ValueError, match="already subscribed with another payload type"):
        subs.subscribe(channel("agora.ping", Pong), handle)


class _OtherReplicaHandledEverything:
    """A shared store in which another replica already marked every message as handled."""

    async def get(self, key: str) -> object:
        return object()

    async def save(self, *args: object, **kwargs: object) -> None:
        return None


async def test_fan_out_topics_are_handled_by_every_replica_work_topics_once() -> None:
    settings = ServiceSettings()
    subs = Subscriptions(
        settings,
        publisher=None,  # type: ignore[arg-type]
        deduplicator=MessageDeduplicator(_OtherReplicaHandledEverything(), 60),  # type: ignore[arg-type]
    )
    handled: list[str] = []

    async def on_change(p: Ping) -> None:
        handled.append("broadcast")

    async def on_work(p: Ping) -> None:
        handled.append("work")

    subs.subscribe(channel("agora.changed", Ping), on_change, pubsub=settings.broadcast_pubsub)
    subs.subscribe(channel("agora.work", Ping), on_work)
    import json

    event = json.dumps({"id": "e-9", "data": {"n": 1}}).encode()
    for sub in subs._subscriptions:
        assert await subs.deliver(sub, event, {}) == "SUCCESS"
    assert handled == ["broadcast"], (
        "the work topic's marker counts across replicas; the fan-out one does not"
    )


def test_every_topic_has_one_channel() -> None:
    assert sorted(c.name for c in EVERY_CHANNEL) == sorted(t.value for t in Topic)


def test_a_channel_reads_its_messages_into_its_payload_type() -> None:
    spec = topics.TASKS.adapter.validate_python(
        {"task_id": "t", "description": "d", "required_skills": ["s"]}
    )
    assert isinstance(spec, TaskSpec)
    command = topics.REGISTRY_COMMANDS.adapter.validate_python({"kind": "deregister", "agent_id": "a"})
    assert isinstance(command, DeregisterAgent)


class _Letters:
    def __init__(self) -> None:
        self.sent: list[DeadLetter] = []

    async def dead_letter(self, letter: DeadLetter) -> None:
        self.sent.append(letter)


async def test_a_dead_letter_keeps_within_its_bounds_whatever_the_message_brings() -> None:
    letters = _Letters()
    subs = Subscriptions(ServiceSettings(), publisher=letters, deduplicator=MessageDeduplicator(None, 60))  # type: ignore[arg-type]

    async def refuse(p: Ping) -> None:
        raise RejectMessage("r" * (MAX_TEXT_CHARS + 10))

    subs.subscribe(PING, refuse)
    [sub] = subs._subscriptions
    event = json.dumps({"id": "i" * (MAX_NOTE_CHARS + 10), "data": {"n": 1}}).encode()
    assert await subs.deliver(sub, event, {}) == "SUCCESS"
    [letter] = letters.sent
    assert letter.message_id == "i" * MAX_NOTE_CHARS
    assert letter.reason == "r" * MAX_TEXT_CHARS
    DeadLetter.model_validate(letter.model_dump(mode="json"))


def test_a_reply_only_subscription_is_a_routing_rule_on_the_app_s_id_without_a_dead_letter_topic() -> None:
    subs = Subscriptions(
        ServiceSettings(app_id="planner"),
        publisher=None,  # type: ignore[arg-type]
        deduplicator=MessageDeduplicator(None, 60),  # type: ignore[arg-type]
    )

    async def handle(_: object) -> None:
        return None

    subs.subscribe(topics.TASK_REJECTED, handle, replies_only=True)
    subs.subscribe(topics.TASK_OUTCOME_RECORDED, handle, replies_only=True)
    subs.subscribe(topics.TASK_OUTCOME_RECORDED, handle)  # another module of the app takes them all
    rejected, recorded = (subs.declaration(sub) for sub in subs._subscriptions)

    route = "/events/agora-pubsub/agora.task.rejected"
    assert rejected == {
        "pubsubname": "agora-pubsub",
        "topic": "agora.task.rejected",
        "routes": {
            "rules": [{"match": 'has(event.agorareplyto) && event.agorareplyto == "planner"', "path": route}]
        },
    }
    assert (
        recorded["route"] == "/events/agora-pubsub/agora.task.outcome.recorded" and "routes" not in recorded
    )
    assert recorded["deadLetterTopic"] == "agora.deadletter"
