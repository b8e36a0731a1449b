"""The `Task` and `Reputation` actors' logic on the SDK's mock actor runtime: each built with its
own fakes through `ActorHosting`'s seam (the dependencies a hosting app gives every instance),
called with the models their interfaces declare."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from pydantic import BaseModel

from agora.core.acceptance import Verdict, VerdictStatus
from agora.core.contracts import OutcomeReport, OutcomeReports
from agora.core.market import AllocationStatus, Bid, ReputationRecord, TaskOutcome, TaskSpec
from agora.core.messages import (
    AwardAcknowledgement,
    AwardLapsed,
    AwardWindowDue,
    TaskAwarded,
    TaskDecision,
    Topic,
)
from agora.core.reputation import OVERCLAIM_WEIGHT
from agora.core.task_lifecycle import TaskRecord
from agora.core.topics import Channel
from agora.reputation.actors import Reputation, ReputationDeps
from agora.runtime.actor_host import EXPIRE_REMINDER, InvalidActorArgument, ModelSerializer
from agora.runtime.pubsub import Publisher
from agora.runtime.status_index import IdSet, StatusIndex
from agora.sdk.testing import MemoryRepository, RecordingPublisher
from agora.taskboard import actors as task_actors
from agora.taskboard.actors import AWARD_REMINDER, LAPSE_REMINDER, LAPSE_RETRY_SECONDS, Task, TaskBoardDeps
from agora.taskboard.award_watch import AWARD_WATCH, AwardWatch, Outage, parse_watch_entry
from agora.taskboard.listings import TaskListings
from tests.unit.helpers import NO_CHECKERS, answer_of, hosted, mock_state
from tests.unit.test_awards import awarded as result
from tests.unit.test_awards import scored


def task_spec(**extra: object) -> TaskSpec:
    return TaskSpec.model_validate({"task_id": "t1", "description": "d", "required_skills": ["s"], **extra})


def board_index() -> StatusIndex:
    return StatusIndex(MemoryRepository(IdSet).typed())


async def new_task(
    publisher: RecordingPublisher, ack_seconds: float = 30.0, index: StatusIndex | None = None
) -> Task:
    deps = TaskBoardDeps(
        cast(Publisher, publisher), index or board_index(), NO_CHECKERS, ack_seconds=ack_seconds
    )
    actor = hosted(Task, "t1", deps)
    await actor._on_activate()
    return actor


async def awarded_over_a_second_bid(publisher: RecordingPublisher, index: StatusIndex | None = None) -> Task:
    """Task t1 posted and awarded to a1, with a2's bid next best."""
    actor = await new_task(publisher, index=index)
    await actor.post_task(task_spec())
    await actor.record_allocation(result(("a1", 0.9), ("a2", 0.5)))
    return actor


async def watched(actor: Task) -> list[str]:
    return await actor.deps.status_index.list(AWARD_WATCH)


async def close_window(actor: Task, monkeypatch: Any) -> None:
    """The watch hands the task's due entry to its actor, as a sweep after the window would."""
    [entry] = await watched(actor)
    due_ms, _ = parse_watch_entry(entry)
    later = datetime.fromtimestamp(due_ms / 1000 + 1, UTC)
    monkeypatch.setattr(task_actors, "_now", lambda: later)
    record_of(await actor.award_window_due(AwardWindowDue(watch_entry=entry)))


def done_by(agent_id: str, cost: float) -> TaskOutcome:
    return TaskOutcome(
        task_id="t1", agent_id=agent_id, actual_success=True, actual_cost_usd=cost, actual_steps=2
    )


def record_of(answer: object) -> TaskRecord:
    record = answer_of(answer).result
    assert isinstance(record, TaskRecord), answer
    return record


async def test_a_decision_is_committed_announced_and_armed_in_one_call() -> None:
    publisher = RecordingPublisher()
    actor = await new_task(publisher, ack_seconds=12)
    assert record_of(await actor.post_task(task_spec())).status is AllocationStatus.PENDING
    decided = record_of(await actor.record_allocation(result(("a1", 0.9), ("a2", 0.5))))

    assert decided.status is AllocationStatus.ALLOCATED and decided.award_published
    [(topic, award, message_id)] = publisher.sent
    assert topic == Topic.TASK_AWARDED and message_id == "awarded:t1"
    assert isinstance(award, TaskAwarded) and award.agent_id == "a1"
    assert award.award_token == actor.state.award_token
    [entry] = await watched(actor)
    due_ms, task_id = parse_watch_entry(entry)
    assert task_id == "t1" and entry == actor.state.award_watch
    awarded_at = decided.awards[-1].awarded_at.timestamp() * 1000
    assert abs(due_ms - (awarded_at + 12_000)) < 1000
    assert AWARD_REMINDER not in actor._state_manager._mock_reminders  # type: ignore[attr-defined]
    assert mock_state(actor)["state"]["record"]["status"] == "ALLOCATED"

    # The same decision again (a caller's retry) announces nothing new.
    assert record_of(await actor.record_allocation(result(("a1", 0.9)))) == decided
    assert len(publisher.sent) == 1


async def test_only_the_awards_token_acknowledges_it_or_reports_its_outcome() -> None:
    publisher = RecordingPublisher()
    actor = await new_task(publisher)
    await actor.post_task(task_spec())
    await actor.record_allocation(result(("a1", 0.9)))
    token = actor.state.award_token
    assert token is not None

    forged = answer_of(
        await actor.acknowledge_award(
            AwardAcknowledgement(agent_id="a1", award_token="guessed-award-token-0000")
        )
    )
    assert forged.error is not None and forged.error.error == "AWARD_NOT_HELD"
    taken = record_of(await actor.acknowledge_award(AwardAcknowledgement(agent_id="a1", award_token=token)))
    assert taken.current_award is not None and taken.current_award.acknowledged_at is not None
    assert await watched(actor) == [] and actor.state.award_watch is None

    outcome = TaskOutcome(
        task_id="t1", agent_id="a1", actual_success=True, actual_cost_usd=0.1, actual_steps=2
    )
    refused = answer_of(await actor.mark_outcome(outcome))
    assert refused.error is not None and refused.error.error == "AWARD_NOT_HELD"
    done = record_of(await actor.mark_outcome(outcome.model_copy(update={"award_token": token})))
    assert done.status is AllocationStatus.COMPLETED


async def test_an_award_is_verified_without_a_change_and_its_outcome_acknowledges_it() -> None:
    publisher = RecordingPublisher()
    actor = await awarded_over_a_second_bid(publisher)
    token = actor.state.award_token
    assert token is not None
    [award] = [p for t, p, _ in publisher.sent if t == Topic.TASK_AWARDED]
    assert isinstance(award, TaskAwarded) and award.acknowledge_within_ms == 30_000
    before = copy.deepcopy(mock_state(actor))

    forged = answer_of(await actor.verify_award(AwardAcknowledgement(agent_id="a1", award_token="x" * 24)))
    assert forged.error is not None and forged.error.error == "AWARD_NOT_HELD"
    not_the_winner = answer_of(
        await actor.verify_award(AwardAcknowledgement(agent_id="a2", award_token=token))
    )
    assert not_the_winner.error is not None and not_the_winner.error.error == "AWARD_NOT_HELD"
    held = record_of(await actor.verify_award(AwardAcknowledgement(agent_id="a1", award_token=token)))
    assert held.current_award is not None and held.current_award.acknowledged_at is None
    assert mock_state(actor) == before and len(await watched(actor)) == 1  # nothing changed

    done = record_of(await actor.mark_outcome(done_by("a1", 0.1).model_copy(update={"award_token": token})))
    assert done.status is AllocationStatus.COMPLETED and done.awards[-1].acknowledged_at is not None
    # Out of the watch with the outcome: its window's end finds nothing to do.
    assert await watched(actor) == [] and actor.state.award_watch is None


class FailingPublisher(RecordingPublisher):
    """Its publishes of `failing` fail, as a sidecar that lost the broker would: only the first
    with `once`, else until `failing` is cleared."""

    def __init__(self, failing: str, *, once: bool = False) -> None:
        super().__init__()
        self.failing: str | None = failing
        self._once = once

    async def publish(
        self,
        channel: Channel[Any],
        payload: BaseModel,
        *,
        pubsub: str | None = None,
        message_id: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        if channel.name == self.failing:
            if self._once:
                self.failing = None
            raise ConnectionError("broker unreachable")
        return await super().publish(
            channel, payload, pubsub=pubsub, message_id=message_id, reply_to=reply_to
        )


async def test_the_board_announces_the_outcome_it_records_and_again_when_the_call_is_retried() -> None:
    publisher = FailingPublisher(Topic.TASK_OUTCOME_RECORDED, once=True)
    actor = await awarded_over_a_second_bid(publisher)
    outcome = done_by("a1", 0.1).model_copy(update={"award_token": actor.state.award_token})

    with pytest.raises(ConnectionError):  # the publish failed after the commit: the caller retries
        await actor.mark_outcome(outcome)
    assert actor.state.record is not None and actor.state.record.outcome == outcome
    assert [t for t, _, _ in publisher.sent] == [Topic.TASK_AWARDED]

    done = record_of(await actor.mark_outcome(outcome))
    assert done.status is AllocationStatus.COMPLETED
    [(topic, report, message_id)] = publisher.sent[1:]
    assert topic == Topic.TASK_OUTCOME_RECORDED and message_id == "outcome:t1"
    assert report == OutcomeReport(
        outcome=outcome, counts_as_success=True, winning_bid=done.allocation and done.allocation.winning_bid
    )
    assert report.winning_bid is not None and report.winning_bid.agent_id == "a1"
    assert publisher.replies_to[-1] is None  # posted without `reply_to`: for whoever listens

    record_of(await actor.mark_outcome(outcome))  # a redelivered report: announced again, taken once
    assert len(publisher.sent) == 3
    other = answer_of(
        await actor.mark_outcome(done_by("a1", 0.2).model_copy(update={"award_token": "y" * 24}))
    )
    assert other.error is not None and other.error.error == "AWARD_NOT_HELD"
    assert len(publisher.sent) == 3  # a refused outcome is not announced


async def test_an_unacknowledged_award_passes_to_the_next_best_bid_when_its_window_closes(
    monkeypatch: Any,
) -> None:
    publisher = RecordingPublisher()
    actor = await awarded_over_a_second_bid(publisher)
    first_token = actor.state.award_token
    [first_entry] = await watched(actor)

    await close_window(actor, monkeypatch)

    assert actor.state.record is not None and actor.state.record.current_award is not None
    assert actor.state.record.current_award.agent_id == "a2"
    assert actor.state.award_token not in (None, first_token)
    topics = [(topic, getattr(payload, "agent_id", None), mid) for topic, payload, mid in publisher.sent]
    assert topics[-1] == (Topic.TASK_AWARDED, "a2", "awarded:t1.2")
    # The next award is watched in place of the first.
    assert await watched(actor) == [actor.state.award_watch] and actor.state.award_watch != first_entry


async def test_a_lapsed_award_is_announced_with_a_stable_event_id(monkeypatch: Any) -> None:
    publisher = RecordingPublisher()
    actor = await new_task(publisher)
    await actor.post_task(task_spec())
    await actor.record_allocation(result(("a1", 0.9)))

    await close_window(actor, monkeypatch)

    record = actor.state.record
    assert record is not None and record.status is AllocationStatus.FAILED
    assert await watched(actor) == [] and actor.state.award_watch is None
    [lapse] = [(p, mid) for topic, p, mid in publisher.sent if topic == Topic.TASK_AWARD_LAPSED]
    notice, message_id = lapse
    assert isinstance(notice, AwardLapsed) and message_id == "lapsed:t1.1"
    assert (notice.agent_id, notice.attempt) == ("a1", 1) and notice.disagreement_with(record) is None
    assert actor.state.lapses_to_announce == []
    assert mock_state(actor)["state"]["lapses_to_announce"] == []


async def test_a_lapse_whose_announcement_failed_is_kept_and_announced_by_a_reminder(
    monkeypatch: Any,
) -> None:
    publisher = FailingPublisher(Topic.TASK_AWARD_LAPSED)
    actor = await awarded_over_a_second_bid(publisher)

    await close_window(actor, monkeypatch)

    # The award went on to the next bid all the same; the notice waits, saved with the lapse.
    assert publisher.sent[-1][0] == Topic.TASK_AWARDED and publisher.sent[-1][2] == "awarded:t1.2"
    assert [n.agent_id for n in actor.state.lapses_to_announce] == ["a1"]
    assert len(mock_state(actor)["state"]["lapses_to_announce"]) == 1
    reminders = actor._state_manager._mock_reminders  # type: ignore[attr-defined]
    assert reminders[LAPSE_REMINDER].due_time == timedelta(seconds=LAPSE_RETRY_SECONDS)

    publisher.failing = None
    await actor.receive_reminder(LAPSE_REMINDER, b"", timedelta(seconds=5), timedelta(0))

    assert [(t, mid) for t, _, mid in publisher.sent if t == Topic.TASK_AWARD_LAPSED] == [
        (Topic.TASK_AWARD_LAPSED, "lapsed:t1.1")
    ]
    assert actor.state.lapses_to_announce == []


async def test_a_finished_task_is_kept_by_a_state_ttl_and_listed_under_the_period_it_ended_in() -> None:
    publisher = RecordingPublisher()
    index = board_index()
    actor = hosted(
        Task, "t1", TaskBoardDeps(cast(Publisher, publisher), index, NO_CHECKERS, retention_seconds=3600)
    )
    await actor._on_activate()
    await actor.post_task(task_spec())
    await actor.record_allocation(result(("a1", 0.9)))
    tracked = actor._state_manager._default_state_change_tracker  # type: ignore[attr-defined]
    assert tracked["state"].ttl_in_seconds is None  # under way: kept
    token = actor.state.award_token
    done = record_of(await actor.mark_outcome(done_by("a1", 0.1).model_copy(update={"award_token": token})))

    ttl = tracked["state"].ttl_in_seconds
    assert ttl is not None and 3590 <= ttl <= 3600  # the store drops it after the retention
    assert actor._state_manager._mock_reminders == {}  # type: ignore[attr-defined]  # no reminder a task
    listing = TaskListings(3600).listed_as(done)
    ended = int(done.history[-1].at.timestamp())
    assert listing == f"COMPLETED@{ended // 225 * 225}"  # a sixteenth of the retention
    assert await index.list(listing) == ["t1"] and await index.list("ALLOCATED") == []
    assert listing in TaskListings(3600).listings_of(AllocationStatus.COMPLETED, datetime.now(UTC))


async def test_the_expire_reminder_of_an_earlier_version_still_drops_a_finished_task() -> None:
    publisher = RecordingPublisher()
    index = board_index()
    actor = hosted(
        Task, "t1", TaskBoardDeps(cast(Publisher, publisher), index, NO_CHECKERS, retention_seconds=3600)
    )
    await actor._on_activate()
    await actor.post_task(task_spec())
    await actor.record_allocation(result(("a1", 0.9)))
    token = actor.state.award_token
    await actor.mark_outcome(done_by("a1", 0.1).model_copy(update={"award_token": token}))
    await index.move("t1", None, "COMPLETED")  # as an earlier version listed it

    await actor.receive_reminder(EXPIRE_REMINDER, b"", timedelta(seconds=3600), timedelta(0))

    assert actor.state.record is None and "state" not in mock_state(actor)
    gone = answer_of(await actor.get_task())
    assert gone.error is not None and gone.error.error == "NOT_FOUND"
    listings = TaskListings(3600).listings_of(AllocationStatus.COMPLETED, datetime.now(UTC))
    assert await index.list_all([*listings, "COMPLETED"]) == []


async def test_an_argument_that_fails_validation_is_answered_with_the_typed_error() -> None:
    """The runtime's serializer reads an argument into the declared model; what does not fit
    reaches the method as `InvalidActorArgument` and is answered INVALID_ARGUMENT, changing nothing."""
    publisher = RecordingPublisher()
    actor = await new_task(publisher)
    argument = ModelSerializer().deserialize(b'{"task_id": "t1"}', TaskSpec)
    assert isinstance(argument, InvalidActorArgument)
    refused = answer_of(await actor.post_task(argument))  # type: ignore[arg-type]
    assert refused.error is not None and refused.error.error == "INVALID_ARGUMENT"
    assert "description" in refused.error.message
    assert actor.state.record is None and publisher.sent == []

    parsed = ModelSerializer().deserialize(task_spec().model_dump_json().encode(), TaskSpec)
    assert parsed == task_spec()


async def test_a_reputation_applies_a_tasks_outcome_once_calibrated_by_the_winning_bid() -> None:
    actor = hosted(Reputation, "a1", ReputationDeps())
    await actor._on_activate()
    bid, _ = scored("a1", 0.9)
    outcome = TaskOutcome(
        task_id="t1", agent_id="a1", actual_success=True, actual_cost_usd=0.2, actual_steps=2
    )
    report = OutcomeReport(outcome=outcome, counts_as_success=True, winning_bid=bid)

    first = answer_of(await actor.apply_outcome(report)).result
    again = answer_of(await actor.apply_outcome(report)).result
    assert isinstance(first, ReputationRecord) and first == again
    assert first.total_tasks == 1 and first.successful_tasks == 1
    assert first.calibration_factor != 1.0  # the bid's self-report (0.8) was calibrated
    assert first.cost_accuracy != ReputationRecord().cost_accuracy  # actual 0.2 vs estimated 0.1

    fallback = Bid.model_validate(
        {**bid.model_dump(), "task_id": "t2", "fallback": True, "fallback_reason": "timeout"}
    )
    other = OutcomeReport(
        outcome=outcome.model_copy(update={"task_id": "t2"}), counts_as_success=True, winning_bid=fallback
    )
    second = answer_of(await actor.apply_outcome(other)).result
    assert isinstance(second, ReputationRecord) and second.total_tasks == 2
    assert second.calibration_factor == first.calibration_factor  # a fallback bid calibrates nothing


class _ActorsOf:
    """`Task` actors by id for the watch, as `task_actors(client)` gives them to the board."""

    def __init__(self, *actors: Task) -> None:
        self._actors = {actor.id.id: actor for actor in actors}

    def __call__(self, task_id: str) -> Any:
        return _Proxy(self._actors.get(task_id))


class _Proxy:
    def __init__(self, actor: Task | None) -> None:
        self._actor = actor

    async def award_window_due(self, due: AwardWindowDue) -> TaskRecord:
        from agora.core.errors import NotFound

        if self._actor is None:
            raise NotFound("no such task")
        return record_of(await self._actor.award_window_due(due))


async def test_the_watch_hands_only_due_awards_to_their_actors_and_drops_entries_of_tasks_gone(
    monkeypatch: Any,
) -> None:
    publisher = RecordingPublisher()
    index = board_index()
    actor = await awarded_over_a_second_bid(publisher, index)
    [entry] = await index.list(AWARD_WATCH)
    due_ms, _ = parse_watch_entry(entry)
    gone = f"{due_ms - 5000:013d}|vanished-task"
    await index.move(gone, None, AWARD_WATCH)
    watch = AwardWatch(index, _ActorsOf(actor))

    # Before the window ends only the entry of the task that is gone is due: it is dropped.
    assert await watch.sweep(now_ms=due_ms - 1) == [gone]
    assert await index.list(AWARD_WATCH) == [entry]
    assert actor.state.record is not None and actor.state.record.current_award is not None
    assert actor.state.record.current_award.agent_id == "a1"

    later = datetime.fromtimestamp(due_ms / 1000 + 1, UTC)
    monkeypatch.setattr(task_actors, "_now", lambda: later)
    assert await watch.sweep(now_ms=due_ms) == [entry]
    assert actor.state.record.current_award is not None and actor.state.record.current_award.agent_id == "a2"
    [next_entry] = await index.list(AWARD_WATCH)
    assert next_entry == actor.state.award_watch != entry


async def test_an_entry_left_in_the_watch_after_its_acknowledgment_is_dropped_when_due(
    monkeypatch: Any,
) -> None:
    publisher = RecordingPublisher()
    actor = await awarded_over_a_second_bid(publisher)
    [entry] = await watched(actor)
    token = actor.state.award_token
    assert token is not None
    await actor.acknowledge_award(AwardAcknowledgement(agent_id="a1", award_token=token))
    await actor.deps.status_index.move(entry, None, AWARD_WATCH)  # as if taking it out had failed

    due_ms, _ = parse_watch_entry(entry)
    monkeypatch.setattr(task_actors, "_now", lambda: datetime.fromtimestamp(due_ms / 1000 + 1, UTC))
    record = record_of(await actor.award_window_due(AwardWindowDue(watch_entry=entry)))

    assert record.current_award is not None and record.current_award.agent_id == "a1"  # still a1's
    assert await watched(actor) == []
    assert len([t for t, _, _ in publisher.sent if t == Topic.TASK_AWARDED]) == 1


async def test_a_task_is_posted_and_decided_in_one_call_and_keeps_its_first_decision() -> None:
    publisher = RecordingPublisher()
    actor = await new_task(publisher)
    spec = task_spec()

    decided = record_of(await actor.decide(TaskDecision(spec=spec, allocation=result(("a1", 0.9)))))

    assert decided.status is AllocationStatus.ALLOCATED and decided.award_published
    assert [h.status for h in decided.history] == ["PENDING", "BIDDING", "ALLOCATED"]
    assert mock_state(actor)["state"]["record"]["status"] == "ALLOCATED"
    assert await actor.deps.status_index.list("ALLOCATED") == ["t1"]
    assert await actor.deps.status_index.list("PENDING") == []
    assert [(t, mid) for t, _, mid in publisher.sent] == [(Topic.TASK_AWARDED, "awarded:t1")]

    # The task delivered again and decided otherwise: the first decision stands, announced once.
    again = record_of(await actor.decide(TaskDecision(spec=spec, allocation=result(("a2", 0.7)))))
    assert again == decided and len(publisher.sent) == 1

    other = task_spec(description="another task under the same id")
    refused = answer_of(await actor.decide(TaskDecision(spec=other, allocation=result(("a1", 0.9)))))
    assert refused.error is not None and refused.error.error == "CONFLICTING_TASK"


async def test_outcomes_that_end_together_are_applied_in_one_write_each_once() -> None:
    one_by_one = hosted(Reputation, "a1", ReputationDeps())
    together = hosted(Reputation, "a1", ReputationDeps())
    for actor in (one_by_one, together):
        await actor._on_activate()
    reports = [
        OutcomeReport(
            outcome=TaskOutcome(
                task_id=f"t{i}", agent_id="a1", actual_success=i % 2 == 0, actual_cost_usd=0.1, actual_steps=2
            ),
            counts_as_success=i % 2 == 0,
        )
        for i in range(5)
    ]
    for report in reports:
        await one_by_one.apply_outcome(report)

    applied = answer_of(await together.apply_outcomes(OutcomeReports(reports=[*reports, reports[0]]))).result
    assert applied == one_by_one.state.record  # the same counts as one at a time; t0 once
    assert isinstance(applied, ReputationRecord) and applied.total_tasks == 5
    assert mock_state(together)["state"]["recent_outcomes"] == [f"t{i}" for i in range(5)]

    stranger = reports[0].model_copy(
        update={"outcome": reports[0].outcome.model_copy(update={"agent_id": "a2"})}
    )
    refused = answer_of(await together.apply_outcomes(OutcomeReports(reports=[stranger])))
    assert refused.error is not None and refused.error.error == "INVALID_ARGUMENT"


def test_after_the_watch_could_not_read_its_store_awards_due_since_wait_a_whole_window() -> None:
    outage = Outage(grace_s=30)
    assert outage.cutoff_ms(1_000) == 1_000, "no outage: entries due by now"
    outage.failed(10_000)
    outage.failed(20_000)  # still the same outage
    assert outage.cutoff_ms(25_000) == 10_000, "during it: only entries due before it began"
    outage.succeeded(30_000)
    assert outage.cutoff_ms(59_999) == 10_000, "a window after it: still only those"
    assert outage.cutoff_ms(60_000) == 60_000, "then every entry due"
    assert outage.cutoff_ms(61_000) == 61_000
    outage.failed(70_000)
    outage.succeeded(71_000)
    outage.failed(72_000)  # failing again within its grace: the same outage goes on
    outage.succeeded(73_000)
    assert outage.cutoff_ms(102_999) == 70_000 and outage.cutoff_ms(103_000) == 103_000


async def test_a_dispute_s_revision_corrects_the_reputation_once_delivered_twice_or_after_a_restart() -> None:
    actor = hosted(Reputation, "a1", ReputationDeps())
    await actor._on_activate()
    outcome = TaskOutcome(
        task_id="t1", agent_id="a1", actual_success=True, actual_cost_usd=0.1, actual_steps=1
    )
    passed = Verdict(status=VerdictStatus.PASSED, kind="expected", reason="ok", checked_by="taskboard")
    failed = Verdict(
        status=VerdictStatus.FAILED, kind="dispute", reason="disputed by ana", checked_by="taskboard"
    )
    recorded = OutcomeReport(outcome=outcome, counts_as_success=True, verdict=passed)
    revised = OutcomeReport(outcome=outcome, counts_as_success=False, verdict=failed, revision=1)

    first = answer_of(await actor.apply_outcome(recorded)).result
    assert isinstance(first, ReputationRecord) and first.success_rate == 1.0
    corrected = answer_of(await actor.apply_outcome(revised)).result
    assert isinstance(corrected, ReputationRecord)
    assert (corrected.total_tasks, corrected.successful_tasks, corrected.overclaims) == (1, 0, 1)
    assert corrected.evidence == OVERCLAIM_WEIGHT and corrected.success_rate == 0.0
    assert answer_of(await actor.apply_outcome(revised)).result == corrected, "delivered twice: once"
    assert answer_of(await actor.apply_outcome(recorded)).result == corrected, "the original late: nothing"

    restarted = hosted(Reputation, "a1", ReputationDeps(), initstate=dict(mock_state(actor)))  # as saved
    await restarted._on_activate()
    assert answer_of(await restarted.apply_outcome(revised)).result == corrected, "after a restart: once"
