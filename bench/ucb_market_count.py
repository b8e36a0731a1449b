"""The UCB1 bonus as the reference gives it against the allocator's, on the market simulation.

The reference adds the plain UCB1 bonus `sqrt(2 ln max(2, N) / max(1, n_i))` to the composite,
with `N` the outcomes across every agent of the market. The allocator service weights the bonus
by `MARKET_EXPLORATION` (0.1) and, since it rebuilds a tracker from the candidates' records for
each task, counts `N` over the candidates only. This runs the four combinations of the two
choices on `bench.market_simulation`'s scenarios and seeds (the same agents, tasks, bids and
outcome draws as that benchmark) and reports each one's success over the last 4,000 tasks
against the oracle's, and the share of the improving agent's tasks it wins after it improves.

    python -m bench.ucb_market_count        # writes bench/results/ucb_market_count.json

Pure core, seeded, about a minute per scenario on one core.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from agora.core.allocation import allocate
from agora.core.market import AllocationStatus, Bid, TaskOutcome
from agora.core.reputation import ReputationTracker, ucb_bonus
from agora.core.scoring import MARKET_EXPLORATION, REFERENCE_EXPLORATION, BidScorer
from bench.market_simulation import (
    IMPROVED_AT,
    IMPROVED_P,
    NUM_TASKS,
    OTHER_SEEDS,
    SCENARIOS,
    SEED,
    WARM_UP,
    Agent,
    SimPorts,
    Tally,
    Task,
    build,
    make_agents,
    make_tasks,
    naive_policies,
    run_simple,
    settle,
)

RESULTS = Path(__file__).parent / "results" / "ucb_market_count.json"

VARIANTS: dict[str, tuple[float, bool]] = {
    "allocator (weight 0.1, N over the candidates)": (MARKET_EXPLORATION, False),
    "weight 0.1, the market's N": (MARKET_EXPLORATION, True),
    "reference (weight 1, the market's N)": (REFERENCE_EXPLORATION, True),
    "weight 1, N over the candidates": (REFERENCE_EXPLORATION, False),
}
"""Name → (exploration weight, whether `N` counts the whole market's outcomes)."""


class CandidatesCount:
    """A `ReputationSource` whose UCB bonus counts `N` over the current task's candidates, as the
    allocator service does (`ReputationTracker.from_records` of the candidates' records)."""

    def __init__(self, tracker: ReputationTracker) -> None:
        self.tracker = tracker
        self.candidates: list[str] = []
        self.outcomes: dict[str, int] = {}
        """Outcomes per agent, as its record counts them."""

    async def reputation_score(self, agent_id: str) -> float:
        return await self.tracker.reputation_score(agent_id)

    async def track_record(self, agent_id: str) -> tuple[float, float]:
        return await self.tracker.track_record(agent_id)

    async def calibration_factor(self, agent_id: str) -> float:
        return await self.tracker.calibration_factor(agent_id)

    async def ucb_bonus(self, agent_id: str) -> float:
        counts = self.outcomes
        return ucb_bonus(sum(counts.get(a, 0) for a in self.candidates), counts.get(agent_id, 0))

    def record_bid(self, bid: Bid) -> None:
        self.tracker.record_bid(bid)

    def forget_bids(self, task_id: str, agent_ids: Sequence[str]) -> None:
        self.tracker.forget_bids(task_id, agent_ids)


async def run_variant(agents: Sequence[Agent], tasks: Sequence[Task], name: str) -> Tally:
    weight, market_count = VARIANTS[name]
    tracker = ReputationTracker()
    candidates = CandidatesCount(tracker)
    scorer = BidScorer(tracker if market_count else candidates, exploration_weight=weight)
    ports = SimPorts(agents)
    index = {a.profile.agent_id: i for i, a in enumerate(agents)}
    tally = Tally(name)
    for task in tasks:
        ports.task = task
        candidates.candidates = [agents[i].profile.agent_id for i in task.capable]
        result = await allocate(task.spec, ports, scorer)
        if result.status is not AllocationStatus.ALLOCATED or result.winning_agent_id is None:
            settle(tally, task, None)
            continue
        choice = index[result.winning_agent_id]
        success = settle(tally, task, choice)
        candidates.outcomes[result.winning_agent_id] = candidates.outcomes.get(result.winning_agent_id, 0) + 1
        await tracker.update(
            TaskOutcome(
                task_id=task.spec.task_id,
                agent_id=result.winning_agent_id,
                actual_success=success,
                actual_cost_usd=task.actual_costs[choice],
                actual_steps=agents[choice].steps,
            )
        )
    return tally


def scenario_rows(scenario: str, seed: int) -> dict[str, float]:
    """Each variant's late success relative to the oracle's, on one scenario and seed."""
    agents, tasks, rng = build(scenario, seed)
    oracle = run_simple("oracle", agents, tasks, naive_policies(agents, rng)["oracle"]).summary(WARM_UP)
    late = {name: asyncio.run(run_variant(agents, tasks, name)).summary(WARM_UP) for name in VARIANTS}
    return {
        name: round(row["success_rate_late"] / oracle["success_rate_late"], 3) for name, row in late.items()
    }


def improving_share(seed: int) -> dict[str, float]:
    """Per variant, the share of the improving agent's possible tasks it wins after it improves
    (the same study as `bench.market_simulation.improving_agent`)."""
    rng = random.Random(seed)
    before = make_agents(rng, "independent")
    weakest = min(range(len(before)), key=lambda i: before[i].true_p)
    after = list(before)
    after[weakest] = replace(before[weakest], true_p=IMPROVED_P)
    tasks = make_tasks(before, rng, IMPROVED_AT) + make_tasks(
        after, rng, NUM_TASKS - IMPROVED_AT, first=IMPROVED_AT
    )
    offered = [k for k in range(IMPROVED_AT, NUM_TASKS) if weakest in tasks[k].affordable()]
    shares = {}
    for name in VARIANTS:
        tally = asyncio.run(run_variant(before, tasks, name))
        shares[name] = round(sum(1 for k in offered if tally.choices[k] == weakest) / len(offered), 3)
    return shares


def main() -> None:
    start = time.perf_counter()
    seeds = (SEED, *OTHER_SEEDS)
    scenarios = {key: {str(seed): scenario_rows(key, seed) for seed in seeds} for key in SCENARIOS}
    improving = {str(seed): improving_share(seed) for seed in seeds}
    ranges = {
        name: (
            min(run[name] for by_seed in scenarios.values() for run in by_seed.values()),
            max(run[name] for by_seed in scenarios.values() for run in by_seed.values()),
        )
        for name in VARIANTS
    }
    elapsed = round(time.perf_counter() - start, 1)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "UCB1 bonus: weight and market count",
                "elapsed_s": elapsed,
                "late_success_vs_oracle": scenarios,
                "range_over_scenarios_and_seeds": ranges,
                "improving_agent_share_won": improving,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"late success vs the oracle, {len(SCENARIOS)} scenarios x {len(seeds)} seeds")
    for key, by_seed in scenarios.items():
        for seed, row in by_seed.items():
            print(f"  {key:<20} seed {seed:>8}: " + ", ".join(f"{n}: {v:.3f}" for n, v in row.items()))
    print("range: " + "; ".join(f"{n}: {lo:.3f}-{hi:.3f}" for n, (lo, hi) in ranges.items()))
    print("improving agent, share of its tasks won after it improved:")
    for seed, row in improving.items():
        print(f"  seed {seed:>8}: " + ", ".join(f"{n}: {v:.2f}" for n, v in row.items()))
    print(f"({elapsed}s) written to {RESULTS}")


if __name__ == "__main__":
    main()
