"""Bid scoring: calibrated success, reputation and cost blended into one comparable number.

Formulas:

    calibrated_success = (4 * clamp(raw_prob * calibration_factor, 0, 1)
                          + n * success_rate + 2 * 0.5) / (4 + n + 2),  n = min(outcomes, 20)
    cost_score         = 1 / (1 + estimated_cost / budget)
    composite          = alpha*reputation + beta*calibrated_success + gamma*cost_score
    final_score        = composite + ucb_bonus
    final_score        = -1.0 when calibrated_success < min_success_threshold

`agora.core.reputation.calibrated_success` says why the claim is weighed beside the agent's
record and a prior instead of standing alone (docs/reference.md: the reference formula is the
product alone). A claim that tells nothing, every bid of the task claiming the same number (an
estimator that rates every candidate alike), counts for nothing there.

Choices the formulas leave open:

* Over budget: a bid whose `estimated_cost_usd` exceeds `spec.budget_usd` also gets
  `final_score = -1.0` — the budget is a hard cap, so such a bid cannot be awarded.
  `disqualification` says which rule applied.
* No budget (`budget_usd is None`): costs are normalised by a reference cost instead of the
  budget. `score_all` uses the median estimated cost of the bids being compared, so the
  typical bid scores 0.5, cheaper ones more; `score` (one bid, nothing to compare with) uses
  the bid's own cost, giving 0.5. A free bid (cost 0) always scores 1.0; when that reference cost is
  0 (at least half the bids are free) a paid bid scores 0.0.
* Ties: `score_all` orders by final score, then higher calibrated success, then lower
  estimated cost, then agent id and bid id, so the ranking is deterministic.
* Exploration weight: `exploration_weight` multiplies the tracker's UCB1 bonus; the default,
  `REFERENCE_EXPLORATION` (1.0), is the plain UCB1 formula. `BidScore.ucb_bonus` is the
  bonus as applied, so `final_score = composite + ucb_bonus` holds for every score. The
  allocator service runs with `MARKET_EXPLORATION` (see there for why).
* The bonus's `N` is whatever the `ReputationSource` counts: the allocator service scores each
  task over a tracker of its candidates' records, so its `N` is their outcomes, not the whole
  market's. bench/ucb_market_count.py compares the two: they decide alike (0.969 and 0.968 of
  the oracle's late success on average over four scenarios and three seeds), so the allocator
  keeps the count it has without reading the market's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Protocol

from agora.core.market import Bid, BidScore, TaskSpec
from agora.core.reputation import calibrated_success

DISQUALIFIED = -1.0
"""Final score of a bid that may not be awarded (moral-hazard guard or budget cap)."""

REFERENCE_EXPLORATION = 1.0
"""Weight 1: the plain UCB1 bonus, unweighted, in `final_score = composite + ucb_bonus`."""

MARKET_EXPLORATION = 0.1
"""Weight of the UCB1 bonus in the allocator service (`AGORA_EXPLORATION_WEIGHT`).

UCB1's `sqrt(2 ln N / n_i)` is sized for rewards spread over [0, 1], but agents a few points of
success apart differ in the composite by less (0.1 of success moves it by about 0.08), so at
full weight the bonus (0.1-0.4 at N = 5,000) keeps spreading tasks over every fair agent for
thousands of tasks. In bench/market_simulation.py (20 agents, 5,000 tasks, four scenarios,
three seeds) full weight reaches 0.89-0.93x the oracle's late success and 0.1 reaches
0.95-0.985x (0.25 and 0.5 fall between). A newcomer still gets `0.1 * sqrt(2 ln N)` (0.41 at
N = 5,000) and a trusted claim, so it is tried at once; and when a weak agent becomes the best
mid-run, 0.1 hands it its tasks sooner than full weight does, while a weight of 0 can miss it
for good (the benchmark's "improving agent" study)."""


class Calibration(Protocol):
    """How a claim becomes a calibrated success (`agora.core.reputation.calibrated_success`)."""

    def __call__(
        self, claim: float, factor: float, successes: float, total: float, *, claim_informative: bool = True
    ) -> float: ...


class ReputationSource(Protocol):
    """What the scorer needs to know about an agent's history (e.g. `ReputationTracker`)."""

    async def reputation_score(self, agent_id: str) -> float: ...

    async def calibration_factor(self, agent_id: str) -> float: ...

    async def track_record(self, agent_id: str) -> tuple[float, float]:
        """(successful, total) outcomes of the agent, as evidence (each with its weight)."""
        ...

    async def ucb_bonus(self, agent_id: str) -> float: ...


def cost_score(estimated_cost_usd: float, reference_usd: float) -> float:
    """`1 / (1 + cost / reference)`; 1.0 for a free bid, 0.0 for a paid bid against reference 0
    and for an infinite cost (so the result is always a number in [0, 1])."""
    if estimated_cost_usd <= 0.0:
        return 1.0
    if reference_usd <= 0.0 or math.isinf(estimated_cost_usd):
        return 0.0
    return 1.0 / (1.0 + estimated_cost_usd / reference_usd)


def claims_informative(bids: Sequence[Bid]) -> bool:
    """Whether the bids' claims can tell their agents apart: not when two or more bids all claim
    the same number (an estimator that rated every candidate alike says nothing of any)."""
    return len(bids) < 2 or len({bid.self_reported_success_prob for bid in bids}) > 1


def over_budget(bid: Bid, spec: TaskSpec) -> bool:
    return spec.budget_usd is not None and bid.estimated_cost_usd > spec.budget_usd


def disqualification(bid: Bid, score: BidScore, spec: TaskSpec) -> str | None:
    """Why this bid scored `DISQUALIFIED`, or None when it is eligible for award."""
    reasons = []
    if score.calibrated_success_prob < spec.min_success_threshold:
        reasons.append(
            f"calibrated success {score.calibrated_success_prob:.2f} below min_success_threshold "
            f"{spec.min_success_threshold:g}"
        )
    if over_budget(bid, spec):
        reasons.append(f"estimated cost ${bid.estimated_cost_usd:g} over budget ${spec.budget_usd:g}")
    return "; ".join(reasons) or None


class BidScorer:
    """Scores bids with the composite formula (see module docstring)."""

    def __init__(
        self,
        reputation_tracker: ReputationSource,
        alpha: float = 0.35,
        beta: float = 0.45,
        gamma: float = 0.20,
        *,
        exploration_weight: float = REFERENCE_EXPLORATION,
        calibration: Calibration = calibrated_success,
    ) -> None:
        weights = {"alpha": alpha, "beta": beta, "gamma": gamma, "exploration_weight": exploration_weight}
        for name, weight in weights.items():
            if not (math.isfinite(weight) and weight >= 0.0):
                raise ValueError(f"{name} must be a finite weight >= 0, got {weight!r}")
        if not math.isclose(alpha + beta + gamma, 1.0):
            raise ValueError(f"alpha + beta + gamma must equal 1.0, got {alpha + beta + gamma!r}")
        self.reputation_tracker = reputation_tracker
        self.alpha = alpha
        self.beta = beta
        self.gamma = gamma
        self.exploration_weight = exploration_weight
        self.calibration = calibration

    async def score(self, bid: Bid, spec: TaskSpec) -> BidScore:
        """Score one bid; without a budget its cost is normalised by itself (cost_score 0.5)."""
        return await self._score(bid, spec, self._reference_cost([bid], spec), claims_informative=True)

    async def score_all(self, bids: Sequence[Bid], spec: TaskSpec) -> list[BidScore]:
        """Score every bid against the same reference cost; best first, ties broken deterministically."""
        reference = self._reference_cost(bids, spec)
        informative = claims_informative(bids)
        scored = [(await self._score(bid, spec, reference, informative), bid) for bid in bids]
        scored.sort(
            key=lambda pair: (
                -pair[0].final_score,
                -pair[0].calibrated_success_prob,
                pair[1].estimated_cost_usd,
                pair[1].agent_id,
                pair[1].bid_id,
            )
        )
        return [score for score, _ in scored]

    @staticmethod
    def _reference_cost(bids: Sequence[Bid], spec: TaskSpec) -> float:
        if spec.budget_usd is not None:
            return spec.budget_usd
        if not bids:
            return 0.0
        return statistics.median(bid.estimated_cost_usd for bid in bids)

    async def _score(
        self, bid: Bid, spec: TaskSpec, reference_usd: float, claims_informative: bool
    ) -> BidScore:
        if bid.task_id != spec.task_id:
            raise ValueError(f"bid {bid.bid_id} is for task {bid.task_id!r}, not {spec.task_id!r}")
        source = self.reputation_tracker
        reputation = await source.reputation_score(bid.agent_id)
        factor = await source.calibration_factor(bid.agent_id)
        bonus = self.exploration_weight * await source.ucb_bonus(bid.agent_id)
        successes, total = await source.track_record(bid.agent_id)
        raw = bid.self_reported_success_prob
        calibrated = self.calibration(raw, factor, successes, total, claim_informative=claims_informative)
        cost = cost_score(bid.estimated_cost_usd, reference_usd)
        composite = self.alpha * reputation + self.beta * calibrated + self.gamma * cost
        eligible = calibrated >= spec.min_success_threshold and not over_budget(bid, spec)
        return BidScore(
            bid_id=bid.bid_id,
            agent_id=bid.agent_id,
            raw_success_prob=raw,
            calibrated_success_prob=calibrated,
            reputation_score=reputation,
            cost_score=cost,
            composite=composite,
            ucb_bonus=bonus,
            final_score=composite + bonus if eligible else DISQUALIFIED,
        )
