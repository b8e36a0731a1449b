"""The Escalation actor's announcement of a decision, on the Dapr SDK's mock actor runtime."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from pydantic import BaseModel

from agora.core.contracts import Decision
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.listing import ListingFilter
from agora.core.escalation.record import EscalationRecord, ParkRequest
from agora.core.topics import Channel
from agora.escalation.actors import ANNOUNCE_REMINDER, ANNOUNCE_RETRY, Escalation, EscalationDeps
from agora.escalation.listing import EscalationListings
from agora.escalation.outcomes import outcome_of
from agora.escalation.store import EscalationSlot, EscalationStore
from agora.runtime.actor_host import EXPIRE_REMINDER, STATE_KEY
from agora.runtime.pubsub import Publisher
from agora.sdk.testing import MemoryRepository, RecordingPublisher
from tests.unit.helpers import answer_of, hosted, mock_state


class FlakyPublisher(RecordingPublisher):
    """Fails the first `failures` publishes (as a broker outage would), then records them."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def publish(
        self,
        channel: Channel[Any],
        payload: Any,
        *,
        pubsub: str | None = None,
        message_id: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("pub/sub unavailable")
        return await super().publish(
            channel, payload, pubsub=pubsub, message_id=message_id, reply_to=reply_to
        )


@pytest.fixture
def publisher() -> Iterator[FlakyPublisher]:
    yield FlakyPublisher(failures=1)


def store_over() -> EscalationStore:
    return EscalationStore(
        MemoryRepository(EscalationSlot).typed(), EscalationListings(MemoryRepository(BaseModel).typed())
    )


def escalation(actor_id: str, publisher: FlakyPublisher) -> Escalation:
    return hosted(Escalation, actor_id, EscalationDeps(cast(Publisher, publisher), store_over()))


def park_request() -> ParkRequest:
    context = EscalationContext(
        job_id="job-1",
        step=1,
        validation_results=[],
        confidence=0.3,
        retry_count=0,
        error_history=[],
        prompt_used="Migrate the orders table",
        output_summary="Not sure the migration is safe",
    )
    return ParkRequest.model_validate({"waiting_party": {"kind": "session", "id": "s-1"}, "context": context})


def decision(action: str, who: str) -> Decision:
    return Decision.model_validate(
        {"response": {"kind": "escalation", "action": action}, "who": who, "why": ""}
    )


async def test_a_decision_whose_publish_failed_is_announced_when_resumed_again(
    publisher: FlakyPublisher,
) -> None:
    actor = escalation("e-1", publisher)
    await actor._on_activate()
    assert isinstance(answer_of(await actor.park(park_request())).result, EscalationRecord)

    with pytest.raises(ConnectionError):
        await actor.resolve(decision("retry", "alice"))
    assert actor.state.record is not None and actor.state.record.status == "RESOLVED"
    assert not actor.state.announced and publisher.sent == []

    # Alice retries: the stored decision goes out, and hers is refused as a second one.
    again = answer_of(await actor.resolve(decision("skip", "alice")))
    assert again.error is not None and again.error.error == "AGENT_NOT_WAITING"
    [(topic, event, message_id)] = publisher.sent
    assert topic == "agora.escalation.resolved" and message_id == "resolved:e-1"
    assert event.decision.action == "retry" and event.decided_by == "alice"
    assert actor.state.announced

    # Announced once: later attempts publish nothing more.
    await actor.resolve(decision("abort", "bob"))
    assert len(publisher.sent) == 1


async def test_the_announcement_is_recorded_with_the_decision(publisher: FlakyPublisher) -> None:
    publisher.failures = 0
    actor = escalation("e-2", publisher)
    await actor._on_activate()
    await actor.park(park_request())
    answer = answer_of(await actor.resolve(decision("retry", "alice")))
    assert isinstance(answer.result, EscalationRecord) and answer.result.status == "RESOLVED"
    assert actor.state.announced and len(publisher.sent) == 1
    stored = await actor.deps.store.read("e-2")
    assert stored is not None and stored.value.announced and stored.value.record is not None
    assert stored.value.record.status == "RESOLVED"


async def test_an_escalations_learning_record_holds_only_what_the_escalation_knows(
    publisher: FlakyPublisher,
) -> None:
    publisher.failures = 0
    actor = escalation("e-3", publisher)
    await actor._on_activate()
    await actor.park(park_request())
    answer = answer_of(await actor.resolve(decision("retry", "alice")))
    assert isinstance(answer.result, EscalationRecord)

    learnt = outcome_of(answer.result, succeeded=True)
    assert learnt is not None
    assert (learnt.job_id, learnt.step_id, learnt.retry_count) == ("job-1", "1", 0)
    assert learnt.escalation_action == "retry" and learnt.escalation_confidence == 0.3
    # No execution was timed and no validations ran: those stay unset rather than made up.
    assert learnt.execution_duration is None
    assert learnt.completion_mode_used is None
    assert learnt.validation_pass_rate is None
    assert learnt.success_without_retry  # it got on at the first try after the decision


async def test_a_decided_escalation_is_kept_for_its_retention_then_dropped(publisher: FlakyPublisher) -> None:
    publisher.failures = 0
    store = store_over()
    actor = hosted(
        Escalation, "e-3", EscalationDeps(cast(Publisher, publisher), store, retention_seconds=600)
    )
    await actor._on_activate()
    await actor.park(park_request())
    reminders = actor._state_manager._mock_reminders  # type: ignore[attr-defined]
    assert EXPIRE_REMINDER not in reminders  # a waiting escalation is never dropped
    await actor.resolve(decision("skip", "alice"))
    assert reminders[EXPIRE_REMINDER].due_time == timedelta(seconds=600)

    await actor.receive_reminder(EXPIRE_REMINDER, b"", timedelta(seconds=600), timedelta(0))

    assert actor.state.record is None and await store.read("e-3") is None
    assert len(publisher.sent) == 1  # announced once, before and not after


async def test_a_decision_whose_publish_failed_is_announced_by_its_reminder_when_nobody_resumes_again(
    publisher: FlakyPublisher,
) -> None:
    actor = escalation("e-4", publisher)
    await actor._on_activate()
    await actor.park(park_request())
    reminders = actor._state_manager._mock_reminders  # type: ignore[attr-defined]
    with pytest.raises(ConnectionError):
        await actor.resolve(decision("skip", "alice"))
    assert not actor.state.announced and ANNOUNCE_REMINDER in reminders

    await actor.receive_reminder(ANNOUNCE_REMINDER, b"", ANNOUNCE_RETRY, ANNOUNCE_RETRY)

    [(topic, event, _)] = publisher.sent
    assert topic == "agora.escalation.resolved" and event.decision.action == "skip"
    assert actor.state.announced and ANNOUNCE_REMINDER not in reminders


async def listed(store: EscalationStore, name: str) -> list[str]:
    names = [name] if name != "all" else ["WAITING_FOR_HUMAN", "RESOLVED", "EXPIRED"]
    page = await store.listings.page(names, ListingFilter(), 0, 50, datetime.now(UTC))
    return [row.escalation_id for row in page.rows]


async def test_an_escalation_is_listed_by_status_from_its_park_until_it_is_dropped(
    publisher: FlakyPublisher,
) -> None:
    publisher.failures = 0
    store = store_over()
    deps = EscalationDeps(cast(Publisher, publisher), store, retention_seconds=600)
    actor = hosted(Escalation, "e-5", deps)
    await actor._on_activate()
    await actor.park(park_request())
    assert await listed(store, "WAITING_FOR_HUMAN") == ["e-5"] and await listed(store, "all") == ["e-5"]

    await actor.resolve(decision("skip", "alice"))
    assert await listed(store, "WAITING_FOR_HUMAN") == [] and await listed(store, "RESOLVED") == ["e-5"]
    assert await listed(store, "all") == ["e-5"]

    await actor.receive_reminder(EXPIRE_REMINDER, b"", timedelta(seconds=600), timedelta(0))
    assert await listed(store, "RESOLVED") == [] and await listed(store, "all") == []


async def test_a_record_an_earlier_version_kept_in_the_actor_moves_to_its_key_and_listings(
    publisher: FlakyPublisher,
) -> None:
    store = store_over()
    record = EscalationRecord.model_validate(
        {
            **park_request().model_dump(exclude={"who", "why"}),
            "escalation_id": "e-6",
            "created_at": datetime.now(UTC),
        }
    )
    earlier = {"record": record.model_dump(mode="json"), "traceparent": None, "announced": False}
    deps = EscalationDeps(cast(Publisher, publisher), store)
    actor = hosted(Escalation, "e-6", deps, initstate={STATE_KEY: earlier})
    await actor._on_activate()

    assert answer_of(await actor.get()).result == record
    moved = await store.read("e-6")
    assert moved is not None and moved.value.record == record and STATE_KEY not in mock_state(actor)
    assert await listed(store, "WAITING_FOR_HUMAN") == ["e-6"] and await listed(store, "all") == ["e-6"]
