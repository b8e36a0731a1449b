"""Publishes that come together go as one bulk publish; each fails alone if its event failed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from agora.core.topics import channel
from agora.runtime.pubsub import Publisher
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprError
from agora.runtime.tracing import tracer


class Note(BaseModel):
    text: str


NOTES = channel("notes", Note)
OTHER = channel("other-notes", Note)


class RecordingSidecar:
    def __init__(self, failing: set[str] | None = None, broker: str = "pubsub.redis") -> None:
        self.single: list[tuple[str, dict[str, Any]]] = []
        self.bulk: list[tuple[str, list[dict[str, Any]]]] = []
        self.failing = failing or set()
        self.broker = broker
        self.asked_for_components = 0

    async def component_type(self, name: str) -> str | None:
        self.asked_for_components += 1
        return self.broker

    async def publish(self, pubsub: str, topic: str, cloud_event: dict[str, Any]) -> None:
        self.single.append((topic, cloud_event))

    async def publish_bulk(
        self, pubsub: str, topic: str, cloud_events: list[dict[str, Any]]
    ) -> dict[int, str]:
        self.bulk.append((topic, cloud_events))
        return {i: "broker full" for i, e in enumerate(cloud_events) if e["data"]["text"] in self.failing}


def publisher(sidecar: RecordingSidecar) -> Publisher:
    return Publisher(sidecar, ServiceSettings(app_id="board"))  # type: ignore[arg-type]


async def test_publishes_that_come_together_go_as_one_bulk_publish_per_topic_each_with_its_trace(
    spans: InMemorySpanExporter,
) -> None:
    sidecar = RecordingSidecar()
    publish = publisher(sidecar)

    async def traced(text: str, topic: Any = NOTES) -> str:
        with tracer("test").start_as_current_span(text):
            return await publish.publish(topic, Note(text=text), message_id=f"id-{text}")

    ids = await asyncio.gather(traced("a"), traced("b"), traced("c"), traced("x", OTHER))

    assert list(ids) == ["id-a", "id-b", "id-c", "id-x"]
    [(topic, events)] = sidecar.bulk
    assert topic == "notes" and [e["data"]["text"] for e in events] == ["a", "b", "c"]
    assert all(e["traceid"] == e["traceparent"] for e in events)
    assert len({e["traceparent"].split("-")[1] for e in events}) == 3, "each event keeps its own trace"
    assert [(t, e["data"]["text"]) for t, e in sidecar.single] == [("other-notes", "x")]
    assert "traceid" not in sidecar.single[0][1], "a single publish takes the sidecar's own span"


async def test_an_event_the_broker_refused_fails_its_publish_alone() -> None:
    sidecar = RecordingSidecar(failing={"b"})
    publish = publisher(sidecar)

    results = await asyncio.gather(
        *(publish.publish(NOTES, Note(text=t)) for t in "abc"), return_exceptions=True
    )

    assert isinstance(results[1], DaprError) and "broker full" in str(results[1])
    assert all(isinstance(r, str) for r in (results[0], results[2]))


async def test_a_bulk_call_that_failed_fails_every_publish_in_it_and_the_next_go_again() -> None:
    sidecar = RecordingSidecar()
    publish = publisher(sidecar)

    async def down(pubsub: str, topic: str, cloud_events: list[dict[str, Any]]) -> dict[int, str]:
        raise DaprError(500, "ERR_PUBSUB_NOT_FOUND", "pubsub down")

    sidecar.publish_bulk = down  # type: ignore[method-assign]
    results = await asyncio.gather(
        *(publish.publish(NOTES, Note(text=t)) for t in "ab"), return_exceptions=True
    )
    assert all(isinstance(r, DaprError) for r in results)

    await publish.publish(NOTES, Note(text="later"))
    assert [e["data"]["text"] for _, e in sidecar.single] == ["later"]


@pytest.mark.parametrize(
    ("body", "failed"),
    [
        (
            {"failedEntries": [{"entryId": "1", "error": "full"}], "errorCode": "ERR_PUBSUB_PUBLISH_MESSAGE"},
            {1: "full"},
        ),
        ({"errorCode": "ERR_PUBSUB_FORBIDDEN"}, {}),
        ({"failedEntries": [{"entryId": "not a number"}, "junk"]}, {}),
        (None, {}),
    ],
)
def test_a_bulk_refusal_names_its_failed_entries_by_place(body: Any, failed: dict[int, str]) -> None:
    from agora.runtime.sidecar import _failed_entries

    assert _failed_entries(body) == failed


async def test_a_publish_made_while_a_bulk_publish_waits_for_it_is_not_held_behind_that_call() -> None:
    """The in-memory broker delivers inside the publish call: a handler it runs may publish in
    turn, and the first call returns only once that publish did."""
    sidecar = RecordingSidecar()
    publish = publisher(sidecar)

    async def delivering(pubsub: str, topic: str, cloud_events: list[dict[str, Any]]) -> dict[int, str]:
        sidecar.bulk.append((topic, cloud_events))
        await publish.publish(OTHER, Note(text="published by the handler"))
        return {}

    sidecar.publish_bulk = delivering  # type: ignore[method-assign]
    await asyncio.wait_for(asyncio.gather(*(publish.publish(NOTES, Note(text=t)) for t in "ab")), timeout=5)
    assert [e["data"]["text"] for _, e in sidecar.single] == ["published by the handler"]


class InMemoryBroker(RecordingSidecar):
    """Dapr's in-memory broker as a publisher meets it: a publish call returns only once the
    subscription's previous delivery was handled (here: once the test lets it)."""

    def __init__(self, failing: set[str] | None = None) -> None:
        super().__init__(failing, broker="pubsub.in-memory")
        self.previous_delivery_handled = asyncio.Event()

    async def publish(self, pubsub: str, topic: str, cloud_event: dict[str, Any]) -> None:
        await self.previous_delivery_handled.wait()
        if cloud_event["data"]["text"] in self.failing:
            raise DaprError(500, "ERR_PUBSUB_PUBLISH_MESSAGE", "component is closed")
        self.single.append((topic, cloud_event))


async def test_on_a_broker_that_delivers_inside_the_publish_a_publish_does_not_wait_for_a_delivery() -> None:
    """An actor's turn publishing there would otherwise wait on the delivery of an earlier
    message, which may be waiting for that same actor."""
    sidecar = InMemoryBroker()
    publish = publisher(sidecar)

    event_id = await asyncio.wait_for(publish.publish(NOTES, Note(text="award"), message_id="a-1"), timeout=1)

    assert event_id == "a-1" and sidecar.single == [], "handed over, not delivered yet"
    sidecar.previous_delivery_handled.set()
    await publish.drain(timeout_seconds=5)
    assert [(t, e["id"]) for t, e in sidecar.single] == [("notes", "a-1")]
    await publish.publish(NOTES, Note(text="next"))
    assert sidecar.asked_for_components == 1, "the broker's kind is asked once"


async def test_a_handed_over_event_the_broker_refused_is_logged_with_its_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sidecar = InMemoryBroker(failing={"lost"})
    sidecar.previous_delivery_handled.set()
    publish = publisher(sidecar)

    await publish.publish(NOTES, Note(text="lost"), message_id="lost-1")
    await publish.drain(timeout_seconds=5)

    lost = "an event handed to the broker was not published"
    [record] = [r for r in caplog.records if r.getMessage() == lost]
    assert record.__dict__["event_id"] == "lost-1"
    assert "component is closed" in record.__dict__["reason"]


async def test_on_a_broker_that_queues_a_publish_waits_until_its_event_was_accepted() -> None:
    sidecar = InMemoryBroker()
    sidecar.broker = "pubsub.redis"
    publish = publisher(sidecar)

    pending = asyncio.ensure_future(publish.publish(NOTES, Note(text="award")))
    await asyncio.sleep(0.05)
    assert not pending.done()
    sidecar.previous_delivery_handled.set()
    assert await asyncio.wait_for(pending, timeout=5)
