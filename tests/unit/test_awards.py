"""Awards must be acknowledged: the window, acknowledgment by the holder only, and what an
unacknowledged award passes to (the next-best eligible bid, or a failure with the reason)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agora.core.errors import IllegalTransition, InvalidArgument, InvalidOutcome
from agora.core.market import AllocationResult, AllocationStatus, Bid, BidScore, TaskOutcome, TaskSpec
from agora.core.task_lifecycle import (
    DEFAULT_ACK_SECONDS,
    AwardNotHeld,
    TaskRecord,
    ack_window_seconds,
    acknowledge,
    allocate,
    expire_award,
    hand_over,
    move,
    next_best,
    record_outcome,
    successor,
)

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def spec(**extra: object) -> TaskSpec:
    return TaskSpec.model_validate({"task_id": "t1", "description": "d", "required_skills": ["s"], **extra})


def scored(agent_id: str, final: float) -> tuple[Bid, BidScore]:
    bid = Bid(
        task_id="t1",
        agent_id=agent_id,
        self_reported_success_prob=0.8,
        estimated_cost_usd=0.1,
        estimated_steps=2,
    )
    score = BidScore(
        bid_id=bid.bid_id,
        agent_id=agent_id,
        raw_success_prob=0.8,
        calibrated_success_prob=0.8,
        reputation_score=0.5,
        cost_score=0.5,
        composite=final,
        ucb_bonus=0.0,
        final_score=final,
    )
    return bid, score


def awarded(*finals: tuple[str, float]) -> AllocationResult:
    """Task t1 awarded to the first of `finals` (agent, final score), every bid kept."""
    pairs = [scored(agent, final) for agent, final in finals]
    winner_bid, winner_score = pairs[0]
    return AllocationResult(
        task_id="t1",
        status=AllocationStatus.ALLOCATED,
        winning_agent_id=winner_bid.agent_id,
        winning_bid=winner_bid,
        winning_score=winner_score,
        all_scores=[s for _, s in pairs],
        all_bids=[b for b, _ in pairs],
    )


def allocated(*finals: tuple[str, float]) -> TaskRecord:
    bidding = move(TaskRecord(spec=spec()), AllocationStatus.BIDDING)
    return allocate(bidding, awarded(*finals), NOW).model_copy(update={"award_published": True})


def test_the_window_is_the_default_or_a_shorter_task_deadline() -> None:
    assert ack_window_seconds(spec()) == DEFAULT_ACK_SECONDS
    assert ack_window_seconds(spec(deadline_ms=2500)) == 2.5
    assert ack_window_seconds(spec(deadline_ms=3_600_000)) == DEFAULT_ACK_SECONDS


def test_an_allocation_opens_the_first_award() -> None:
    record = allocated(("a", 0.9), ("b", 0.5))
    [award] = record.awards
    assert award.agent_id == "a" and award.awarded_at == NOW and award.acknowledged_at is None
    assert record.current_award == award


def test_only_the_holder_can_acknowledge_and_twice_is_once() -> None:
    record = allocated(("a", 0.9), ("b", 0.5))
    with pytest.raises(AwardNotHeld):
        acknowledge(record, "b", NOW)
    taken = acknowledge(record, "a", NOW + timedelta(seconds=1))
    assert taken.awards[-1].acknowledged_at == NOW + timedelta(seconds=1)
    assert acknowledge(taken, "a", NOW + timedelta(seconds=2)) == taken


def test_an_acknowledged_award_does_not_expire() -> None:
    taken = acknowledge(allocated(("a", 0.9), ("b", 0.5)), "a", NOW)
    assert expire_award(taken, NOW + timedelta(minutes=5)) == taken


def test_an_unacknowledged_award_passes_to_the_next_best_eligible_bid() -> None:
    record = allocated(("a", 0.9), ("neg", -0.1), ("b", 0.5))
    later = NOW + timedelta(seconds=31)
    passed = expire_award(record, later)
    assert passed.status is AllocationStatus.ALLOCATED and not passed.award_published
    assert passed.allocation is not None and passed.allocation.winning_agent_id == "b"
    assert passed.allocation.winning_bid is not None and passed.allocation.winning_bid.agent_id == "b"
    assert [(a.agent_id, a.expired_at) for a in passed.awards] == [("a", later), ("b", None)]
    with pytest.raises(AwardNotHeld):
        acknowledge(passed, "a", later)  # its turn is over
    assert acknowledge(passed, "b", later).awards[-1].acknowledged_at == later


def test_when_no_eligible_bid_is_left_the_task_fails_with_the_reason() -> None:
    record = allocated(("a", 0.9), ("neg", -0.1), ("b", 0.5))
    second = expire_award(record, NOW + timedelta(seconds=31))
    failed = expire_award(second.model_copy(update={"award_published": True}), NOW + timedelta(seconds=62))
    assert failed.status is AllocationStatus.FAILED
    assert failed.failure_reason == "no agent acknowledged the award in time (tried a, b)"
    assert failed.history[-1].status is AllocationStatus.FAILED
    assert expire_award(failed, NOW + timedelta(seconds=99)) == failed


def test_next_best_skips_tried_agents_and_negative_scores() -> None:
    record = allocated(("a", 0.9), ("neg", -0.1), ("b", 0.5))
    assert record.allocation is not None
    best = next_best(record.allocation, {"a"})
    assert best is not None and best.agent_id == "b"
    assert next_best(record.allocation, {"a", "b"}) is None


def test_an_outcome_from_an_agent_whose_award_expired_is_refused() -> None:
    passed = expire_award(allocated(("a", 0.9), ("b", 0.5)), NOW + timedelta(seconds=31))
    late = TaskOutcome(task_id="t1", agent_id="a", actual_success=True, actual_cost_usd=0.0, actual_steps=1)
    with pytest.raises(AwardNotHeld):
        record_outcome(passed, late, NOW + timedelta(seconds=32))
    on_time = late.model_copy(update={"agent_id": "b"})
    assert record_outcome(passed, on_time, NOW + timedelta(seconds=32)).status is AllocationStatus.COMPLETED


def test_an_outcome_acknowledges_an_award_not_acknowledged_yet() -> None:
    record = allocated(("a", 0.9), ("b", 0.5))
    outcome = TaskOutcome(
        task_id="t1", agent_id="a", actual_success=True, actual_cost_usd=0.0, actual_steps=1
    )
    done = record_outcome(record, outcome, NOW + timedelta(seconds=2))
    assert done.status is AllocationStatus.COMPLETED
    assert done.awards[-1].acknowledged_at == NOW + timedelta(seconds=2)
    assert expire_award(done, NOW + timedelta(seconds=31)) == done  # nothing left to pass on
    taken = acknowledge(record, "a", NOW)
    assert record_outcome(taken, outcome, NOW + timedelta(seconds=2)).awards[-1].acknowledged_at == NOW


def test_a_decision_is_recorded_in_one_step_from_pending() -> None:
    pairs = [scored("a", 0.9), scored("b", 0.5)]
    winner_bid, winner_score = pairs[0]
    result = AllocationResult(
        task_id="t1",
        status=AllocationStatus.ALLOCATED,
        winning_agent_id="a",
        winning_bid=winner_bid,
        winning_score=winner_score,
        all_scores=[s for _, s in pairs],
        all_bids=[b for b, _ in pairs],
    )
    decided = allocate(TaskRecord(spec=spec()), result, NOW)
    assert [h.status for h in decided.history] == [
        AllocationStatus.PENDING,
        AllocationStatus.BIDDING,
        AllocationStatus.ALLOCATED,
    ]
    assert decided.allocation is not None and len(decided.allocation.all_bids) == 2
    assert allocate(decided, result, NOW) is decided  # the same decision again changes nothing


def test_a_rejection_before_any_bid_skips_bidding() -> None:
    result = AllocationResult(
        task_id="t1", status=AllocationStatus.REJECTED, reject_reason="no capable agent"
    )
    rejected = allocate(TaskRecord(spec=spec()), result, NOW)
    assert [h.status for h in rejected.history] == [AllocationStatus.PENDING, AllocationStatus.REJECTED]


def test_an_allocation_for_another_task_is_refused() -> None:
    result = AllocationResult(task_id="other", status=AllocationStatus.REJECTED, reject_reason="r")
    with pytest.raises(InvalidOutcome):
        allocate(TaskRecord(spec=spec()), result, NOW)


def test_a_reassignment_hands_a_taken_task_to_the_next_best_bid_or_a_named_bidder() -> None:
    taken = acknowledge(allocated(("a", 0.9), ("neg", -0.1), ("b", 0.5), ("c", 0.3)), "a", NOW)
    later = NOW + timedelta(minutes=2)

    to_next = hand_over(taken, "a", None, "alice (escalation e-1)", later)
    assert to_next.allocation is not None and to_next.allocation.winning_agent_id == "b"
    assert [(a.agent_id, a.handed_over_by) for a in to_next.awards] == [
        ("a", "alice (escalation e-1)"),
        ("b", None),
    ]
    assert to_next.awards[-1].awarded_at == later and not to_next.award_published
    assert hand_over(to_next, "a", None, "alice (escalation e-1)", later) is to_next  # a redelivery

    to_named = hand_over(taken, "a", "neg", "bob", later)  # any bidder a person names
    assert to_named.allocation is not None and to_named.allocation.winning_agent_id == "neg"
    assert to_named.allocation.winning_bid is not None and to_named.allocation.winning_bid.agent_id == "neg"


def test_a_reassignment_is_refused_with_why() -> None:
    record = allocated(("a", 0.9), ("b", 0.5))
    with pytest.raises(IllegalTransition, match="not being run by an agent"):
        successor(record, None)  # awarded, not taken yet
    taken = acknowledge(record, "a", NOW)
    with pytest.raises(InvalidArgument, match="agent z did not bid for task t1; its other bidders: b"):
        successor(taken, "z")
    with pytest.raises(InvalidArgument, match="already a's"):
        successor(taken, "a")
    with pytest.raises(AwardNotHeld):
        hand_over(taken, "b", None, "alice", NOW)  # only the holder gives it up
    alone = acknowledge(allocated(("a", 0.9), ("neg", -0.1)), "a", NOW)
    with pytest.raises(InvalidArgument, match="no eligible bid left that was not tried"):
        successor(alone, None)
    done = record_outcome(
        taken,
        TaskOutcome(task_id="t1", agent_id="a", actual_success=True, actual_cost_usd=0.1, actual_steps=1),
        NOW,
    )
    with pytest.raises(IllegalTransition):
        successor(done, "b")
