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
    def __init__(self, failing: set[str] | None = None) -> None:
        self.single: list[tuple[str, dict[str, Any]]] = []
        self.bulk: list[tuple[str, list[dict[str, Any]]]] = []
        self.failing = failing or set()

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
