"""Bid scoring: the formulas, the hard gates, and the choices they leave open."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from agora.core.market import Bid, TaskSpec
from agora.core.reputation import ReputationTracker, claim_alone
from agora.core.scoring import DISQUALIFIED, BidScorer, cost_score, disqualification


@dataclass
class FixedSource:
    """A `ReputationSource` with set numbers per agent (defaults for others)."""

    reputation: dict[str, float] = field(default_factory=dict)
    calibration: dict[str, float] = field(default_factory=dict)
    bonus: dict[str, float] = field(default_factory=dict)
    record: dict[str, tuple[int, int]] = field(default_factory=dict)

    async def track_record(self, agent_id: str) -> tuple[int, int]:
        return self.record.get(agent_id, (0, 0))

    async def reputation_score(self, agent_id: str) -> float:
        return self.reputation.get(agent_id, 0.5)

    async def calibration_factor(self, agent_id: str) -> float:
        return self.calibration.get(agent_id, 1.0)

    async def ucb_bonus(self, agent_id: str) -> float:
        return self.bonus.get(agent_id, 0.1)


def spec(**overrides: object) -> TaskSpec:
    return TaskSpec.model_validate(
        {"task_id": "t-1", "description": "d", "required_skills": ["x"], "budget_usd": 0.10, **overrides}
    )


def bid(agent_id: str = "a", prob: float = 0.8, cost: float = 0.05, **overrides: object) -> Bid:
    return Bid.model_validate(
        {
            "task_id": "t-1",
            "agent_id": agent_id,
            "self_reported_success_prob": prob,
            "estimated_cost_usd": cost,
            "estimated_steps": 3,
            **overrides,
        }
    )


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ((0.5, 0.5, 0.5), "must equal 1.0"),
        ((0.3, 0.3, 0.3), "must equal 1.0"),
        ((1.2, -0.1, -0.1), "alpha|beta|gamma"),
        ((float("nan"), 0.5, 0.5), "alpha"),
    ],
)
def test_weights_must_be_non_negative_and_sum_to_one(
    weights: tuple[float, float, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        BidScorer(FixedSource(), *weights)


def test_weights_that_sum_to_one_up_to_rounding_are_accepted() -> None:
    scorer = BidScorer(FixedSource(), 0.1, 0.2, 0.7)  # 0.1 + 0.2 + 0.7 != 1.0 in binary
    assert (scorer.alpha, scorer.beta, scorer.gamma) == (0.1, 0.2, 0.7)
    default = BidScorer(FixedSource())
    assert (default.alpha, default.beta, default.gamma) == (0.35, 0.45, 0.20)


async def test_score_follows_the_formula() -> None:
    source = FixedSource(
        reputation={"a": 0.9}, calibration={"a": 0.75}, bonus={"a": 0.2}, record={"a": (9, 10)}
    )
    score = await BidScorer(source).score(bid(prob=0.8, cost=0.05), spec(budget_usd=0.10))
    assert score.raw_success_prob == 0.8
    # The claim 0.8 x 0.75 = 0.6 weighs 4 outcomes, the record 9 of 10, the prior 0.5 two.
    calibrated = (4 * 0.6 + 10 * 0.9 + 2 * 0.5) / (4 + 10 + 2)
    assert score.calibrated_success_prob == pytest.approx(calibrated)
    assert score.reputation_score == 0.9
    assert score.cost_score == pytest.approx(1 / (1 + 0.5))
    assert score.composite == pytest.approx(0.35 * 0.9 + 0.45 * calibrated + 0.20 * (1 / 1.5))
    assert score.ucb_bonus == 0.2
    assert score.final_score == pytest.approx(score.composite + 0.2)
    assert score.agent_id == "a"


@pytest.mark.parametrize("weight", [0.0, 0.25, 1.0, 2.0])
async def test_the_exploration_weight_scales_the_bonus_and_only_the_bonus(weight: float) -> None:
    source = FixedSource(reputation={"a": 0.9}, calibration={"a": 0.75}, bonus={"a": 0.2})
    reference = await BidScorer(source).score(bid(), spec(budget_usd=0.10))
    score = await BidScorer(source, exploration_weight=weight).score(bid(), spec(budget_usd=0.10))
    assert score.ucb_bonus == pytest.approx(weight * 0.2)
    assert score.composite == reference.composite
    assert score.final_score == pytest.approx(score.composite + score.ucb_bonus)


async def test_without_exploration_the_better_record_wins_over_the_newcomer() -> None:
    source = FixedSource(reputation={"a": 0.9, "b": 0.5}, bonus={"a": 0.05, "b": 1.2})
    offers = [bid("a", bid_id="a1"), bid("b", bid_id="b1")]
    explored = await BidScorer(source).score_all(offers, spec())
    greedy = await BidScorer(source, exploration_weight=0.0).score_all(offers, spec())
    assert [s.agent_id for s in explored] == ["b", "a"]
    assert [s.agent_id for s in greedy] == ["a", "b"]


@pytest.mark.parametrize("weight", [-0.1, math.nan, math.inf])
def test_the_exploration_weight_must_be_finite_and_non_negative(weight: float) -> None:
    with pytest.raises(ValueError, match="exploration_weight must be a finite weight >= 0"):
        BidScorer(FixedSource(), exploration_weight=weight)


async def test_a_new_agent_has_neutral_reputation_and_a_positive_bonus() -> None:
    score = await BidScorer(ReputationTracker()).score(bid(), spec())
    assert score.reputation_score == 0.5
    assert score.calibrated_success_prob == pytest.approx((4 * 0.8 + 2 * 0.5) / 6), "pulled toward 0.5"
    assert score.ucb_bonus == pytest.approx(math.sqrt(2 * math.log(2)))


async def test_the_corrected_claim_is_clamped_to_a_probability() -> None:
    score = await BidScorer(FixedSource(calibration={"a": 3.0})).score(bid(prob=0.8), spec())
    assert score.calibrated_success_prob == pytest.approx((4 * 1.0 + 2 * 0.5) / 6)


async def test_the_reference_formula_is_the_corrected_claim_alone() -> None:
    source = FixedSource(calibration={"a": 0.75}, record={"a": (10, 10)})
    score = await BidScorer(source, calibration=claim_alone).score(bid(prob=0.8), spec())
    assert score.calibrated_success_prob == pytest.approx(0.6)
    clamped = await BidScorer(FixedSource(calibration={"a": 3.0}), calibration=claim_alone).score(
        bid(), spec()
    )
    assert clamped.calibrated_success_prob == 1.0


async def test_a_record_of_successes_lifts_a_claim_of_zero_and_one_of_failures_lowers_a_sure_claim() -> None:
    lifted = FixedSource(calibration={"a": 5.0}, record={"a": (20, 20)})
    score = await BidScorer(lifted).score(bid(prob=0.0), spec())
    assert score.calibrated_success_prob == pytest.approx((0 + 20 + 1) / 26)
    assert score.final_score != DISQUALIFIED, "a claim of 0 with a record of successes is awarded"
    lowered = FixedSource(record={"a": (0, 20)})
    score = await BidScorer(lowered).score(bid(prob=1.0), spec())
    assert score.calibrated_success_prob == pytest.approx((4 + 0 + 1) / 26)
    assert score.final_score == DISQUALIFIED


async def test_a_long_record_counts_as_twenty_outcomes_so_the_claim_keeps_its_say() -> None:
    long = FixedSource(record={"a": (500, 1000)})
    score = await BidScorer(long).score(bid(prob=0.9), spec())
    assert score.calibrated_success_prob == pytest.approx((4 * 0.9 + 20 * 0.5 + 1) / 26)


async def test_claims_all_alike_tell_nothing_and_the_records_decide() -> None:
    """An estimator that rates every candidate 0 %: the claims count for nothing, so the agents
    are judged on their records and the prior, not all rejected."""
    source = FixedSource(record={"good": (8, 10), "poor": (1, 10)})
    offers = [bid("good", prob=0.0, bid_id="g"), bid("new", prob=0.0, bid_id="n"), bid("poor", prob=0.0)]
    scores = {s.agent_id: s for s in await BidScorer(source).score_all(offers, spec())}
    assert scores["good"].calibrated_success_prob == pytest.approx((8 + 1) / 12)
    assert scores["new"].calibrated_success_prob == pytest.approx(0.5)
    assert scores["poor"].calibrated_success_prob == pytest.approx((1 + 1) / 12)
    assert scores["poor"].final_score == DISQUALIFIED and scores["good"].final_score != DISQUALIFIED
    # One bid, or claims that differ: the claim counts.
    [alone] = await BidScorer(source).score_all([bid("new", prob=0.0)], spec())
    assert alone.calibrated_success_prob == pytest.approx(1 / 6)
    differing = [bid("good", prob=0.0, bid_id="g"), bid("new", prob=0.1, bid_id="n")]
    apart = {s.agent_id: s for s in await BidScorer(source).score_all(differing, spec())}
    assert apart["new"].calibrated_success_prob == pytest.approx((4 * 0.1 + 1) / 6)


async def test_a_bid_below_the_threshold_after_calibration_is_disqualified() -> None:
    """Moral-hazard guard: 0.9 claimed x 0.5 factor = 0.45, pulled toward 0.5: 0.467 < 0.5."""
    task = spec()
    offer = bid(prob=0.9)
    score = await BidScorer(FixedSource(calibration={"a": 0.5})).score(offer, task)
    assert score.calibrated_success_prob == pytest.approx((4 * 0.45 + 1) / 6)
    assert score.final_score == DISQUALIFIED
    assert score.composite > 0  # the parts are still reported
    reason = disqualification(offer, score, task)
    assert reason is not None
    assert "below min_success_threshold 0.5" in reason


async def test_a_bid_exactly_at_the_threshold_is_eligible() -> None:
    score = await BidScorer(FixedSource()).score(bid(prob=0.5), spec())
    assert score.final_score > 0


async def test_a_bid_over_budget_is_disqualified_and_at_budget_is_not() -> None:
    scorer = BidScorer(FixedSource())
    task = spec(budget_usd=0.10)
    over = bid(cost=0.11)
    over_score = await scorer.score(over, task)
    assert over_score.final_score == DISQUALIFIED
    assert over_score.cost_score == pytest.approx(1 / (1 + 1.1))
    assert disqualification(over, over_score, task) == "estimated cost $0.11 over budget $0.1"
    at = bid(cost=0.10)
    at_score = await scorer.score(at, task)
    assert at_score.final_score > 0
    assert disqualification(at, at_score, task) is None


async def test_without_a_budget_a_single_bid_is_normalised_by_its_own_cost() -> None:
    scorer = BidScorer(FixedSource())
    unlimited = spec(budget_usd=None)
    assert (await scorer.score(bid(cost=0.3), unlimited)).cost_score == pytest.approx(0.5)
    assert (await scorer.score(bid(cost=0.0), unlimited)).cost_score == 1.0


async def test_without_a_budget_score_all_normalises_by_the_median_cost() -> None:
    scorer = BidScorer(FixedSource())
    scores = await scorer.score_all(
        [bid("cheap", cost=0.01), bid("mid", cost=0.02), bid("dear", cost=0.08)], spec(budget_usd=None)
    )
    by_agent = {s.agent_id: s.cost_score for s in scores}
    assert by_agent == pytest.approx({"cheap": 1 / 1.5, "mid": 0.5, "dear": 1 / 5})


def test_cost_score_edges() -> None:
    assert cost_score(0.0, 0.0) == 1.0
    assert cost_score(0.5, 0.0) == 0.0
    assert cost_score(math.inf, 1.0) == 0.0
    assert cost_score(1.0, math.inf) == 1.0


async def test_score_all_is_sorted_best_first() -> None:
    source = FixedSource(reputation={"good": 0.9, "bad": 0.1}, calibration={"gated": 0.1})
    scores = await BidScorer(source).score_all([bid("bad"), bid("gated", prob=0.9), bid("good")], spec())
    assert [s.agent_id for s in scores] == ["good", "bad", "gated"]
    assert scores[-1].final_score == DISQUALIFIED


async def test_ties_break_on_calibrated_success_then_cost_then_agent_id() -> None:
    scorer = BidScorer(FixedSource())
    gated = await scorer.score_all([bid("low", prob=0.2), bid("high", prob=0.3)], spec())  # both -1.0
    assert [s.agent_id for s in gated] == ["high", "low"]

    task = spec(budget_usd=None)
    same = await scorer.score_all([bid("z", cost=0.0), bid("y", cost=0.0), bid("x", cost=0.0)], task)
    assert [s.agent_id for s in same] == ["x", "y", "z"]
    gated = await scorer.score_all(
        [bid("dear", prob=0.1, cost=0.09), bid("cheap", prob=0.1, cost=0.01)], spec(min_success_threshold=0.6)
    )
    assert [s.agent_id for s in gated] == ["cheap", "dear"]


async def test_scoring_a_bid_for_another_task_is_an_error() -> None:
    with pytest.raises(ValueError, match="not 't-1'"):
        await BidScorer(FixedSource()).score(bid(task_id="t-2"), spec())


async def test_score_all_of_nothing_is_empty() -> None:
    assert await BidScorer(FixedSource()).score_all([], spec(budget_usd=None)) == []
