"""Per-agent reputation: success counts, cost accuracy, self-report calibration, UCB exploration.

Why these pieces exist:

* `success_rate` is the reputation term of the bid score: what the agent actually delivered.
* `calibration_factor` discounts what an agent *says* (its self-reported success probability)
  by how its past claims compared with its outcomes, so an agent cannot win by bragging.
* `ucb_bonus` is the UCB1 exploration bonus: agents with little history get a bonus that decays
  as they are tried, so a newcomer is not starved by incumbents with a good record.

`apply_outcome` is the pure update rule; `ReputationTracker` is an in-memory store around it
with an async API (a service may persist `records()` and rebuild a snapshot with
`ReputationTracker.from_records`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from agora.core.market import Bid, ReputationRecord, TaskOutcome

DEFAULT_EMA_WEIGHT = 0.05
"""Weight of the newest observation in the cost-accuracy and calibration EMAs (a memory of
about 20 outcomes). Chosen by bench/market_simulation.py: at 0.2 three straight failures take
an honest 0.9 claim below the default threshold 0.5, and an agent below the threshold is never
awarded again, so it never gets the outcome that would restore it; most good agents end up
excluded (late success 0.50, against 0.82 at 0.1 and 0.84 from 0.05 down to 0.01). Within that
plateau 0.05 is the quickest to follow an agent whose quality changes."""

MIN_REPORT_FOR_CALIBRATION = 0.05
"""Floor on the self-report used as a divisor, so a near-zero claim cannot blow the sample up."""

CALIBRATION_MIN = 0.05
CALIBRATION_MAX = 5.0
"""Calibration factor bounds: never exactly zero (an agent can recover), never unbounded."""

NEUTRAL_REPUTATION = 0.5
"""Reputation of an agent with no history: neither trusted nor distrusted."""

DEFAULT_MAX_PENDING = 1024
"""Per-agent cap on remembered bids awaiting an outcome; the oldest are dropped beyond it, so
bids whose outcome never arrives cannot grow memory without bound."""


def ucb_bonus(total_tasks_all_agents: int, agent_tasks: int) -> float:
    """UCB1 exploration bonus `sqrt(2*ln(max(2, N)) / max(1, n_i))`.

    `N` is the number of outcomes across all agents, `n_i` this agent's. The `max` guards keep
    it defined and strictly positive for a new agent (n_i = 0) and an empty market (N < 2).
    """
    return math.sqrt(2.0 * math.log(max(2, total_tasks_all_agents)) / max(1, agent_tasks))


def with_ucb_confidence(record: ReputationRecord, market_total: int) -> ReputationRecord:
    """`record` with `ucb_confidence` set to its UCB1 bonus now: `ucb_bonus(N, n_i)` with
    `n_i = total_tasks` and `N = market_total`, the outcomes across all agents (at least the
    agent's own: a market count that has not caught up with this agent's latest outcomes yet
    does not make its bonus larger than the formula gives)."""
    if market_total < 0:
        raise ValueError(f"market_total must be >= 0, got {market_total!r}")
    total = max(market_total, record.total_tasks)
    return record.model_copy(update={"ucb_confidence": ucb_bonus(total, record.total_tasks)})


def outcome_counts_as_success(outcome: TaskOutcome, *, allow_partial: bool) -> bool:
    """Whether an outcome is a success for reputation purposes, given the task's `allow_partial`.

    A partial outcome counts as success exactly when the task allowed partial results; any other
    outcome counts as its `actual_success`.
    """
    if outcome.partial:
        return allow_partial
    return outcome.actual_success


def _ema(previous: float, sample: float, weight: float) -> float:
    return (1.0 - weight) * previous + weight * sample


def _check_probability(value: float, name: str) -> None:
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")


def apply_outcome(
    record: ReputationRecord,
    outcome: TaskOutcome,
    *,
    estimated_cost_usd: float | None,
    self_reported: float | None,
    ema_weight: float = DEFAULT_EMA_WEIGHT,
    counts_as_success: bool | None = None,
) -> ReputationRecord:
    """Return a new record with one outcome folded in; `record` is left unchanged.

    * Counts: `total_tasks += 1`; `successful_tasks += 1` when the outcome counts as a success
      (`counts_as_success`, defaulting to `outcome.actual_success`; pass it explicitly for
      partial outcomes, see `outcome_counts_as_success`). `success_rate = successful / total`.
    * Cost accuracy: `cost_accuracy ← (1-w)*cost_accuracy + w*(actual_cost / estimated_cost)`;
      skipped without an estimate or when the estimate is 0 (the ratio is undefined).
    * Calibration: with `s` = 1 for success else 0 and `r` = the self-report for this task,
      `calibration_factor ← clamp((1-w)*factor + w*s / max(r, 0.05), 0.05, 5.0)`.
      The sample's mean is `p_true / r`, so the factor converges to the ratio between the agent's
      true success rate and its claims: an agent that always reports 0.9 and succeeds 45% of the
      time converges to 0.5 and `clamp(0.9 * 0.5) = 0.45` is its true rate. Starting at 1.0
      (trust the claim) with a constant weight acts as a prior worth about `1/w` outcomes.
      Skipped when there is no self-report for the task.
    * The self-report is `self_reported` when given, else the task's entry in
      `record.pending_self_reports`; that entry is removed either way.

    `ucb_confidence` is left as is: it depends on the market-wide count, which the tracker owns.
    """
    if not 0.0 < ema_weight <= 1.0:
        raise ValueError(f"ema_weight must be in (0, 1], got {ema_weight!r}")
    if record.agent_id and record.agent_id != outcome.agent_id:
        raise ValueError(
            f"outcome for agent {outcome.agent_id!r} applied to the record of {record.agent_id!r}"
        )
    if estimated_cost_usd is not None and not estimated_cost_usd >= 0.0:
        raise ValueError(f"estimated_cost_usd must be >= 0, got {estimated_cost_usd!r}")
    pending = dict(record.pending_self_reports)
    stored_report = pending.pop(outcome.task_id, None)
    report = self_reported if self_reported is not None else stored_report
    if report is not None:
        _check_probability(report, "self_reported")
    success = outcome.actual_success if counts_as_success is None else counts_as_success

    total = record.total_tasks + 1
    successful = record.successful_tasks + (1 if success else 0)
    cost_accuracy = record.cost_accuracy
    if estimated_cost_usd:  # None or 0.0: no usable estimate
        cost_accuracy = _ema(cost_accuracy, outcome.actual_cost_usd / estimated_cost_usd, ema_weight)
    calibration = record.calibration_factor
    if report is not None:
        sample = (1.0 if success else 0.0) / max(report, MIN_REPORT_FOR_CALIBRATION)
        calibration = min(CALIBRATION_MAX, max(CALIBRATION_MIN, _ema(calibration, sample, ema_weight)))
    return record.model_copy(
        update={
            "agent_id": record.agent_id or outcome.agent_id,
            "total_tasks": total,
            "successful_tasks": successful,
            "success_rate": successful / total,
            "cost_accuracy": cost_accuracy,
            "calibration_factor": calibration,
            "pending_self_reports": pending,
        }
    )


class ReputationTracker:
    """In-memory reputation store with an async API.

    Methods are `async` so a persistent implementation can share the interface; this one never
    awaits inside an update, so concurrent tasks on one event loop cannot interleave a
    read-modify-write. Bids are remembered per (agent, task) — self-report in the record's
    `pending_self_reports`, estimated cost in memory only — until that task's outcome arrives
    or `forget_bids` drops them (losing bidders never get an outcome).
    """

    def __init__(
        self, *, ema_weight: float = DEFAULT_EMA_WEIGHT, max_pending_per_agent: int = DEFAULT_MAX_PENDING
    ) -> None:
        if not 0.0 < ema_weight <= 1.0:
            raise ValueError(f"ema_weight must be in (0, 1], got {ema_weight!r}")
        if max_pending_per_agent < 1:
            raise ValueError("max_pending_per_agent must be at least 1")
        self._ema_weight = ema_weight
        self._max_pending = max_pending_per_agent
        self._records: dict[str, ReputationRecord] = {}
        self._estimated_costs: dict[str, dict[str, float]] = {}
        self._untagged_reports: dict[str, float] = {}
        self._total_tasks = 0

    @classmethod
    def from_records(
        cls,
        records: Iterable[ReputationRecord],
        total_tasks: int | None = None,
        *,
        ema_weight: float = DEFAULT_EMA_WEIGHT,
        max_pending_per_agent: int = DEFAULT_MAX_PENDING,
    ) -> ReputationTracker:
        """A tracker seeded with records loaded elsewhere (e.g. from a state store).

        `total_tasks` is the market-wide outcome count `N` for the UCB bonus; it defaults to the
        sum over the given records and must be at least that sum (it may be larger when only
        some agents' records were loaded).
        """
        tracker = cls(ema_weight=ema_weight, max_pending_per_agent=max_pending_per_agent)
        for record in records:
            if not record.agent_id:
                raise ValueError("every record must name its agent_id")
            if record.agent_id in tracker._records:
                raise ValueError(f"duplicate record for agent {record.agent_id!r}")
            tracker._records[record.agent_id] = record.model_copy(deep=True)
        known = sum(r.total_tasks for r in tracker._records.values())
        if total_tasks is not None and total_tasks < known:
            raise ValueError(f"total_tasks {total_tasks} is below the records' own total {known}")
        tracker._total_tasks = known if total_tasks is None else total_tasks
        return tracker

    @property
    def total_tasks(self) -> int:
        """`N`: outcomes across all agents known to this tracker."""
        return self._total_tasks

    def records(self) -> list[ReputationRecord]:
        """Copies of every record (for persistence), sorted by agent id."""
        return [self._snapshot(self._records[agent_id]) for agent_id in sorted(self._records)]

    async def get(self, agent_id: str) -> ReputationRecord:
        """The agent's record (a copy, `ucb_confidence` current); a fresh one for unknown agents."""
        return self._snapshot(self._records.get(agent_id) or ReputationRecord(agent_id=agent_id))

    async def update(
        self, outcome: TaskOutcome, *, counts_as_success: bool | None = None
    ) -> ReputationRecord:
        """Fold an outcome into its agent's record (see `apply_outcome`); returns the new record.

        Uses the bid remembered for this task (self-report and estimated cost) when there is one;
        otherwise the agent's latest untagged `record_self_report`, which is then consumed.
        """
        agent_id = outcome.agent_id
        record = self._records.get(agent_id) or ReputationRecord(agent_id=agent_id)
        estimated = self._estimated_costs.get(agent_id, {}).pop(outcome.task_id, None)
        self_reported = None
        if outcome.task_id not in record.pending_self_reports:
            self_reported = self._untagged_reports.pop(agent_id, None)
        updated = apply_outcome(
            record,
            outcome,
            estimated_cost_usd=estimated,
            self_reported=self_reported,
            ema_weight=self._ema_weight,
            counts_as_success=counts_as_success,
        )
        self._total_tasks += 1
        self._records[agent_id] = updated
        return self._snapshot(updated)

    async def calibration_factor(self, agent_id: str) -> float:
        record = self._records.get(agent_id)
        return 1.0 if record is None else record.calibration_factor

    async def ucb_bonus(self, agent_id: str) -> float:
        record = self._records.get(agent_id)
        return ucb_bonus(self._total_tasks, 0 if record is None else record.total_tasks)

    async def reputation_score(self, agent_id: str) -> float:
        """`success_rate`, or `NEUTRAL_REPUTATION` (0.5) for an agent with no outcomes yet."""
        record = self._records.get(agent_id)
        if record is None or record.total_tasks == 0:
            return NEUTRAL_REPUTATION
        return record.success_rate

    def record_self_report(self, agent_id: str, prob: float, task_id: str | None = None) -> None:
        """Remember a self-reported success probability so its outcome can calibrate the agent.

        With `task_id` it is kept until that task's outcome (or `forget_bids`); without, it is the
        agent's current claim, used by its next outcome that has no task-specific report.
        """
        _check_probability(prob, "prob")
        if task_id is None:
            self._untagged_reports[agent_id] = prob
            return
        record = self._records.get(agent_id)
        if record is None:
            record = self._records[agent_id] = ReputationRecord(agent_id=agent_id)
        self._remember(record.pending_self_reports, task_id, prob)

    def record_bid(self, bid: Bid) -> None:
        """Remember a bid's self-report and estimated cost until the task's outcome arrives.

        Fallback bids are skipped: their numbers come from the capability profile, not from the
        agent, so they say nothing about how well the agent estimates itself.
        """
        if bid.fallback:
            return
        self.record_self_report(bid.agent_id, bid.self_reported_success_prob, bid.task_id)
        self._remember(
            self._estimated_costs.setdefault(bid.agent_id, {}), bid.task_id, bid.estimated_cost_usd
        )

    def forget_bids(self, task_id: str, agent_ids: Iterable[str]) -> None:
        """Drop what `record_bid` remembered for `task_id` from these agents (e.g. losing bidders)."""
        for agent_id in agent_ids:
            record = self._records.get(agent_id)
            if record is not None:
                record.pending_self_reports.pop(task_id, None)
            self._estimated_costs.get(agent_id, {}).pop(task_id, None)

    def _remember(self, pending: dict[str, float], task_id: str, value: float) -> None:
        pending.pop(task_id, None)  # re-insert so a re-bid counts as the newest entry
        pending[task_id] = value
        while len(pending) > self._max_pending:
            del pending[next(iter(pending))]

    def _snapshot(self, record: ReputationRecord) -> ReputationRecord:
        return with_ucb_confidence(record.model_copy(deep=True), self._total_tasks)
