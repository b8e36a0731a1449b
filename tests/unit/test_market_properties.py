"""Property tests for the scorer and the reputation tracker."""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from agora.core.market import Bid, ReputationRecord, TaskOutcome, TaskSpec
from agora.core.reputation import (
    CALIBRATION_MAX,
    CALIBRATION_MIN,
    ReputationTracker,
    apply_outcome,
    ucb_bonus,
)
from agora.core.scoring import DISQUALIFIED, BidScorer

probabilities = st.floats(min_value=0.0, max_value=1.0)
costs = st.floats(min_value=0.0, max_value=10.0)
agent_ids = st.sampled_from(["a", "b", "c", "d"])


@dataclass
class Source:
    """A reputation source with arbitrary (valid) numbers for every agent."""

    reputation: float
    calibration: float
    bonus: float
    record: tuple[int, int] = (0, 0)

    async def track_record(self, agent_id: str) -> tuple[int, int]:
        return self.record

    async def reputation_score(self, agent_id: str) -> float:
        return self.reputation

    async def calibration_factor(self, agent_id: str) -> float:
        return self.calibration

    async def ucb_bonus(self, agent_id: str) -> float:
        return self.bonus


sources = st.builds(
    Source,
    reputation=probabilities,
    calibration=st.floats(min_value=0.0, max_value=CALIBRATION_MAX),
    bonus=st.floats(min_value=1e-6, max_value=5.0),
)
specs = st.builds(
    TaskSpec,
    task_id=st.just("t"),
    description=st.just("d"),
    required_skills=st.just(["x"]),
    budget_usd=st.none() | st.floats(min_value=1e-3, max_value=10.0),
    min_success_threshold=probabilities,
)


@st.composite
def bid_lists(draw: st.DrawFn) -> list[Bid]:
    count = draw(st.integers(min_value=0, max_value=8))
    return [
        Bid(
            bid_id=f"b{i}",
            task_id="t",
            agent_id=draw(agent_ids),
            self_reported_success_prob=draw(probabilities),
            estimated_cost_usd=draw(costs),
            estimated_steps=1,
        )
        for i in range(count)
    ]


@given(sources, specs, bid_lists(), st.floats(min_value=0.0, max_value=2.0))
def test_scores_are_sorted_bounded_and_gated(
    source: Source, spec: TaskSpec, bids: list[Bid], exploration: float
) -> None:
    scores = asyncio.run(BidScorer(source, exploration_weight=exploration).score_all(bids, spec))
    assert [s.final_score for s in scores] == sorted((s.final_score for s in scores), reverse=True)
    by_id = {b.bid_id: b for b in bids}
    assert sorted(by_id) == sorted(s.bid_id for s in scores)
    for score in scores:
        bid = by_id[score.bid_id]
        assert 0.0 <= score.calibrated_success_prob <= 1.0
        assert 0.0 <= score.cost_score <= 1.0
        gated = score.calibrated_success_prob < spec.min_success_threshold or (
            spec.budget_usd is not None and bid.estimated_cost_usd > spec.budget_usd
        )
        assert (score.final_score == DISQUALIFIED) == gated
        assert score.ucb_bonus == exploration * source.bonus
        if not gated:
            assert score.final_score == score.composite + score.ucb_bonus >= 0
            assert score.final_score > 0 or exploration == 0


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=10**4))
def test_ucb_bonus_is_positive_and_decays(total: int, agent: int) -> None:
    assert ucb_bonus(total, agent) > 0
    assert ucb_bonus(total, agent + 1) <= ucb_bonus(total, agent)
    assert ucb_bonus(total + 1, agent) >= ucb_bonus(total, agent)


outcome_lists = st.lists(st.tuples(agent_ids, st.booleans(), costs), max_size=40)


def run_outcomes(outcomes: list[tuple[str, bool, float]]) -> ReputationTracker:
    async def go() -> ReputationTracker:
        tracker = ReputationTracker()
        for i, (agent_id, success, cost) in enumerate(outcomes):
            tracker.record_self_report(agent_id, 0.7, task_id=f"t{i}")
            await tracker.update(
                TaskOutcome(
                    task_id=f"t{i}",
                    agent_id=agent_id,
                    actual_success=success,
                    actual_cost_usd=cost,
                    actual_steps=1,
                )
            )
        return tracker

    return asyncio.run(go())


@given(outcome_lists)
def test_tracker_counts_rates_and_bounds(outcomes: list[tuple[str, bool, float]]) -> None:
    tracker = run_outcomes(outcomes)
    assert tracker.total_tasks == len(outcomes)
    for record in tracker.records():
        assert record.success_rate == record.successful_tasks / record.total_tasks
        assert CALIBRATION_MIN <= record.calibration_factor <= CALIBRATION_MAX
        assert record.cost_accuracy >= 0.0
        assert record.pending_self_reports == {}
    assert sum(r.total_tasks for r in tracker.records()) == len(outcomes)


@given(outcome_lists, st.randoms(use_true_random=False))
def test_counts_do_not_depend_on_the_order_of_outcomes(
    outcomes: list[tuple[str, bool, float]], rnd: random.Random
) -> None:
    shuffled = list(outcomes)
    rnd.shuffle(shuffled)
    first, second = run_outcomes(outcomes), run_outcomes(shuffled)
    assert [(r.agent_id, r.total_tasks, r.successful_tasks) for r in first.records()] == [
        (r.agent_id, r.total_tasks, r.successful_tasks) for r in second.records()
    ]


@given(st.lists(st.booleans(), min_size=1, max_size=40), st.data())
def test_more_successes_never_lower_reputation(history: list[bool], data: st.DataObject) -> None:
    """Turning any failures of an agent's history into successes never lowers its reputation."""
    flips = data.draw(st.lists(st.integers(min_value=0, max_value=len(history) - 1)))
    better = list(history)
    for i in flips:
        better[i] = True
    worse_tracker = run_outcomes([("a", s, 0.0) for s in history])
    better_tracker = run_outcomes([("a", s, 0.0) for s in better])
    worse = asyncio.run(worse_tracker.reputation_score("a"))
    assert asyncio.run(better_tracker.reputation_score("a")) >= worse
    worse_factor = asyncio.run(worse_tracker.calibration_factor("a"))
    assert asyncio.run(better_tracker.calibration_factor("a")) >= worse_factor


@given(probabilities, st.booleans(), st.floats(min_value=0.01, max_value=1.0))
def test_calibration_moves_toward_the_observed_ratio(report: float, success: bool, weight: float) -> None:
    record = ReputationRecord(agent_id="a", calibration_factor=1.0)
    outcome = TaskOutcome(
        task_id="t", agent_id="a", actual_success=success, actual_cost_usd=0, actual_steps=0
    )
    updated = apply_outcome(record, outcome, estimated_cost_usd=None, self_reported=report, ema_weight=weight)
    sample = (1.0 if success else 0.0) / max(report, 0.05)
    low, high = sorted((1.0, sample))
    assert min(low, CALIBRATION_MAX) - 1e-12 <= updated.calibration_factor
    assert updated.calibration_factor <= max(min(high, CALIBRATION_MAX), CALIBRATION_MIN) + 1e-12
    assert math.isfinite(updated.calibration_factor)
