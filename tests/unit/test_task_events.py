"""A task's events read off its record: each stage's list starts with the previous stage's (so
an event's place names it for good), through a lapsed award passed to the next bid and the
outcome; and their live streams: a resume after any event misses nothing and repeats nothing,
a thousand watchers of one task cost one read per poll, a watcher that does not read is dropped
with the reason while the others go on, and every stream ends after the final status."""

from __future__ import annotations

import asyncio
import itertools
import json
from datetime import timedelta

import pytest

from agora.core.market import AllocationResult, AllocationStatus, TaskOutcome
from agora.core.task_events import TaskEventKind, task_events
from agora.core.task_lifecycle import (
    MAX_PROGRESS_NOTES,
    AwardNotHeld,
    TaskRecord,
    acknowledge,
    allocate,
    expire_award,
    move,
    note_progress,
    record_outcome,
)
from agora.runtime.event_streams import last_seen
from agora.taskboard.event_streams import TaskEventStreams
from tests.unit.test_awards import NOW, awarded, spec

TASK_ID = "t1"


def stages() -> list[TaskRecord]:
    """The record of task t1 at each stage: posted, bidding, awarded to a, a's award lapsed and
    passed to b, b acknowledged, b's outcome recorded."""
    posted = TaskRecord(spec=spec())
    bidding = move(posted, AllocationStatus.BIDDING)
    to_a = allocate(bidding, awarded(("a", 0.9), ("b", 0.8)), NOW)
    to_b = expire_award(to_a, NOW + timedelta(seconds=40))
    acknowledged = acknowledge(to_b, "b", NOW + timedelta(seconds=41))
    outcome = TaskOutcome(
        task_id="t1", agent_id="b", actual_success=True, actual_cost_usd=0.1, actual_steps=2, summary="done"
    )
    ended = record_outcome(acknowledged, outcome, NOW + timedelta(seconds=50))
    return [posted, bidding, to_a, to_b, acknowledged, ended]


def test_each_stages_events_begin_with_the_previous_stages() -> None:
    lists = [task_events(record) for record in stages()]
    for earlier, later in itertools.pairwise(lists):
        assert later[: len(earlier)] == earlier
        assert len(later) > len(earlier)
    final = lists[-1]
    assert [e.seq for e in final] == list(range(1, len(final) + 1))
    assert [(e.kind, e.status or e.agent_id) for e in final] == [
        (TaskEventKind.STATUS, AllocationStatus.PENDING),
        (TaskEventKind.STATUS, AllocationStatus.BIDDING),
        (TaskEventKind.STATUS, AllocationStatus.ALLOCATED),
        (TaskEventKind.AWARDED, "a"),
        (TaskEventKind.AWARD_EXPIRED, "a"),
        (TaskEventKind.AWARDED, "b"),
        (TaskEventKind.ACKNOWLEDGED, "b"),
        (TaskEventKind.OUTCOME, "b"),
        (TaskEventKind.STATUS, AllocationStatus.COMPLETED),
    ]
    assert final[7].success is True and final[7].detail == "done"


def test_progress_notes_follow_their_award_s_acknowledgment_and_only_add_at_the_end() -> None:
    *_, acknowledged, ended = stages()
    first = note_progress(acknowledged, "b", "drafting", NOW + timedelta(seconds=42))
    second = note_progress(first, "b", "polishing", NOW + timedelta(seconds=43))
    outcome = ended.outcome
    assert outcome is not None
    done = record_outcome(second, outcome, NOW + timedelta(seconds=50))
    lists = [task_events(r) for r in (acknowledged, first, second, done)]
    for earlier, later in itertools.pairwise(lists):
        assert later[: len(earlier)] == earlier
    kinds = [(e.kind, e.detail) for e in lists[-1][6:]]
    assert kinds == [
        (TaskEventKind.ACKNOWLEDGED, ""),
        (TaskEventKind.PROGRESS, "drafting"),
        (TaskEventKind.PROGRESS, "polishing"),
        (TaskEventKind.OUTCOME, "done"),
        (TaskEventKind.STATUS, ""),
    ]


def test_progress_is_noted_only_by_the_award_s_holder_while_the_task_runs_and_at_most_the_bound() -> None:
    _, _, _, to_b, acknowledged, ended = stages()
    early = note_progress(to_b, "b", "early", NOW + timedelta(seconds=41))
    assert early.awards[-1].acknowledged_at == NOW + timedelta(seconds=41), "a note acknowledges the award"
    assert [e.kind for e in task_events(early)][-2:] == [TaskEventKind.ACKNOWLEDGED, TaskEventKind.PROGRESS]
    with pytest.raises(AwardNotHeld):
        note_progress(acknowledged, "a", "late", NOW)  # a's turn passed on
    with pytest.raises(AwardNotHeld):
        note_progress(ended, "b", "after", NOW)  # the task ended
    full = acknowledged
    for n in range(MAX_PROGRESS_NOTES):
        full = note_progress(full, "b", f"step {n}", NOW)
    assert note_progress(full, "b", "one more", NOW) is full, "past the bound: not kept, not refused"
    assert [p.text for p in full.awards[-1].progress][-1] == f"step {MAX_PROGRESS_NOTES - 1}"


def test_a_rejection_says_why() -> None:
    bidding = move(TaskRecord(spec=spec()), AllocationStatus.BIDDING)
    rejected = allocate(
        bidding,
        AllocationResult(task_id="t1", status=AllocationStatus.REJECTED, reject_reason="no capable agent"),
    )
    last = task_events(rejected)[-1]
    assert last.status is AllocationStatus.REJECTED and last.detail == "no capable agent"


class Board:
    """The board's reads, one stage further each time (counted)."""

    def __init__(self, records: list[TaskRecord]) -> None:
        self.records = records
        self.reads = 0
        self.stage = 0

    async def read(self, task_id: str) -> TaskRecord:
        self.reads += 1
        return self.records[min(self.stage, len(self.records) - 1)]


def parsed(chunks: list[str]) -> list[tuple[str, dict[str, object], str | None]]:
    events = []
    for block in "".join(chunks).split("\n\n"):
        if not block or block.startswith(":"):
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], json.loads(fields["data"]), fields.get("id")))
    return events


async def collect(stream: object) -> list[str]:
    return [chunk async for chunk in stream]  # type: ignore[attr-defined]


async def advance(board: Board, streams: TaskEventStreams) -> None:
    """The board moves one stage at a time, each seen by a poll."""
    for stage in range(len(board.records)):
        board.stage = stage
        await asyncio.sleep(0.03)


@pytest.mark.parametrize("after", [0, 1, 4, 8, 9])
async def test_a_stream_resumed_after_any_event_misses_nothing_and_repeats_nothing(after: int) -> None:
    board = Board(stages())
    streams = TaskEventStreams(board.read, poll_seconds=0.005)
    watching = asyncio.create_task(collect(streams.stream(TASK_ID, board.records[0], after)))
    await advance(board, streams)
    events = parsed(await asyncio.wait_for(watching, 5))
    ids = [int(i) for _, _, i in events if i is not None]
    assert ids == list(range(after + 1, 10))
    assert events[-1][0] == "end" and events[-1][1]["last_seq"] == 9
    assert streams.watchers == 0 and streams.feeds == 0


async def test_a_thousand_watchers_of_one_task_cost_one_read_per_poll() -> None:
    board = Board(stages())
    streams = TaskEventStreams(board.read, poll_seconds=0.01)
    watchers = [
        asyncio.create_task(collect(streams.stream(TASK_ID, board.records[0], 0))) for _ in range(1000)
    ]
    await asyncio.sleep(0.05)
    assert streams.watchers == 1000 and streams.feeds == 1
    await advance(board, streams)
    results = await asyncio.wait_for(asyncio.gather(*watchers), 10)
    assert all(len([e for e in parsed(r) if e[0] != "end"]) == 9 for r in results)
    # One read per poll of one feed (about 0.18 s / 0.01 s), not one per watcher.
    assert board.reads < 100, board.reads


async def test_a_watcher_that_does_not_read_is_dropped_with_the_reason_and_the_others_go_on() -> None:
    board = Board(stages())
    streams = TaskEventStreams(board.read, poll_seconds=0.005, buffer_events=2)
    slow = streams.stream(TASK_ID, board.records[0], 0)
    first = await anext(slow)  # it reads its first event, then stops reading
    keeping_up = asyncio.create_task(collect(streams.stream(TASK_ID, board.records[0], 0)))
    await advance(board, streams)
    assert len(parsed(await asyncio.wait_for(keeping_up, 5))) == 10
    rest = parsed([first] + await collect(slow))
    kinds = [kind for kind, _, _ in rest]
    assert kinds[-1] == "dropped" and "resume with Last-Event-ID" in str(rest[-1][1]["reason"])
    assert len(rest) <= 1 + 2 + 1  # what it read, its buffer, the reason
    assert streams.dropped == 1


async def test_a_stream_of_an_ended_task_is_its_events_and_the_end() -> None:
    board = Board(stages())
    streams = TaskEventStreams(board.read)
    events = parsed(await collect(streams.stream(TASK_ID, board.records[-1], 7)))
    assert [(kind, event_id) for kind, _, event_id in events] == [
        ("outcome", "8"),
        ("status", "9"),
        ("end", None),
    ]
    assert board.reads == 0


@pytest.mark.parametrize(
    ("header", "seen"), [(None, 0), ("7", 7), (" 3 ", 3), ("x", 0), ("-5", 0), ("9" * 40, 0)]
)
def test_last_event_id_is_read_or_ignored(header: str | None, seen: int) -> None:
    assert last_seen(header) == seen
