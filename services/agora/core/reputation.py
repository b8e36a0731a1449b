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

from pydantic import BaseModel, ConfigDict, Field

from agora.core.acceptance import VerdictStatus
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

CLAIM_WEIGHT = 4.0
"""What a bid's claim (its self-report times the agent's calibration factor) is worth in the
calibrated success, counted in outcomes: a claim is one piece of evidence beside the agent's
record and the prior, not the whole of it (`calibrated_success`)."""

PRIOR_WEIGHT = 2.0
"""What the neutral prior (`NEUTRAL_REPUTATION`) is worth in the calibrated success, counted in
outcomes: with no record, a claim of 0 or 1 is pulled a third of the way to 0.5."""

RECORD_MEMORY = 20
"""The most outcomes of the agent's record counted in the calibrated success (about the memory of
the calibration EMA, `1 / DEFAULT_EMA_WEIGHT`): a long record weighs no more than that, so the
claim, which follows the agent's latest outcomes through its factor, keeps its say."""

OVERCLAIM_WEIGHT = 2.0
"""What a success claim its check contradicted counts as, in failures: more than an honest
failure (1), since catching claims that outrun the work is what calibration is for. Its
calibration step is as many EMA steps of 0."""

DEFAULT_UNCHECKED_WEIGHT = 1.0
"""What an outcome without a verdict (the task had no check, or its check could not run) counts
as, in outcomes: the agent's own word. 1.0 keeps a market of unchecked tasks learning as it did;
0 counts only checked outcomes (`AGORA_UNCHECKED_OUTCOME_WEIGHT` on the reputation service)."""

DEFAULT_MAX_PENDING = 1024
"""Per-agent cap on remembered bids awaiting an outcome; the oldest are dropped beyond it, so
bids whose outcome never arrives cannot grow memory without bound."""


def ucb_bonus(total_tasks_all_agents: int, agent_tasks: int) -> float:
    """UCB1 exploration bonus `sqrt(2*ln(max(2, N)) / max(1, n_i))`.

    `N` is the number of outcomes across all agents, `n_i` this agent's. The `max` guards keep
    it defined and strictly positive for a new agent (n_i = 0) and an empty market (N < 2).
    """
    return math.sqrt(2.0 * math.log(max(2, total_tasks_all_agents)) / max(1, agent_tasks))


def calibrated_success(
    claim: float, factor: float, successes: float, total: float, *, claim_informative: bool = True
) -> float:
    """The probability that the agent succeeds at this task, from three pieces of evidence, each
    counted in outcomes:

        corrected  = clamp(claim * factor, 0, 1)        the claim, discounted as its record says
        counted    = min(total, RECORD_MEMORY)
        calibrated = (CLAIM_WEIGHT * corrected + counted * success_rate + PRIOR_WEIGHT * 0.5)
                     / (CLAIM_WEIGHT + counted + PRIOR_WEIGHT)

    With no record it is the claim pulled toward 0.5; outcomes then lift or lower any claim, a
    claim of 0 too (a product alone would keep it 0 whatever the agent delivered). A claim that
    tells nothing (`claim_informative=False`: the estimator gave every candidate of the task the
    same number) counts for nothing: the record and the prior decide.
    """
    _check_probability(claim, "claim")
    if total < 0 or not 0 <= successes <= total:
        raise ValueError(f"successes {successes!r} of total {total!r} is not a record")
    corrected = min(1.0, max(0.0, claim * factor))
    counted = min(total, RECORD_MEMORY)
    rate = successes / total if total else NEUTRAL_REPUTATION
    weight = CLAIM_WEIGHT if claim_informative else 0.0
    evidence = weight * corrected + counted * rate + PRIOR_WEIGHT * NEUTRAL_REPUTATION
    return min(1.0, max(0.0, evidence / (weight + counted + PRIOR_WEIGHT)))


def claim_alone(
    claim: float, factor: float, successes: float, total: float, *, claim_informative: bool = True
) -> float:
    """The reference formula, `clamp(claim * factor, 0, 1)`: the claim alone, whatever the
    record and whether or not it tells anything. Kept to measure `calibrated_success` against
    (bench/market_simulation.py); the market uses `calibrated_success`."""
    _check_probability(claim, "claim")
    return min(1.0, max(0.0, claim * factor))


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


def outcome_weight(
    claimed_success: bool, verdict: VerdictStatus | None, unchecked_weight: float, confidence: float = 1.0
) -> float:
    """What one outcome counts as in the agent's record: 1 when a check passed or failed it,
    `OVERCLAIM_WEIGHT` when the check failed a success the agent claimed, `unchecked_weight`
    without a verdict (no check, or one that could not run: the agent's word alone). A judge's
    verdict is an opinion: it counts `confidence` times as much as a check's."""
    if verdict is VerdictStatus.FAILED and claimed_success:
        return OVERCLAIM_WEIGHT * confidence
    if verdict in (VerdictStatus.PASSED, VerdictStatus.FAILED):
        return confidence
    return unchecked_weight


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
    verdict: VerdictStatus | None = None,
    unchecked_weight: float = DEFAULT_UNCHECKED_WEIGHT,
    confidence: float = 1.0,
) -> ReputationRecord:
    """Return a new record with one outcome folded in; `record` is left unchanged.

    * Counts: `total_tasks += 1`; `successful_tasks += 1` when the outcome counts as a success
      (`counts_as_success`, defaulting to `outcome.actual_success`; pass it explicitly for
      partial outcomes, see `outcome_counts_as_success`, and for checked ones: the verdict's).
    * Evidence: the outcome counts with its weight `w_o` (`outcome_weight`: 1 checked, 2 for a
      success claim its check contradicted, `unchecked_weight` for the agent's word alone):
      `evidence += w_o`, `evidence_of_success += w_o` on a success, and
      `success_rate = evidence_of_success / evidence` (0 while there is no evidence).
    * Cost accuracy: `cost_accuracy ← (1-w)*cost_accuracy + w*(actual_cost / estimated_cost)`;
      skipped without an estimate or when the estimate is 0 (the ratio is undefined).
    * Calibration: with `s` = 1 for success else 0 and `r` = the self-report for this task,
      `calibration_factor ← clamp((1-w)*factor + w*s / max(r, 0.05), 0.05, 5.0)`.
      The sample's mean is `p_true / r`, so the factor converges to the ratio between the agent's
      true success rate and its claims: an agent that always reports 0.9 and succeeds 45% of the
      time converges to 0.5 and `clamp(0.9 * 0.5) = 0.45` is its true rate. Starting at 1.0
      (trust the claim) with a constant weight acts as a prior worth about `1/w` outcomes.
      The step's weight is `min(1, w * w_o)`. Skipped when there is no self-report for the
      task, or the outcome weighs nothing.
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
    if not 0.0 <= unchecked_weight <= 1.0:
        raise ValueError(f"unchecked_weight must be in [0, 1], got {unchecked_weight!r}")
    success = outcome.actual_success if counts_as_success is None else counts_as_success
    weight = outcome_weight(outcome.actual_success, verdict, unchecked_weight, confidence)

    total = record.total_tasks + 1
    successful = record.successful_tasks + (1 if success else 0)
    evidence = record.evidence + weight
    evidence_of_success = record.evidence_of_success + (weight if success else 0.0)
    cost_accuracy = record.cost_accuracy
    if estimated_cost_usd:  # None or 0.0: no usable estimate
        cost_accuracy = _ema(cost_accuracy, outcome.actual_cost_usd / estimated_cost_usd, ema_weight)
    calibration = record.calibration_factor
    if report is not None and weight > 0.0:
        sample = (1.0 if success else 0.0) / max(report, MIN_REPORT_FOR_CALIBRATION)
        step = min(1.0, ema_weight * weight)
        calibration = min(CALIBRATION_MAX, max(CALIBRATION_MIN, _ema(calibration, sample, step)))
    overclaimed = weight == OVERCLAIM_WEIGHT and verdict is VerdictStatus.FAILED
    return record.model_copy(
        update={
            "agent_id": record.agent_id or outcome.agent_id,
            "total_tasks": total,
            "successful_tasks": successful,
            "evidence": evidence,
            "evidence_of_success": evidence_of_success,
            "success_rate": evidence_of_success / evidence if evidence > 0.0 else 0.0,
            "overclaims": record.overclaims + overclaimed,
            "cost_accuracy": cost_accuracy,
            "calibration_factor": calibration,
            "pending_self_reports": pending,
        }
    )


class CountedOutcome(BaseModel):
    """How one task's outcome was counted in its agent's record: enough to correct it later
    (`correct_outcome`), once per revision."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    success: bool
    weight: float = Field(ge=0.0)
    overclaimed: bool = False
    revision: int = Field(default=0, ge=0)
    """0 for the outcome as recorded; 1 once a dispute revised its verdict."""


def counted_outcome(
    outcome: TaskOutcome,
    counts_as_success: bool,
    verdict: VerdictStatus | None,
    unchecked_weight: float = DEFAULT_UNCHECKED_WEIGHT,
    revision: int = 0,
    confidence: float = 1.0,
) -> CountedOutcome:
    weight = outcome_weight(outcome.actual_success, verdict, unchecked_weight, confidence)
    overclaimed = verdict is VerdictStatus.FAILED and outcome.actual_success
    return CountedOutcome(
        success=counts_as_success, weight=weight, overclaimed=overclaimed, revision=revision
    )


def correct_outcome(
    record: ReputationRecord,
    before: CountedOutcome,
    after: CountedOutcome,
    *,
    self_reported: float | None,
    ema_weight: float = DEFAULT_EMA_WEIGHT,
) -> ReputationRecord:
    """`record` with one counted outcome replaced by its revision (a dispute's verdict): the
    counts and the evidence exactly as if it had been counted so from the start; the calibration
    factor takes the revised outcome as one further step (an EMA cannot be unwound past the
    outcomes that came after it), weighted as the revision weighs."""
    evidence = max(0.0, record.evidence - before.weight + after.weight)
    of_success = record.evidence_of_success - before.weight * before.success + after.weight * after.success
    of_success = min(evidence, max(0.0, of_success))
    successful = min(record.total_tasks, max(0, record.successful_tasks - before.success + after.success))
    calibration = record.calibration_factor
    if self_reported is not None and after.weight > 0.0:
        sample = (1.0 if after.success else 0.0) / max(self_reported, MIN_REPORT_FOR_CALIBRATION)
        step = min(1.0, ema_weight * after.weight)
        calibration = min(CALIBRATION_MAX, max(CALIBRATION_MIN, _ema(calibration, sample, step)))
    return record.model_copy(
        update={
            "successful_tasks": successful,
            "evidence": evidence,
            "evidence_of_success": of_success,
            "success_rate": of_success / evidence if evidence > 0.0 else 0.0,
            "overclaims": max(0, record.overclaims - before.overclaimed + after.overclaimed),
            "calibration_factor": calibration,
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
        self,
        *,
        ema_weight: float = DEFAULT_EMA_WEIGHT,
        max_pending_per_agent: int = DEFAULT_MAX_PENDING,
        unchecked_weight: float = DEFAULT_UNCHECKED_WEIGHT,
    ) -> None:
        if not 0.0 < ema_weight <= 1.0:
            raise ValueError(f"ema_weight must be in (0, 1], got {ema_weight!r}")
        if not 0.0 <= unchecked_weight <= 1.0:
            raise ValueError(f"unchecked_weight must be in [0, 1], got {unchecked_weight!r}")
        self._unchecked_weight = unchecked_weight
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
        self,
        outcome: TaskOutcome,
        *,
        counts_as_success: bool | None = None,
        verdict: VerdictStatus | None = None,
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
            verdict=verdict,
            unchecked_weight=self._unchecked_weight,
        )
        self._total_tasks += 1
        self._records[agent_id] = updated
        return self._snapshot(updated)

    async def calibration_factor(self, agent_id: str) -> float:
        record = self._records.get(agent_id)
        return 1.0 if record is None else record.calibration_factor

    async def track_record(self, agent_id: str) -> tuple[float, float]:
        """(successful, total) outcomes of the agent, as evidence (each with its weight); (0, 0)
        for an unknown one."""
        record = self._records.get(agent_id)
        return (0.0, 0.0) if record is None else (record.evidence_of_success, record.evidence)

    async def ucb_bonus(self, agent_id: str) -> float:
        record = self._records.get(agent_id)
        return ucb_bonus(self._total_tasks, 0 if record is None else record.total_tasks)

    async def reputation_score(self, agent_id: str) -> float:
        """`success_rate`, or `NEUTRAL_REPUTATION` (0.5) for an agent with no outcomes yet."""
        record = self._records.get(agent_id)
        if record is None or record.evidence == 0.0:
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
