"""A record's state stream (a plan's, a debate's; `agora.runtime.event_streams.state_streams`):
a watcher gets the record as it is, then each change a read sees (its id the revision + 1),
then `end` once the record ends; one resumed after the last id it saw gets only what changed
since; a record gone while watched drops its watchers with the reason."""

from __future__ import annotations

import asyncio
import json

from pydantic import BaseModel

from agora.core.errors import NotFound
from agora.runtime.event_streams import state_streams


class Doc(BaseModel):
    doc_id: str = "d1"
    state: str = "RUNNING"
    revision: int = 0


class Store:
    def __init__(self) -> None:
        self.doc: Doc | None = Doc()

    async def read(self, doc_id: str) -> Doc:
        if self.doc is None:
            raise NotFound(f"no doc {doc_id}")
        return self.doc

    def write(self, state: str) -> None:
        assert self.doc is not None
        self.doc = self.doc.model_copy(update={"state": state, "revision": self.doc.revision + 1})


def events(chunks: list[str]) -> list[tuple[str, dict[str, object], str | None]]:
    found = []
    for block in "".join(chunks).split("\n\n"):
        if block and not block.startswith(":"):
            fields = dict(line.split(": ", 1) for line in block.splitlines())
            found.append((fields["event"], json.loads(fields["data"]), fields.get("id")))
    return found


async def collect(stream: object) -> list[str]:
    return [chunk async for chunk in stream]  # type: ignore[attr-defined]


async def test_a_watcher_gets_the_record_then_each_change_then_the_end() -> None:
    store = Store()
    streams = state_streams("doc", store.read, lambda doc: doc.state == "DONE", poll_seconds=0.005)
    assert store.doc is not None
    watching = asyncio.create_task(collect(streams.stream("d1", store.doc, 0)))
    for state in ("WAITING", "RUNNING", "DONE"):
        await asyncio.sleep(0.03)  # each write seen by a poll
        store.write(state)
    seen = events(await asyncio.wait_for(watching, 5))
    assert [(name, data.get("state"), i) for name, data, i in seen] == [
        ("doc", "RUNNING", "1"),
        ("doc", "WAITING", "2"),
        ("doc", "RUNNING", "3"),
        ("doc", "DONE", "4"),
        ("end", None, None),
    ]
    assert seen[-1][1] == {"doc_id": "d1", "last_seq": 4}
    assert streams.feeds == 0, "an ended record is read no more"


async def test_a_resumed_watcher_gets_only_the_record_as_it_is_now_and_nothing_it_saw() -> None:
    store = Store()
    streams = state_streams("doc", store.read, lambda doc: doc.state == "DONE", poll_seconds=0.005)
    store.write("WAITING")
    store.write("DONE")
    assert store.doc is not None
    resumed = events(await asyncio.wait_for(collect(streams.stream("d1", store.doc, 1)), 5))
    assert [(name, i) for name, _, i in resumed] == [("doc", "3"), ("end", None)]
    caught_up = events(await asyncio.wait_for(collect(streams.stream("d1", store.doc, 3)), 5))
    assert [name for name, _, _ in caught_up] == ["end"], "nothing seen twice"


async def test_a_record_gone_while_watched_drops_its_watchers_with_the_reason() -> None:
    store = Store()
    streams = state_streams("doc", store.read, lambda doc: doc.state == "DONE", poll_seconds=0.005)
    assert store.doc is not None
    watching = asyncio.create_task(collect(streams.stream("d1", store.doc, 0)))
    await asyncio.sleep(0.02)
    store.doc = None
    seen = events(await asyncio.wait_for(watching, 5))
    assert seen[-1][0] == "dropped" and seen[-1][1]["reason"] == "the doc is no longer kept"
