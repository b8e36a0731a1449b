"""Reputation: the UCB bonus, the pure outcome rule, and the in-memory tracker."""

from __future__ import annotations

import math
import random

import pytest

from agora.core.market import Bid, ReputationRecord, TaskOutcome
from agora.core.reputation import (
    CALIBRATION_MAX,
    CALIBRATION_MIN,
    DEFAULT_EMA_WEIGHT,
    ReputationTracker,
    apply_outcome,
    outcome_counts_as_success,
    ucb_bonus,
)


def outcome(
    success: bool, *, task_id: str = "t-1", agent_id: str = "a", cost: float = 0.01, partial: bool = False
) -> TaskOutcome:
    return TaskOutcome(
        task_id=task_id,
        agent_id=agent_id,
        actual_success=success,
        actual_cost_usd=cost,
        actual_steps=1,
        partial=partial,
    )


def bid(
    agent_id: str = "a", task_id: str = "t-1", prob: float = 0.8, cost: float = 0.01, **extra: object
) -> Bid:
    return Bid.model_validate(
        {
            "task_id": task_id,
            "agent_id": agent_id,
            "self_reported_success_prob": prob,
            "estimated_cost_usd": cost,
            "estimated_steps": 2,
            **extra,
        }
    )


# --- ucb_bonus -------------------------------------------------------------------------------


def test_ucb_bonus_follows_the_reference_formula() -> None:
    assert ucb_bonus(100, 4) == pytest.approx(math.sqrt(2 * math.log(100) / 4))


@pytest.mark.parametrize(("total", "agent"), [(0, 0), (1, 0), (0, 5), (10, 0)])
def test_ucb_bonus_is_defined_and_positive_at_the_edges(total: int, agent: int) -> None:
    assert ucb_bonus(total, agent) == pytest.approx(math.sqrt(2 * math.log(max(2, total)) / max(1, agent)))
    assert ucb_bonus(total, agent) > 0


def test_ucb_bonus_decays_with_the_agents_history() -> None:
    bonuses = [ucb_bonus(1000, n) for n in range(1, 50)]
    assert bonuses == sorted(bonuses, reverse=True)


# --- apply_outcome -----------------------------------------------------------------------------


def test_apply_outcome_counts_and_is_pure() -> None:
    record = ReputationRecord(agent_id="a", total_tasks=3, successful_tasks=1, success_rate=1 / 3)
    updated = apply_outcome(record, outcome(True), estimated_cost_usd=None, self_reported=None)
    assert (updated.total_tasks, updated.successful_tasks) == (4, 2)
    assert updated.success_rate == 0.5
    assert record.total_tasks == 3  # unchanged
    failed = apply_outcome(updated, outcome(False), estimated_cost_usd=None, self_reported=None)
    assert (failed.total_tasks, failed.successful_tasks, failed.success_rate) == (5, 2, 0.4)


def test_apply_outcome_names_a_fresh_record_after_the_agent() -> None:
    updated = apply_outcome(ReputationRecord(), outcome(True), estimated_cost_usd=None, self_reported=None)
    assert updated.agent_id == "a"


def test_cost_accuracy_is_an_ema_of_actual_over_estimate() -> None:
    record = ReputationRecord(agent_id="a")
    updated = apply_outcome(
        record, outcome(True, cost=2.0), estimated_cost_usd=1.0, self_reported=None, ema_weight=0.5
    )
    assert updated.cost_accuracy == pytest.approx(1.5)


@pytest.mark.parametrize("estimate", [None, 0.0])
def test_cost_accuracy_is_skipped_without_a_usable_estimate(estimate: float | None) -> None:
    updated = apply_outcome(
        ReputationRecord(agent_id="a"), outcome(True), estimated_cost_usd=estimate, self_reported=None
    )
    assert updated.cost_accuracy == 1.0


def test_calibration_moves_toward_success_over_claim() -> None:
    record = ReputationRecord(agent_id="a")
    up = apply_outcome(record, outcome(True), estimated_cost_usd=None, self_reported=0.8, ema_weight=0.5)
    assert up.calibration_factor == pytest.approx(0.5 * 1.0 + 0.5 * (1 / 0.8))
    down = apply_outcome(record, outcome(False), estimated_cost_usd=None, self_reported=0.8, ema_weight=0.5)
    assert down.calibration_factor == pytest.approx(0.5)


def test_calibration_is_unchanged_without_a_self_report() -> None:
    updated = apply_outcome(
        ReputationRecord(agent_id="a"), outcome(False), estimated_cost_usd=None, self_reported=None
    )
    assert updated.calibration_factor == 1.0


def test_calibration_stays_within_its_bounds() -> None:
    record = ReputationRecord(agent_id="a")
    for i in range(200):
        record = apply_outcome(
            record, outcome(False, task_id=f"t{i}"), estimated_cost_usd=None, self_reported=0.9
        )
    assert record.calibration_factor == CALIBRATION_MIN
    for i in range(200):
        record = apply_outcome(
            record, outcome(True, task_id=f"u{i}"), estimated_cost_usd=None, self_reported=0.0
        )
    assert record.calibration_factor == CALIBRATION_MAX


def test_an_overclaiming_agent_is_discounted_to_its_true_rate() -> None:
    """Reports 0.9, succeeds 45% of the time: the factor settles near 0.5, 0.9 x factor near 0.45."""
    rng = random.Random(7)
    record = ReputationRecord(agent_id="a")
    factors = []
    for i in range(4000):
        success = rng.random() < 0.45
        record = apply_outcome(
            record, outcome(success, task_id=f"t{i}"), estimated_cost_usd=None, self_reported=0.9
        )
        factors.append(record.calibration_factor)
    mean_factor = sum(factors[1000:]) / len(factors[1000:])
    assert mean_factor == pytest.approx(0.5, abs=0.03)
    assert min(1.0, 0.9 * mean_factor) == pytest.approx(0.45, abs=0.03)


def test_the_pending_self_report_is_used_and_removed() -> None:
    record = ReputationRecord(agent_id="a", pending_self_reports={"t-1": 0.5, "t-2": 0.7})
    updated = apply_outcome(
        record, outcome(True), estimated_cost_usd=None, self_reported=None, ema_weight=1.0
    )
    assert updated.calibration_factor == pytest.approx(2.0)
    assert updated.pending_self_reports == {"t-2": 0.7}
    assert record.pending_self_reports == {"t-1": 0.5, "t-2": 0.7}


def test_an_explicit_self_report_wins_over_the_pending_one_which_is_still_removed() -> None:
    record = ReputationRecord(agent_id="a", pending_self_reports={"t-1": 0.5})
    updated = apply_outcome(record, outcome(True), estimated_cost_usd=None, self_reported=0.8, ema_weight=1.0)
    assert updated.calibration_factor == pytest.approx(1.25)
    assert updated.pending_self_reports == {}


def test_a_partial_outcome_counts_as_success_only_when_the_caller_says_so() -> None:
    partial = outcome(False, partial=True)
    record = ReputationRecord(agent_id="a")
    assert apply_outcome(record, partial, estimated_cost_usd=None, self_reported=None).successful_tasks == 0
    counted = apply_outcome(
        record, partial, estimated_cost_usd=None, self_reported=None, counts_as_success=True
    )
    assert counted.successful_tasks == 1
    assert outcome_counts_as_success(partial, allow_partial=True) is True
    assert outcome_counts_as_success(outcome(True, partial=True), allow_partial=False) is False
    assert outcome_counts_as_success(outcome(True), allow_partial=False) is True


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ema_weight": 0.0}, "ema_weight"),
        ({"ema_weight": 1.5}, "ema_weight"),
        ({"self_reported": 1.5}, "self_reported"),
        ({"estimated_cost_usd": -1.0}, "estimated_cost_usd"),
    ],
)
def test_apply_outcome_rejects_bad_arguments(kwargs: dict[str, float], message: str) -> None:
    arguments: dict[str, float | None] = {"estimated_cost_usd": None, "self_reported": None, **kwargs}
    with pytest.raises(ValueError, match=message):
        apply_outcome(ReputationRecord(agent_id="a"), outcome(True), **arguments)  # type: ignore[arg-type]


def test_apply_outcome_refuses_another_agents_record() -> None:
    with pytest.raises(ValueError, match="applied to the record of 'b'"):
        apply_outcome(
            ReputationRecord(agent_id="b"), outcome(True), estimated_cost_usd=None, self_reported=None
        )


# --- ReputationTracker ---------------------------------------------------------------------------


async def test_unknown_agents_get_a_fresh_record_and_neutral_scores() -> None:
    tracker = ReputationTracker()
    record = await tracker.get("newcomer")
    assert record.agent_id == "newcomer"
    assert record.total_tasks == 0
    assert record.ucb_confidence == pytest.approx(math.sqrt(2 * math.log(2)))
    assert await tracker.reputation_score("newcomer") == 0.5
    assert await tracker.calibration_factor("newcomer") == 1.0
    assert await tracker.ucb_bonus("newcomer") > 0


async def test_update_counts_and_drives_the_ucb_bonus() -> None:
    tracker = ReputationTracker()
    for i in range(3):
        await tracker.update(outcome(i != 0, task_id=f"a{i}", agent_id="a"))
    await tracker.update(outcome(True, task_id="b0", agent_id="b"))
    assert tracker.total_tasks == 4
    record = await tracker.get("a")
    assert (record.total_tasks, record.successful_tasks) == (3, 2)
    assert await tracker.reputation_score("a") == pytest.approx(2 / 3)
    assert await tracker.ucb_bonus("a") == pytest.approx(ucb_bonus(4, 3))
    assert await tracker.ucb_bonus("b") == pytest.approx(ucb_bonus(4, 1))
    assert record.ucb_confidence == pytest.approx(ucb_bonus(4, 3))


async def test_a_recorded_bid_feeds_calibration_and_cost_accuracy() -> None:
    tracker = ReputationTracker(ema_weight=0.5)
    tracker.record_bid(bid(prob=0.8, cost=0.02))
    assert (await tracker.get("a")).pending_self_reports == {"t-1": 0.8}
    updated = await tracker.update(outcome(False, cost=0.04))
    assert updated.calibration_factor == pytest.approx(0.5)
    assert updated.cost_accuracy == pytest.approx(0.5 * 1.0 + 0.5 * 2.0)
    assert updated.pending_self_reports == {}
    again = await tracker.update(outcome(False, task_id="t-2"))  # nothing remembered for t-2
    assert again.calibration_factor == pytest.approx(0.5)
    assert again.cost_accuracy == pytest.approx(1.5)


async def test_fallback_bids_are_not_remembered() -> None:
    tracker = ReputationTracker()
    tracker.record_bid(bid(fallback=True, fallback_reason="timeout"))
    assert (await tracker.get("a")).pending_self_reports == {}
    assert (await tracker.update(outcome(False))).calibration_factor == 1.0


async def test_forget_bids_drops_losing_bids() -> None:
    tracker = ReputationTracker(ema_weight=0.5)
    tracker.record_bid(bid(agent_id="a"))
    tracker.record_bid(bid(agent_id="b"))
    tracker.forget_bids("t-1", ["b", "unknown"])
    assert (await tracker.get("a")).pending_self_reports == {"t-1": 0.8}
    assert (await tracker.get("b")).pending_self_reports == {}
    assert (await tracker.update(outcome(False, agent_id="b"))).cost_accuracy == 1.0


async def test_an_untagged_self_report_calibrates_the_next_outcome_once() -> None:
    tracker = ReputationTracker(ema_weight=1.0)
    tracker.record_self_report("a", 0.5)
    assert (await tracker.update(outcome(True))).calibration_factor == pytest.approx(2.0)
    assert (await tracker.update(outcome(False, task_id="t-2"))).calibration_factor == pytest.approx(2.0)
    with pytest.raises(ValueError, match="prob"):
        tracker.record_self_report("a", 1.2)


async def test_pending_bids_are_capped_per_agent() -> None:
    tracker = ReputationTracker(max_pending_per_agent=3)
    for i in range(5):
        tracker.record_bid(bid(task_id=f"t{i}"))
    assert list((await tracker.get("a")).pending_self_reports) == ["t2", "t3", "t4"]


async def test_records_handed_out_are_copies() -> None:
    tracker = ReputationTracker()
    tracker.record_bid(bid())
    record = await tracker.get("a")
    record.pending_self_reports.clear()
    record.total_tasks = 99
    assert (await tracker.get("a")).pending_self_reports == {"t-1": 0.8}
    assert (await tracker.get("a")).total_tasks == 0


async def test_from_records_builds_a_snapshot() -> None:
    loaded = [
        ReputationRecord(
            agent_id="b", total_tasks=4, successful_tasks=1, success_rate=0.25, calibration_factor=0.7
        ),
        ReputationRecord(agent_id="a", total_tasks=6, successful_tasks=6, success_rate=1.0),
    ]
    tracker = ReputationTracker.from_records(loaded)
    assert tracker.total_tasks == 10
    assert await tracker.calibration_factor("b") == 0.7
    assert await tracker.ucb_bonus("a") == pytest.approx(ucb_bonus(10, 6))
    assert [r.agent_id for r in tracker.records()] == ["a", "b"]
    loaded[0].calibration_factor = 0.1  # the tracker kept its own copy
    assert await tracker.calibration_factor("b") == 0.7

    wider = ReputationTracker.from_records(loaded, total_tasks=500)
    assert await wider.ucb_bonus("a") == pytest.approx(ucb_bonus(500, 6))
    await wider.update(outcome(True, agent_id="a"))
    assert wider.total_tasks == 501


@pytest.mark.parametrize(
    ("records", "total", "message"),
    [
        ([ReputationRecord(agent_id="a", total_tasks=5)], 4, "below the records' own total"),
        ([ReputationRecord(agent_id="a"), ReputationRecord(agent_id="a")], None, "duplicate"),
        ([ReputationRecord()], None, "agent_id"),
    ],
)
def test_from_records_rejects_inconsistent_input(
    records: list[ReputationRecord], total: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ReputationTracker.from_records(records, total)


def test_tracker_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="ema_weight"):
        ReputationTracker(ema_weight=0.0)
    with pytest.raises(ValueError, match="max_pending"):
        ReputationTracker(max_pending_per_agent=0)
    assert 0.0 < DEFAULT_EMA_WEIGHT <= 1.0


async def test_update_passes_counts_as_success_through() -> None:
    tracker = ReputationTracker()
    record = await tracker.update(outcome(False, partial=True), counts_as_success=True)
    assert record.successful_tasks == 1
