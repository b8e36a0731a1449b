"""A person cancels a task (`Task` actor `cancel`, on the SDK's mock actor runtime): one not
decided yet is rejected and the rejection announced, a decision that comes later is not
recorded; one an agent holds fails without an outcome, its award's token is void and the cancel
announced for the agent's runtime, which checks it against the board's record; an ended task is
refused; a cancel asked again changes nothing and announces what did not go out."""

from __future__ import annotations

from typing import cast

import pytest

from agora.core.market import AllocationStatus, TaskOutcome
from agora.core.messages import AwardAcknowledgement, TaskCancel, TaskCancelled, TaskRejected, Topic
from agora.core.task_events import TaskEventKind, task_events
from agora.runtime.pubsub import Publisher
from agora.sdk.testing import RecordingPublisher
from agora.taskboard.actors import Task, TaskBoardDeps
from tests.unit.helpers import NO_CHECKERS, answer_of, hosted
from tests.unit.test_awards import awarded as result
from tests.unit.test_task_actor import board_index, record_of, task_spec, watched

CANCEL = TaskCancel(cancelled_by="alice", reason="no longer needed")


class FailingOnce(RecordingPublisher):
    """A broker that refuses the first cancel notice."""

    failed = False

    async def publish(self, channel: object, payload: object, **kwargs: object) -> str:  # type: ignore[override]
        if isinstance(payload, TaskCancelled) and not self.failed:
            self.failed = True
            raise ConnectionError("the broker is away")
        return await super().publish(channel, payload, **kwargs)  # type: ignore[arg-type]


def done_by_a1(token: str | None) -> TaskOutcome:
    return TaskOutcome(
        task_id="t1",
        agent_id="a1",
        actual_success=True,
        actual_cost_usd=0.1,
        actual_steps=1,
        award_token=token,
    )


async def new_task(publisher: RecordingPublisher) -> Task:
    actor = hosted(Task, "t1", TaskBoardDeps(cast(Publisher, publisher), board_index(), NO_CHECKERS))
    await actor._on_activate()
    await actor.post_task(task_spec())
    return actor


async def test_a_task_not_decided_yet_is_rejected_and_a_later_decision_is_not_recorded() -> None:
    publisher = RecordingPublisher()
    actor = await new_task(publisher)

    cancelled = record_of(await actor.cancel(CANCEL))

    assert cancelled.status is AllocationStatus.REJECTED
    assert cancelled.cancellation is not None and cancelled.cancellation.by == "alice"
    [(topic, rejected, message_id)] = publisher.sent
    assert topic == Topic.TASK_REJECTED and message_id == "rejected:t1"
    assert isinstance(rejected, TaskRejected)
    assert rejected.reason == "CANCELLED by alice: no longer needed"
    late = record_of(await actor.record_allocation(result(("a1", 0.9))))
    assert late == cancelled and len(publisher.sent) == 1, "the market's decision came too late"
    assert task_events(late)[-1].detail == "CANCELLED by alice: no longer needed"


async def test_a_task_an_agent_holds_fails_its_token_is_void_and_the_cancel_is_announced() -> None:
    publisher = RecordingPublisher()
    actor = await new_task(publisher)
    await actor.record_allocation(result(("a1", 0.9), ("a2", 0.5)))
    token = actor.state.award_token
    assert token is not None and await watched(actor)

    cancelled = record_of(await actor.cancel(CANCEL))

    assert cancelled.status is AllocationStatus.FAILED and cancelled.outcome is None
    assert cancelled.failure_reason == "CANCELLED by alice: no longer needed"
    assert await watched(actor) == [], "no award is left to watch"
    topic, notice, message_id = publisher.sent[-1]
    assert topic == Topic.TASK_CANCELLED and message_id == "cancelled:t1"
    assert notice == TaskCancelled(
        task_id="t1", agent_id="a1", attempt=1, cancelled_by="alice", reason="no longer needed"
    )
    assert notice.disagreement_with(cancelled) is None
    assert notice.model_copy(update={"agent_id": "a2"}).disagreement_with(cancelled) is not None
    assert notice.model_copy(update={"cancelled_by": "mallory"}).disagreement_with(cancelled) is not None
    outcome = done_by_a1(token)
    for refused in (
        answer_of(await actor.mark_outcome(outcome)),
        answer_of(await actor.acknowledge_award(AwardAcknowledgement(agent_id="a1", award_token=token))),
    ):
        assert refused.error is not None and refused.error.error == "AWARD_NOT_HELD"
    assert [event.kind for event in task_events(record_of(await actor.get_task()))][
        -1
    ] is TaskEventKind.STATUS


async def test_an_ended_task_is_refused_and_a_cancelled_one_answered_as_it_is() -> None:
    publisher = RecordingPublisher()
    actor = await new_task(publisher)
    await actor.record_allocation(result(("a1", 0.9)))
    token = actor.state.award_token
    await actor.mark_outcome(done_by_a1(token))

    refused = answer_of(await actor.cancel(CANCEL))
    assert refused.error is not None and refused.error.error == "TASK_ENDED", refused

    other = RecordingPublisher()
    pending = await new_task(other)
    first = record_of(await pending.cancel(CANCEL))
    again = record_of(await pending.cancel(TaskCancel(cancelled_by="bob")))
    assert again == first and len(other.sent) == 1


async def test_a_cancel_whose_notice_failed_is_announced_when_asked_again() -> None:
    publisher = FailingOnce()
    actor = await new_task(publisher)
    await actor.record_allocation(result(("a1", 0.9)))

    with pytest.raises(ConnectionError):  # the caller learns the cancel is not announced yet
        await actor.cancel(CANCEL)
    assert actor.state.cancel_to_announce is not None

    cancelled = record_of(await actor.cancel(CANCEL))
    assert cancelled.status is AllocationStatus.FAILED
    assert [topic for topic, _, _ in publisher.sent].count(Topic.TASK_CANCELLED) == 1
    assert actor.state.cancel_to_announce is None
