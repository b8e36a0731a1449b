"""Suspension from bidding after a lapsed award: the backoff rule, the check of a lapse notice
against the task's record, and the registry keeping a suspended agent listed but out of every
filter until the suspension ends (renewing the lease does not lift it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agora.core.errors import AgoraError
from agora.core.market import AllocationStatus
from agora.core.messages import AwardLapsed, RegistryChange, RegistryChanged, Topic
from agora.core.models import CapabilityProfile
from agora.core.suspension import (
    FIRST_SUSPENSION_SECONDS,
    LAPSES_FORGOTTEN_AFTER_SECONDS,
    MAX_SUSPENSION_SECONDS,
    Suspension,
    UnverifiedLapse,
    after_lapse,
    suspension_seconds,
)
from agora.core.task_lifecycle import AwardAttempt, TaskRecord, acknowledge, allocate, expire_award, post
from agora.registry.service import AgentRegistration, CapabilityRegistry
from agora.sdk.testing import RecordingPublisher
from tests.unit.test_awards import awarded, spec
from tests.unit.test_helm_chart import Doc, repo_docs
from tests.unit.test_registry_reload import Index, Profiles

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# -- the backoff rule ------------------------------------------------------------------------------


def test_the_backoff_doubles_from_30_s_to_at_most_15_min() -> None:
    assert [suspension_seconds(n) for n in range(1, 8)] == [30, 60, 120, 240, 480, 900, 900]
    assert suspension_seconds(10_000) == MAX_SUSPENSION_SECONDS
    with pytest.raises(ValueError):
        suspension_seconds(0)


def lapse(previous: Suspension | None, task_id: str, awarded_s: float, lapsed_s: float) -> Suspension:
    """`after_lapse` of an award made `awarded_s` after T0 that lapsed `lapsed_s` after T0."""
    return after_lapse(previous, task_id, at(awarded_s), at(lapsed_s))


def test_a_first_lapse_suspends_for_30_s_naming_the_task() -> None:
    first = lapse(None, "t-1", -30, 0)
    assert first.until == at(FIRST_SUSPENSION_SECONDS) and first.lapses == 1
    assert "t-1" in first.reason and "30 s" in first.reason
    assert first.in_effect(at(29.9)) and not first.in_effect(at(30))


def test_each_lapse_of_an_award_made_after_the_suspension_ended_doubles_it() -> None:
    first = lapse(None, "t-1", -30, 0)  # ends at 30 s
    second = lapse(first, "t-2", 31, 40)  # the agent, offered again, let the next award lapse
    assert second.lapses == 2 and second.until == at(40 + 60)
    third = lapse(second, "t-3", 150, 200)
    assert third.lapses == 3 and third.until == at(200 + 120) and "t-3" in third.reason


def test_the_awards_held_when_the_runtime_went_away_count_as_one_lapse() -> None:
    # Ten awards made before the first lapsed, lapsing one after another: one failure, so one
    # 30 s suspension, not the 15 min that ten lapses in a row would earn.
    first = lapse(None, "t-0", -30, 0)
    held = first
    for n in range(1, 10):
        held = lapse(held, f"t-{n}", -30 + n, n)
    assert held is first and held.lapses == 1 and held.until == at(30)
    # An award made while the suspension was in effect (a replica that had not heard yet) is
    # part of the same failure too.
    assert lapse(first, "t-late", 20, 45) is first


def test_the_count_starts_over_an_hour_after_the_last_suspension_ended() -> None:
    second = lapse(lapse(None, "t-1", -30, 0), "t-2", 31, 40)  # ends at 100 s
    within = lapse(second, "t-3", 101, 100 + LAPSES_FORGOTTEN_AFTER_SECONDS)
    assert within.lapses == 3
    long_after = lapse(second, "t-3", 101, 100 + LAPSES_FORGOTTEN_AFTER_SECONDS + 1)
    assert long_after.lapses == 1 and long_after.until == at(100 + LAPSES_FORGOTTEN_AFTER_SECONDS + 31)


def test_a_lapse_already_counted_or_overtaken_changes_nothing() -> None:
    first = lapse(None, "t-1", -30, 0)
    assert lapse(first, "t-1", -30, 0) is first  # the same notice delivered again
    later = lapse(first, "t-2", 31, 60)
    assert lapse(later, "t-1", -30, 0) is later  # an older notice arriving late


def test_the_backoff_is_capped_at_15_min() -> None:
    many = Suspension(until=at(0), reason="r", lapses=6, task_id="t-0", lapsed_at=at(-900))
    capped = lapse(many, "t-7", 1, 10)
    assert capped.lapses == 7 and capped.until == at(10 + MAX_SUSPENSION_SECONDS)


# -- the notice against the task's record -------------------------------------------------------


def lapsed_record(*agents: tuple[str, float]) -> TaskRecord:
    """A task whose first award (to the first agent) lapsed."""
    record = allocate(post(None, spec()), awarded(*agents), T0)
    return expire_award(record, at(30))


def test_a_lapse_notice_agrees_with_the_record_it_was_made_from() -> None:
    record = lapsed_record(("ghost", 0.9), ("real", 0.5))
    notice = AwardLapsed.of(record, 1)
    assert (notice.agent_id, notice.awarded_at, notice.lapsed_at) == ("ghost", T0, at(30))
    assert notice.message_id == "lapsed:t1.1"
    assert notice.disagreement_with(record) is None
    with pytest.raises(ValueError):
        AwardLapsed.of(record, 2)  # the second award (to "real") is still open


def test_a_lapse_notice_the_record_does_not_bear_out_says_why() -> None:
    record = lapsed_record(("ghost", 0.9), ("real", 0.5))
    notice = AwardLapsed.of(record, 1)
    other_agent = notice.model_copy(update={"agent_id": "real"})
    assert "went to ghost" in (other_agent.disagreement_with(record) or "")
    open_award = notice.model_copy(update={"agent_id": "real", "attempt": 2})
    assert "has not lapsed" in (open_award.disagreement_with(record) or "")
    assert "no award attempt 3" in (notice.model_copy(update={"attempt": 3}).disagreement_with(record) or "")
    moved = notice.model_copy(update={"lapsed_at": at(31)})
    assert "another time" in (moved.disagreement_with(record) or "")

    taken = acknowledge(allocate(post(None, spec()), awarded(("busy", 0.9)), T0), "busy", at(1))
    forged = AwardLapsed(task_id="t1", agent_id="busy", attempt=1, awarded_at=T0, lapsed_at=at(30))
    assert "acknowledged" in (forged.disagreement_with(taken) or "")


# -- the registry -------------------------------------------------------------------------------


def profile(agent_id: str, *skills: str) -> CapabilityProfile:
    return CapabilityProfile(agent_id=agent_id, agent_name=agent_id, skill_tags=list(skills or ["search"]))


def registry_over(profiles: Profiles, index: Index | None = None) -> CapabilityRegistry:
    return CapabilityRegistry(profiles, index or Index(), RecordingPublisher(), "broadcast")  # type: ignore[arg-type]


def lapse_now(agent_id: str, task_id: str = "t1") -> tuple[AwardLapsed, TaskRecord]:
    """A notice of an award to `agent_id` that lapsed just now, with its task's record."""
    now = datetime.now(UTC)
    attempt = AwardAttempt(agent_id=agent_id, awarded_at=now - timedelta(seconds=30), expired_at=now)
    record = TaskRecord(spec=spec(task_id=task_id), status=AllocationStatus.FAILED, awards=[attempt])
    return AwardLapsed.of(record, 1), record


def ids(found: list[CapabilityProfile]) -> list[str]:
    return [p.agent_id for p in found]


async def test_an_agent_that_let_an_award_lapse_is_listed_but_not_offered() -> None:
    registry = registry_over(Profiles(hold=False))
    await registry.register(profile("ghost"))
    await registry.register(profile("real"))
    notice, record = lapse_now("ghost")

    await registry.apply_lapse(notice, record)

    assert ids(registry.filter_capable(["search"], [])) == ["real"]
    assert registry.filtered_out(registry.filter_capable(["search"], [])) == (["ghost"], 1)
    listed = registry.get("ghost")
    assert listed is not None and listed.suspended_until is not None
    assert listed.suspension_reason is not None and "t1" in listed.suspension_reason
    assert [a.agent_id for a in registry.list_agents()] == ["ghost", "real"]
    assert registry.get("real") is not None and registry.get("real").suspended_until is None  # type: ignore[union-attr]


async def test_renewing_the_lease_does_not_lift_a_suspension() -> None:
    profiles = Profiles(hold=False)
    registry = registry_over(profiles)
    await registry.register(profile("ghost"))
    await registry.apply_lapse(*lapse_now("ghost"))
    suspended_until = registry.get("ghost").suspended_until  # type: ignore[union-attr]

    renewed = await registry.register(profile("ghost"), lease_seconds=600)

    assert renewed.suspended_until == suspended_until
    assert ids(registry.filter_capable(["search"], [])) == []
    stored = AgentRegistration.model_validate(profiles.stored["ghost"][0])
    assert stored.suspension is not None and stored.expires_at is not None


async def test_a_suspension_ends_on_time_on_every_replica() -> None:
    profiles, index = Profiles(hold=False), Index()
    handling, other = registry_over(profiles, index), registry_over(profiles, index)
    await handling.register(profile("ghost"))
    await other.load_all()
    assert ids(other.filter_capable(["search"], [])) == ["ghost"]
    notice, record = lapse_now("ghost")
    await handling.apply_lapse(notice, record)
    await other.apply_change(RegistryChanged(agent_id="ghost", change=RegistryChange.SUSPENDED))

    for replica in (handling, other):
        assert ids(replica.filter_capable(["search"], [])) == []
        assert 29 <= replica.seconds_to_next_change() <= 30
        assert replica.end_suspensions(datetime.now(UTC) + timedelta(seconds=29)) == []
        assert replica.end_suspensions(datetime.now(UTC) + timedelta(seconds=31)) == ["ghost"]
        assert ids(replica.filter_capable(["search"], [])) == ["ghost"]


async def test_a_repeated_notice_or_another_held_award_counts_once_and_a_later_lapse_doubles() -> None:
    registry = registry_over(Profiles(hold=False))
    await registry.register(profile("ghost"))
    notice, record = lapse_now("ghost", "t1")
    first = await registry.apply_lapse(notice, record)
    again = await registry.apply_lapse(notice, record)
    assert first is not None and again is not None and again.suspension == first.suspension

    held_too = await registry.apply_lapse(*lapse_now("ghost", "t2"))  # awarded before t1 lapsed
    assert held_too is not None and held_too.suspension == first.suspension

    assert first.suspension is not None
    offered_again = first.suspension.until + timedelta(seconds=1)
    later = AwardAttempt(
        agent_id="ghost", awarded_at=offered_again, expired_at=offered_again + timedelta(seconds=30)
    )
    record = TaskRecord(spec=spec(task_id="t3"), status=AllocationStatus.FAILED, awards=[later])
    second = await registry.apply_lapse(AwardLapsed.of(record, 1), record)
    assert second is not None and second.suspension is not None
    assert second.suspension.lapses == 2 and second.suspension.task_id == "t3"


async def test_a_notice_the_record_disowns_suspends_nobody() -> None:
    registry = registry_over(Profiles(hold=False))
    await registry.register(profile("real"))
    notice, record = lapse_now("ghost")
    forged = notice.model_copy(update={"agent_id": "real"})
    with pytest.raises(UnverifiedLapse) as refused:
        await registry.apply_lapse(forged, record)
    assert isinstance(refused.value, AgoraError) and refused.value.permanent
    assert ids(registry.filter_capable(["search"], [])) == ["real"]


async def test_a_lapse_of_an_agent_no_longer_registered_changes_nothing() -> None:
    profiles = Profiles(hold=False)
    registry = registry_over(profiles)
    assert await registry.apply_lapse(*lapse_now("gone")) is None
    assert profiles.stored == {} and registry.list_agents() == []


async def test_a_replica_that_starts_during_a_suspension_keeps_it() -> None:
    profiles, index = Profiles(hold=False), Index()
    first = registry_over(profiles, index)
    await first.register(profile("ghost"))
    await first.apply_lapse(*lapse_now("ghost"))

    started = registry_over(profiles, index)
    assert await started.load_all() == 1
    assert ids(started.filter_capable(["search"], [])) == []
    assert started.get("ghost") is not None and started.get("ghost").suspended_until is not None  # type: ignore[union-attr]


# -- who may announce a lapse -------------------------------------------------------------------


def scope_of(rule: str, component: Doc) -> dict[str, set[str]]:
    """A topic scope rule (`app=topic,topic;app=...`) as topics by app."""
    [value] = [item["value"] for item in component["spec"]["metadata"] if item["name"] == rule]
    scopes: dict[str, set[str]] = {}
    for entry in value.split(";"):
        app, _, topics = entry.partition("=")
        scopes[app] = set(topics.split(",")) if topics else set()
    return scopes


def test_only_the_task_board_may_announce_lapses_and_only_those_that_act_on_them_hear_them() -> None:
    [pubsub] = [doc for doc in repo_docs("redis", "pubsub.yaml") if doc["metadata"]["name"] == "agora-pubsub"]
    topic = str(Topic.TASK_AWARD_LAPSED)
    [protected] = [item["value"] for item in pubsub["spec"]["metadata"] if item["name"] == "protectedTopics"]
    assert topic in protected.split(",")
    publishers = {app for app, topics in scope_of("publishingScopes", pubsub).items() if topic in topics}
    subscribers = {app for app, topics in scope_of("subscriptionScopes", pubsub).items() if topic in topics}
    assert (publishers, subscribers) == ({"taskboard"}, {"registry", "planner", "agents"})
