"""The live events of an agent app's runs: each run's events numbered from 1 where the run goes
on, streamed as Server-Sent Events to every watcher from after the event it last saw, until the
run ends; a run paused for a person goes on with the same numbers; only the newest events of a
long run are kept, and a run that is not going on here is NOT_FOUND."""

from __future__ import annotations

import asyncio
import json

import pytest

from agora.core.errors import NotFound
from agora.sdk._app_run_feeds import MAX_EVENTS_KEPT, RunFeeds, run_event_streams
from agora.sdk._runner import RunEnded, RunStatus, TextPiece


def parsed(chunks: list[str]) -> list[tuple[str, int | None, dict[str, object]]]:
    """(event, id, data) of each Server-Sent Event in the stream's text."""
    found = []
    for block in "".join(chunks).split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":")
        )
        if "event" in fields:
            found.append(
                (fields["event"], int(fields["id"]) if "id" in fields else None, json.loads(fields["data"]))
            )
    return found


async def read_all(stream: object) -> list[str]:
    return [chunk async for chunk in stream]  # type: ignore[attr-defined]


async def test_a_run_s_events_stream_live_from_after_the_last_seen_until_it_ends() -> None:
    feeds = RunFeeds()
    streams = run_event_streams(feeds)
    sink = feeds.sink("t1")
    await sink(TextPiece(step=1, text="Par", model="m"))
    await sink(TextPiece(step=1, text="is", model="m"))

    watching = asyncio.create_task(read_all(streams.stream("t1", feeds.log_of("t1"), 0)))
    resumed = asyncio.create_task(read_all(streams.stream("t1", feeds.log_of("t1"), 1)))
    await asyncio.sleep(0.05)
    await sink(RunEnded(status=RunStatus.WAITING_FOR_HUMAN))  # paused: the stream stays open
    going_on = feeds.sink("t1")  # its resume, with the same numbers
    await going_on(RunEnded(status=RunStatus.COMPLETED, output="Paris"))
    everything = parsed(await asyncio.wait_for(watching, 5))
    rest = parsed(await asyncio.wait_for(resumed, 5))

    assert [(kind, seq) for kind, seq, _ in everything] == [
        ("text", 1),
        ("text", 2),
        ("run_ended", 3),
        ("run_ended", 4),
        ("end", None),
    ]
    assert everything[0][2]["text"] == "Par" and everything[3][2]["output"] == "Paris"
    assert [seq for _, seq, _ in rest] == [2, 3, 4, None], "after the one it saw, nothing twice"


async def test_a_long_run_keeps_its_newest_events_and_a_run_not_here_is_not_found() -> None:
    feeds = RunFeeds()
    sink = feeds.sink("t2")
    for n in range(MAX_EVENTS_KEPT + 10):
        await sink(TextPiece(step=1, text=str(n), model="m"))
    log = feeds.log_of("t2")
    assert len(log.events) == MAX_EVENTS_KEPT and log.events[0][0] == 11 and log.count == MAX_EVENTS_KEPT + 10
    with pytest.raises(NotFound, match="no run of task 'elsewhere' goes on in this app"):
        feeds.log_of("elsewhere")
