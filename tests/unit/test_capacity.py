"""Agent capacity: an agent's book of runs and waiters, the lifecycle's choice of a bidder with
a free run slot (or the wait for one), and the `Task` actor claiming, releasing and waiting on
the SDK's mock actor runtime with an in-memory book per agent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from agora.core.capacity import (
    MAX_BIDDERS_WAITED_ON,
    AgentRunsState,
    RunClaim,
    RunFreed,
    RunHeld,
    RunRelease,
    RunsView,
    WaitersForgotten,
)
from agora.core.errors import NotFound
from agora.core.market import AllocationStatus, TaskOutcome
from agora.core.messages import Topic
from agora.core.task_lifecycle import TaskRecord, allocate, cancel, next_best, post, queue_deadline_passed
from agora.runtime.clients import AgentRunsActors, TaskActors
from agora.runtime.pubsub import Publisher
from agora.sdk.testing import RecordingPublisher
from agora.taskboard.actors import QUEUE_REMINDER, Task, TaskBoardDeps
from agora.taskboard.run_slots import RunSlots, run_under_way
from tests.unit.helpers import NO_CHECKERS, hosted
from tests.unit.test_awards import awarded
from tests.unit.test_task_actor import board_index, record_of, task_spec

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def claim(task_id: str, limit: int = 2, turn: int = 1, wait: bool = False) -> RunClaim:
    return RunClaim(task_id=task_id, turn=turn, limit=limit, wait=wait)


# -- an agent's book --------------------------------------------------------------------------------


def test_an_agent_takes_runs_up_to_its_limit_and_keeps_later_tasks_waiting_once() -> None:
    book = AgentRunsState()
    assert book.claim(claim("t1"), T0) == (True, True)
    assert book.claim(claim("t2"), T0) == (True, True)
    assert book.claim(claim("t3", wait=True), T0) == (False, True)
    assert book.claim(claim("t3", wait=True), T0) == (False, False)  # asked again: one waiter
    assert book.claim(claim("t4"), T0) == (False, False)  # not asked to wait
    view = book.view("a1")
    assert [r.task_id for r in view.runs] == ["t1", "t2"] and view.free == 0
    assert [w.task_id for w in view.waiting] == ["t3"] and view.waiting_count == 1


def test_a_claim_or_release_asked_again_changes_nothing_and_a_release_names_its_turn() -> None:
    book = AgentRunsState()
    book.claim(claim("t1", limit=1), T0)
    assert book.claim(claim("t1", limit=1), T0) == (True, False)
    assert book.release(RunRelease(task_id="t1", turn=2)) is False  # another turn's
    assert book.release(RunRelease(task_id="t1", turn=1)) is True
    assert book.release(RunRelease(task_id="t1", turn=1)) is False
    assert book.view("a1").free == 1


def test_a_task_given_a_slot_stops_waiting_and_waiters_can_be_forgotten() -> None:
    book = AgentRunsState()
    book.claim(claim("t1", limit=1), T0)
    book.claim(claim("t2", limit=1, wait=True), T0)
    book.claim(claim("t3", limit=1, wait=True), T0)
    book.release(RunRelease(task_id="t1", turn=1))
    assert book.claim(claim("t2", limit=1, wait=True), T0) == (True, True)
    assert [w.task_id for w in book.waiting] == ["t3"]
    assert book.forget({"t3"}) is True and book.waiting == []


# -- choosing a bidder with a free slot ----------------------------------------------------------------


def full_view(agent_id: str, runs: int) -> RunsView:
    book = AgentRunsState()
    for n in range(runs):
        book.claim(claim(f"other-{n}", limit=runs), T0)
    return book.view(agent_id)


def test_an_award_passes_over_a_full_winner_to_the_next_eligible_bidder() -> None:
    record = post(None, task_spec())
    decided = allocate(record, awarded(("a1", 0.9), ("a2", 0.5)), T0, full={"a1": full_view("a1", 2)})
    assert decided.status is AllocationStatus.ALLOCATED
    assert decided.allocation is not None and decided.allocation.winning_agent_id == "a2"
    assert [a.agent_id for a in decided.awards] == ["a2"] and decided.queued is None


def test_a_task_whose_eligible_bidders_are_all_full_waits_saying_why_and_is_awarded_later() -> None:
    record = post(None, task_spec())
    result = awarded(("a1", 0.9), ("a2", 0.5), ("a3", -0.2))  # a3 is not eligible
    full = {"a1": full_view("a1", 2), "a2": full_view("a2", 1)}
    queued = allocate(record, result, T0, full=full)
    assert queued.status is AllocationStatus.QUEUED and queued.awards == []
    assert queued.queued is not None and queued.queued.since == T0
    assert queued.queued.reason == "2 capable agents, 0 free: a1 2 of 2 runs, a2 1 of 1 runs"
    assert queued.queued.waiting_on == ["a1", "a2"]

    later = allocate(queued, result, T0 + timedelta(seconds=5), full={"a1": full["a1"]})
    assert later.status is AllocationStatus.ALLOCATED and [a.agent_id for a in later.awards] == ["a2"]
    assert [c.status for c in later.history] == ["PENDING", "BIDDING", "QUEUED", "ALLOCATED"]
    assert later.queued == queued.queued  # how long it waited stays on the record


def test_a_task_waits_for_its_best_bidders_only() -> None:
    bidders = [(f"a{n}", 0.9 - n / 100) for n in range(MAX_BIDDERS_WAITED_ON + 2)]
    result = awarded(*bidders)
    full = {agent: full_view(agent, 1) for agent, _ in bidders[:MAX_BIDDERS_WAITED_ON]}
    assert next_best(result, set(), full) is None
    assert allocate(post(None, task_spec()), result, T0, full=full).status is AllocationStatus.QUEUED


def test_a_task_still_waiting_at_its_deadline_is_rejected_with_how_long_it_waited() -> None:
    record = post(None, task_spec(deadline_ms=60_000))
    posted_at = record.history[0].at
    queued = allocate(record, awarded(("a1", 0.9)), posted_at, full={"a1": full_view("a1", 1)})
    assert queue_deadline_passed(queued, posted_at + timedelta(seconds=59)) is queued
    rejected = queue_deadline_passed(queued, posted_at + timedelta(seconds=61))
    assert rejected.status is AllocationStatus.REJECTED and rejected.allocation is not None
    reason = rejected.allocation.reject_reason or ""
    assert reason.startswith("DEADLINE_EXCEEDED: waited 61 s for a run slot") and "a1 1 of 1 runs" in reason


def test_a_waiting_task_a_person_cancels_is_rejected() -> None:
    queued = allocate(post(None, task_spec()), awarded(("a1", 0.9)), T0, full={"a1": full_view("a1", 1)})
    cancelled = cancel(queued, "ana@example.com", "not needed", T0)
    assert cancelled.status is AllocationStatus.REJECTED and cancelled.cancellation is not None


# -- the Task actor -------------------------------------------------------------------------------------


class Books:
    """Each agent's book in memory, answering as an `AgentRuns` actor would."""

    def __init__(self) -> None:
        self.books: dict[str, AgentRunsState] = {}

    def __call__(self, agent_id: str) -> Books.Book:
        return Books.Book(self.books.setdefault(agent_id, AgentRunsState()), agent_id)

    class Book:
        def __init__(self, state: AgentRunsState, agent_id: str) -> None:
            self.state, self.agent_id = state, agent_id

        async def claim(self, run: RunClaim) -> RunsView:
            granted, _ = self.state.claim(run, datetime.now(UTC))
            return self.state.view(self.agent_id, granted)

        async def release(self, run: RunRelease) -> RunsView:
            self.state.release(run)
            return self.state.view(self.agent_id)

        async def forget_waiters(self, forgotten: WaitersForgotten) -> RunsView:
            self.state.forget(set(forgotten.task_ids))
            return self.state.view(self.agent_id)

        async def view(self) -> RunsView:
            return self.state.view(self.agent_id)


async def task_with_books(publisher: RecordingPublisher, books: Books) -> Task:
    deps = TaskBoardDeps(
        cast(Publisher, publisher), board_index(), NO_CHECKERS, agent_runs=cast(AgentRunsActors, books)
    )
    actor = hosted(Task, "t1", deps)
    await actor._on_activate()
    return actor


def limited(*finals: tuple[str, float], limit: int = 1):  # type: ignore[no-untyped-def]
    result = awarded(*finals)
    return result.model_copy(update={"run_limits": {agent: limit for agent, _ in finals}})


async def test_the_task_actor_claims_a_slot_waits_when_all_are_full_and_is_awarded_when_one_frees() -> None:
    publisher, books = RecordingPublisher(), Books()
    books("a1").state.claim(claim("busy-1", limit=1), T0)
    books("a2").state.claim(claim("busy-2", limit=1), T0)
    actor = await task_with_books(publisher, books)
    await actor.post_task(task_spec())

    queued = record_of(await actor.record_allocation(limited(("a1", 0.9), ("a2", 0.5))))
    assert queued.status is AllocationStatus.QUEUED and publisher.sent == []  # nothing announced
    assert (
        [w.task_id for w in books("a1").state.waiting]
        == ["t1"]
        == [w.task_id for w in books("a2").state.waiting]
    )
    assert QUEUE_REMINDER in actor._state_manager._mock_reminders  # type: ignore[attr-defined]
    assert record_of(await actor.retry_queued()).status is AllocationStatus.QUEUED  # still full

    books("a2").state.release(RunRelease(task_id="busy-2", turn=1))
    taken = record_of(await actor.retry_queued())
    assert taken.status is AllocationStatus.ALLOCATED and taken.awards[-1].agent_id == "a2"
    assert list(books("a2").state.runs) == ["t1"] and books("a2").state.waiting == []
    [(topic, award, _)] = publisher.sent
    assert topic == Topic.TASK_AWARDED and award.agent_id == "a2"
    assert QUEUE_REMINDER not in actor._state_manager._mock_reminders  # type: ignore[attr-defined]

    # The run's outcome frees its slot; the agent has nobody waiting, so nothing is announced.
    outcome = TaskOutcome(
        task_id="t1", agent_id="a2", actual_success=True, actual_cost_usd=0.1, actual_steps=1,
        award_token=actor.state.award_token,
    )  # fmt: skip
    record_of(await actor.mark_outcome(outcome))
    assert books("a2").state.runs == {}
    assert all(topic != Topic.AGENT_RUN_FREED for topic, _, _ in publisher.sent)


async def test_a_release_of_an_agent_with_waiters_is_announced() -> None:
    publisher, books = RecordingPublisher(), Books()
    actor = await task_with_books(publisher, books)
    await actor.post_task(task_spec())
    record_of(await actor.record_allocation(limited(("a1", 0.9))))
    assert list(books("a1").state.runs) == ["t1"]
    books("a1").state.claim(claim("later", limit=1, wait=True), T0)  # a task waits for a1

    outcome = TaskOutcome(
        task_id="t1", agent_id="a1", actual_success=False, actual_cost_usd=0.1, actual_steps=1,
        award_token=actor.state.award_token,
    )  # fmt: skip
    record_of(await actor.mark_outcome(outcome))
    freed = [
        (payload, message_id)
        for topic, payload, message_id in publisher.sent
        if topic == Topic.AGENT_RUN_FREED
    ]
    assert freed == [(RunFreed(agent_id="a1", task_id="t1", turn=1), "run_freed:t1.1")]


# -- the board's part outside the actors' turns ----------------------------------------------------


class Records:
    """Tasks' records as `Task` actors would answer them (get_task, retry_queued)."""

    def __init__(self, records: dict[str, TaskRecord], awarded_on_retry: dict[str, TaskRecord]) -> None:
        self.records, self.on_retry = records, awarded_on_retry

    def __call__(self, task_id: str) -> Records.One:
        return Records.One(self, task_id)

    class One:
        def __init__(self, owner: Records, task_id: str) -> None:
            self.owner, self.task_id = owner, task_id

        async def get_task(self) -> TaskRecord:
            if self.task_id not in self.owner.records:
                raise NotFound(f"no task {self.task_id!r} on the board")
            return self.owner.records[self.task_id]

        async def retry_queued(self) -> TaskRecord:
            if self.task_id in self.owner.on_retry:
                self.owner.records[self.task_id] = self.owner.on_retry.pop(self.task_id)
            return await self.get_task()


def held_by(agent_id: str, task_id: str) -> TaskRecord:
    record = allocate(post(None, task_spec(task_id=task_id)), awarded_to(task_id, agent_id), T0)
    assert record.status is AllocationStatus.ALLOCATED
    return record


def awarded_to(task_id: str, agent_id: str):  # type: ignore[no-untyped-def]
    result = awarded((agent_id, 0.9))
    bids = [b.model_copy(update={"task_id": task_id}) for b in result.all_bids]
    return result.model_copy(update={"task_id": task_id, "all_bids": bids, "winning_bid": bids[0]})


async def test_the_board_frees_slots_whose_turns_ended_without_a_release_and_wakes_the_oldest_waiters() -> (
    None
):
    books = Books()
    long_ago = datetime.now(UTC) - timedelta(minutes=5)
    book = books("a1").state
    for task_id in ("running", "ended", "gone"):
        book.claim(claim(task_id, limit=4), long_ago)
    book.claim(claim("fresh", limit=4), datetime.now(UTC))  # claimed a moment ago: not checked
    book.claim(claim("waiting", limit=4, wait=True), long_ago)
    book.claim(claim("moved-on", limit=4, wait=True), long_ago)
    ended = held_by("a1", "ended").model_copy(update={"status": AllocationStatus.COMPLETED})
    records = Records(
        {"running": held_by("a1", "running"), "ended": ended, "moved-on": held_by("a2", "moved-on"),
         "waiting": post(None, task_spec(task_id="waiting"))},
        {"waiting": held_by("a1", "waiting")},
    )  # fmt: skip
    slots = RunSlots(
        cast(AgentRunsActors, books),
        cast(TaskActors, records),
        cast(TaskActors, records),
        lambda work, name: None,
    )

    freed = await slots.check_runs("a1")

    assert sorted(freed) == ["ended", "gone"]
    assert sorted(book.runs) == ["fresh", "running"]
    # Then the oldest waiter was tried again and took a slot; "moved-on" had gone to another
    # agent: both are no longer waiting.
    assert records.records["waiting"].status is AllocationStatus.ALLOCATED
    assert book.waiting == []


def test_a_run_is_under_way_only_while_its_turn_is_the_current_award_without_an_outcome() -> None:
    record = held_by("a1", "t9")
    run = RunHeld(task_id="t9", turn=1, since=T0)
    assert run_under_way(record, "a1", run)
    assert not run_under_way(record, "a2", run)
    assert not run_under_way(record, "a1", run.model_copy(update={"turn": 2}))


async def test_an_award_out_of_the_queue_whose_announcement_failed_is_announced_by_the_reminder() -> None:
    publisher, books = RecordingPublisher(), Books()
    books("a1").state.claim(claim("busy", limit=1), T0)
    actor = await task_with_books(publisher, books)
    await actor.post_task(task_spec())
    record_of(await actor.record_allocation(limited(("a1", 0.9))))
    books("a1").state.release(RunRelease(task_id="busy", turn=1))

    async def broker_down(*args: object, **kwargs: object) -> str:
        raise ConnectionError("the broker is restarting")

    sent = publisher.publish
    publisher.publish = broker_down  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await actor.retry_queued()
    assert actor.state.record is not None
    assert actor.state.record.status is AllocationStatus.ALLOCATED  # committed, not announced
    assert QUEUE_REMINDER in actor._state_manager._mock_reminders  # type: ignore[attr-defined]

    publisher.publish = sent  # type: ignore[method-assign]
    await actor.on_reminder(QUEUE_REMINDER, b"")
    [(topic, award, _)] = publisher.sent
    assert topic == Topic.TASK_AWARDED and award.agent_id == "a1"
    assert QUEUE_REMINDER not in actor._state_manager._mock_reminders  # type: ignore[attr-defined]
