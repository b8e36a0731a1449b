"""Decision quality of market allocation: does Agora pick agents that actually succeed?

Pure core only (no Dapr), seeded. 20 agents have hidden true success probabilities p spread
evenly over 0.3-0.9; each inflates its self-report by a fixed per-agent amount in [0, 0.3]
(plus per-bid noise, clamped to [0, 1]) and has its own step price and step count, and its
actual costs deviate from its estimates by a per-agent bias. 5,000 tasks each go to a random
subset of at least 5 capable agents, with a budget that most bids fit. The outcome of the
chosen agent is drawn from its true probability, using the same uniform draw per (task, agent)
for every policy (common random numbers, so policies differ only by their choices).

Four scenarios cross two ways of setting the per-agent inflation with two levels of per-bid
noise; everything else (agents, prices, budgets, capable subsets, the noise's standard normal
draws, outcome draws) is the same random stream:

* "independent" inflation ~ U(0, 0.3), independent of skill, so the biggest claim usually
  comes from a genuinely good agent.
* "overclaiming" (moral hazard, what the calibration discount exists for): inflation is
  anti-correlated with skill, 0.3 * (0.9 - p) / 0.6 plus a per-agent U(-0.05, 0.05) term
  (derived from the same uniform draw), clamped to [0, 0.3]: the weakest agents claim about
  0.6, the best about 0.9, so claims are compressed.
* "steady" reports: per-bid noise sd 0.02, an agent's claim barely moves between tasks.
* "noisy" reports: per-bid noise sd 0.15, the claim varies from task to task as a model's
  stated confidence does; a single claim then says less about the agent than its record.

Policies: Agora (the production `allocate` pipeline: `BidScorer` over a `ReputationTracker`
that records bids and learns from every outcome) as the allocator service runs it (UCB1 bonus
weighted by `MARKET_EXPLORATION`) and with the plain, unweighted UCB1 bonus (`AGORA_EXPLORATION_WEIGHT`
1.0); random, round-robin, highest self-report, and an oracle that knows the true
probabilities. Every policy respects the hard budget cap.

Reported per policy: realized success rate overall and over the last 4,000 tasks (after a
1,000-task warm-up), mean actual cost per task, rejected tasks (Agora only: no eligible bid,
counted as failures), and cumulative expected regret against the oracle:
sum over tasks of p_best - p_chosen (p_chosen = 0 for a rejected task).

Tasks use the default `min_success_threshold` 0.5 and a budget of 1.0-1.5x the typical cost of
the 85th-percentile agent. The production formulas are used unchanged. Two settings the
formulas leave open were chosen with this benchmark: the calibration EMA weight
(`DEFAULT_EMA_WEIGHT`) and the service's exploration weight (`MARKET_EXPLORATION`). The "variants"
rows (first scenario only) show the other values tried, and a diagnostic that swaps in the
true calibration factors to show where the gap to the oracle comes from; it is an
explanation, not a policy Agora runs.

A last study ("improving agent") makes the population change: at task 2,500 the weakest agent
becomes the best (true p 0.95), its claims following. It reports, per exploration weight, how
much of that agent's possible work Agora gives it from then on, and the success that follows.
"""

from __future__ import annotations

import asyncio
import json
import math
import platform
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from agora.core.acceptance import VerdictStatus
from agora.core.allocation import allocate
from agora.core.market import AllocationStatus, Bid, TaskOutcome, TaskSpec
from agora.core.models import CapabilityProfile
from agora.core.reputation import DEFAULT_EMA_WEIGHT, ReputationTracker, calibrated_success, claim_alone
from agora.core.scoring import MARKET_EXPLORATION, REFERENCE_EXPLORATION, BidScorer, Calibration

SEED = 20261122
NUM_AGENTS = 20
NUM_TASKS = 5_000
WARM_UP = 1_000
MIN_CAPABLE = 5
SKILL = "work"
OTHER_SEEDS = (1, 2)
MAX_INFLATION = 0.3
OVERCLAIM_NOISE = 0.05
STEADY_REPORT_SD = 0.02
NOISY_REPORT_SD = 0.15
IMPROVED_AT = 2_500
IMPROVED_P = 0.95
IMPROVED_WINDOW = 1_500
RESULTS = Path(__file__).parent / "results" / "market_simulation.json"

Inflation = Literal["independent", "overclaiming"]
INFLATIONS: dict[Inflation, str] = {
    "independent": "per-agent inflation ~ U(0, 0.3), independent of true skill p",
    "overclaiming": "per-agent inflation 0.3*(0.9-p)/0.6 + U(-0.05, 0.05), clamped to [0, 0.3]",
}


@dataclass(frozen=True)
class Scenario:
    key: str
    inflation: Inflation
    report_noise_sd: float
    silent: bool = False
    """Every claim 0: an estimator that rates every candidate 0 % (a small local model did)."""

    @property
    def title(self) -> str:
        if self.silent:
            return "silent estimator: every claim 0 % whatever the agent"
        reports = "steady" if self.report_noise_sd <= STEADY_REPORT_SD else "noisy"
        return f"{self.inflation} inflation, {reports} reports (per-bid sd {self.report_noise_sd:g})"


SCENARIOS: dict[str, Scenario] = {
    s.key: s
    for s in (
        Scenario("independent", "independent", STEADY_REPORT_SD),
        Scenario("overclaiming", "overclaiming", STEADY_REPORT_SD),
        Scenario("independent-noisy", "independent", NOISY_REPORT_SD),
        Scenario("overclaiming-noisy", "overclaiming", NOISY_REPORT_SD),
        Scenario("silent", "independent", STEADY_REPORT_SD, silent=True),
    )
}
REFERENCE_UCB1 = "agora_reference_ucb1"
CLAIM_ALONE = "agora_claim_alone"
"""Agora with the reference formula's calibration, the corrected claim alone (`claim_alone`),
measured beside the market's `calibrated_success` in the same run."""


@dataclass(frozen=True)
class Agent:
    profile: CapabilityProfile
    true_p: float
    inflation: float
    steps: int
    cost_bias: float
    """Actual cost / estimated cost, on average, for this agent."""


@dataclass(frozen=True)
class Task:
    spec: TaskSpec
    capable: tuple[int, ...]
    bids: dict[int, Bid]
    draws: tuple[float, ...]
    """One uniform draw per agent: agent i succeeds iff draws[i] < true_p[i]."""
    actual_costs: tuple[float, ...]
    true_p: tuple[float, ...]
    """Each agent's true success probability when this task runs."""

    def affordable(self) -> list[int]:
        budget = self.spec.budget_usd
        return [i for i in self.capable if budget is None or self.bids[i].estimated_cost_usd <= budget]


def inflation(kind: Inflation, true_p: float, draw: float) -> float:
    """The agent's fixed self-report inflation; `draw` ~ U(0, 0.3) is the same in every scenario."""
    if kind == "independent":
        return draw
    noise = (draw / MAX_INFLATION - 0.5) * 2 * OVERCLAIM_NOISE  # U(-0.05, 0.05)
    return min(MAX_INFLATION, max(0.0, MAX_INFLATION * (0.9 - true_p) / 0.6 + noise))


def make_agents(rng: random.Random, kind: Inflation = "independent", count: int = NUM_AGENTS) -> list[Agent]:
    true_ps = [0.3 + 0.6 * i / (count - 1) for i in range(count)]
    rng.shuffle(true_ps)
    agents = []
    for i, true_p in enumerate(true_ps):
        steps = rng.randint(5, 30)
        profile = CapabilityProfile(
            agent_id=f"agent-{i:02d}",
            agent_name=f"Agent {i}",
            skill_tags=[SKILL],
            cost_per_step_usd=round(rng.uniform(0.001, 0.01), 5),
            max_steps=steps + 10,
        )
        draw = rng.uniform(0.0, MAX_INFLATION)
        agents.append(
            Agent(profile, true_p, inflation(kind, true_p, draw), steps, cost_bias=rng.uniform(0.8, 1.5))
        )
    return agents


def make_tasks(
    agents: Sequence[Agent],
    rng: random.Random,
    count: int = NUM_TASKS,
    report_noise_sd: float = STEADY_REPORT_SD,
    first: int = 0,
    shared_error: float = 0.0,
    silent: bool = False,
) -> list[Task]:
    """`count` tasks numbered from `first`, with bids and outcomes drawn from `agents` as they are.
    `shared_error` is the share of a claim's noise variance common to every bid of a task (one
    rating call that errs for all its candidates alike); the common draw comes from a stream of
    its own, so every other draw is the same whatever the share."""
    n = len(agents)
    typical = sorted(a.profile.cost_per_step_usd * a.steps for a in agents)
    budget_base = typical[int(0.85 * len(typical))]  # the 85th-percentile agent's typical cost
    tasks = []
    for t in range(first, first + count):
        capable = tuple(sorted(rng.sample(range(n), rng.randint(min(MIN_CAPABLE, n), n))))
        spec = TaskSpec(
            task_id=f"task-{t:05d}",
            description="simulated task",
            required_skills=[SKILL],
            budget_usd=round(budget_base * rng.uniform(1.0, 1.5), 6),
        )
        bids = {}
        common = random.Random(f"shared-error-{t}").gauss(0.0, 1.0)
        for i in capable:
            agent = agents[i]
            own = rng.gauss(0.0, 1.0)
            noise = math.sqrt(1.0 - shared_error) * own + math.sqrt(shared_error) * common
            report = agent.true_p + agent.inflation + report_noise_sd * noise
            bids[i] = Bid(
                bid_id=f"{spec.task_id}-{i:02d}",
                task_id=spec.task_id,
                agent_id=agent.profile.agent_id,
                self_reported_success_prob=0.0 if silent else min(1.0, max(0.0, report)),
                estimated_cost_usd=agent.profile.cost_per_step_usd
                * agent.steps
                * rng.lognormvariate(0.0, 0.1),
                estimated_steps=agent.steps,
            )
        draws = tuple(rng.random() for _ in agents)
        actual = tuple(
            (bids[i].estimated_cost_usd if i in bids else 0.0)
            * agents[i].cost_bias
            * rng.lognormvariate(0.0, 0.1)
            for i in range(n)
        )
        tasks.append(Task(spec, capable, bids, draws, actual, tuple(a.true_p for a in agents)))
    return tasks


Chooser = Callable[[Task], int | None]


class SimPorts:
    """`AllocationPorts` over a pre-generated task: every capable agent answers at once."""

    def __init__(self, agents: Sequence[Agent]) -> None:
        self.agents = agents
        self.task: Task | None = None
        self._index = {a.profile.agent_id: i for i, a in enumerate(agents)}

    async def capable_agents(self, spec: TaskSpec) -> tuple[list[CapabilityProfile], list[str]]:
        assert self.task is not None
        capable = set(self.task.capable)
        return (
            [self.agents[i].profile for i in self.task.capable],
            [a.profile.agent_id for i, a in enumerate(self.agents) if i not in capable],
        )

    async def solicit_bid(self, profile: CapabilityProfile, spec: TaskSpec) -> Bid:
        assert self.task is not None
        return self.task.bids[self._index[profile.agent_id]]


@dataclass
class Tally:
    policy: str
    successes: list[bool] = field(default_factory=list)
    chosen_p: list[float] = field(default_factory=list)
    best_p: list[float] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    choices: list[int | None] = field(default_factory=list)
    rejected: int = 0

    def summary(self, warm_up: int = WARM_UP) -> dict[str, Any]:
        """Totals, and the same over the tasks after the first `warm_up` ("late")."""
        late = slice(warm_up, None)
        n_late = len(self.successes[late])
        return {
            "policy": self.policy,
            "success_rate": round(sum(self.successes) / len(self.successes), 4),
            "success_rate_late": round(sum(self.successes[late]) / n_late, 4),
            "expected_success": round(sum(self.chosen_p) / len(self.chosen_p), 4),
            "expected_success_late": round(sum(self.chosen_p[late]) / n_late, 4),
            "mean_cost_usd": round(sum(self.costs) / len(self.costs), 5),
            "regret": round(sum(b - c for b, c in zip(self.best_p, self.chosen_p, strict=True)), 1),
            "regret_late": round(
                sum(b - c for b, c in zip(self.best_p[late], self.chosen_p[late], strict=True)), 1
            ),
            "rejected": self.rejected,
        }


def settle(tally: Tally, task: Task, choice: int | None) -> bool:
    """Record the outcome of giving `task` to agent `choice` (None = rejected); True on success."""
    affordable = task.affordable()
    tally.best_p.append(max((task.true_p[i] for i in affordable), default=0.0))
    tally.choices.append(choice)
    if choice is None:
        tally.rejected += 1
        tally.successes.append(False)
        tally.chosen_p.append(0.0)
        tally.costs.append(0.0)
        return False
    success = task.draws[choice] < task.true_p[choice]
    tally.successes.append(success)
    tally.chosen_p.append(task.true_p[choice])
    tally.costs.append(task.actual_costs[choice])
    return success


def run_simple(name: str, agents: Sequence[Agent], tasks: Sequence[Task], choose: Chooser) -> Tally:
    tally = Tally(name)
    for task in tasks:
        settle(tally, task, choose(task))
    return tally


class KnownCalibration:
    """A `ReputationSource` over the real tracker that knows every agent's true calibration
    factor, to explain the gap to the oracle. Never used by Agora; reported as a diagnostic."""

    def __init__(self, tracker: ReputationTracker, agents: Sequence[Agent]):
        self.tracker = tracker
        self.agents = {a.profile.agent_id: a for a in agents}

    async def reputation_score(self, agent_id: str) -> float:
        return await self.tracker.reputation_score(agent_id)

    async def track_record(self, agent_id: str) -> tuple[float, float]:
        return await self.tracker.track_record(agent_id)

    async def calibration_factor(self, agent_id: str) -> float:
        agent = self.agents[agent_id]
        return agent.true_p / min(1.0, agent.true_p + agent.inflation)

    async def ucb_bonus(self, agent_id: str) -> float:
        return await self.tracker.ucb_bonus(agent_id)

    def record_bid(self, bid: Bid) -> None:
        self.tracker.record_bid(bid)

    def forget_bids(self, task_id: str, agent_ids: Sequence[str]) -> None:
        self.tracker.forget_bids(task_id, agent_ids)


async def run_agora(
    agents: Sequence[Agent],
    tasks: Sequence[Task],
    *,
    name: str = "agora",
    ema_weight: float = DEFAULT_EMA_WEIGHT,
    exploration_weight: float = MARKET_EXPLORATION,
    known_calibration: bool = False,
    calibration: Calibration = calibrated_success,
    overclaimers: frozenset[int] = frozenset(),
    checked: bool = False,
) -> Tally:
    """The production pipeline over `tasks`. The agents in `overclaimers` report every run a
    success whatever happened; with `checked`, the market checks each outcome (the verdict is
    the truth) and learns from the verdict, otherwise from the agent's word."""
    tracker = ReputationTracker(ema_weight=ema_weight)
    source = KnownCalibration(tracker, agents) if known_calibration else tracker
    scorer = BidScorer(source, exploration_weight=exploration_weight, calibration=calibration)
    ports = SimPorts(agents)
    index = {a.profile.agent_id: i for i, a in enumerate(agents)}
    tally = Tally(name)
    for task in tasks:
        ports.task = task
        result = await allocate(task.spec, ports, scorer)
        if result.status is not AllocationStatus.ALLOCATED or result.winning_agent_id is None:
            settle(tally, task, None)
            continue
        choice = index[result.winning_agent_id]
        success = settle(tally, task, choice)
        claim = True if choice in overclaimers else success
        outcome = TaskOutcome(
            task_id=task.spec.task_id,
            agent_id=result.winning_agent_id,
            actual_success=claim,
            actual_cost_usd=task.actual_costs[choice],
            actual_steps=agents[choice].steps,
        )
        if checked:
            verdict = VerdictStatus.PASSED if success else VerdictStatus.FAILED
            await tracker.update(outcome, counts_as_success=success, verdict=verdict)
        else:
            await tracker.update(outcome)
    return tally


def naive_policies(agents: Sequence[Agent], rng: random.Random) -> dict[str, Chooser]:
    n = len(agents)
    cursor = [0]

    def random_choice(task: Task) -> int | None:
        options = task.affordable()
        return rng.choice(options) if options else None

    def round_robin(task: Task) -> int | None:
        options = set(task.affordable())
        for step in range(n):
            candidate = (cursor[0] + step) % n
            if candidate in options:
                cursor[0] = candidate + 1
                return candidate
        return None

    def highest_self_report(task: Task) -> int | None:
        options = task.affordable()
        return max(options, key=lambda i: task.bids[i].self_reported_success_prob, default=None)

    def oracle(task: Task) -> int | None:
        return max(task.affordable(), key=lambda i: task.true_p[i], default=None)

    return {
        "oracle": oracle,
        "random": random_choice,
        "round_robin": round_robin,
        "highest_self_report": highest_self_report,
    }


def build(
    scenario: str = "independent",
    seed: int = SEED,
    agents: int = NUM_AGENTS,
    tasks: int = NUM_TASKS,
    shared_error: float = 0.0,
) -> tuple[list[Agent], list[Task], random.Random]:
    """Agents, tasks and the policies' rng; the scenarios consume the same random stream."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; expected one of {sorted(SCENARIOS)}")
    setting = SCENARIOS[scenario]
    rng = random.Random(seed)
    population = make_agents(rng, setting.inflation, agents)
    task_list = make_tasks(
        population, rng, tasks, setting.report_noise_sd, shared_error=shared_error, silent=setting.silent
    )
    return population, task_list, rng


def with_ratio(rows: list[dict[str, Any]], oracle: dict[str, Any]) -> list[dict[str, Any]]:
    for row in rows:
        row["vs_oracle_late"] = round(row["success_rate_late"] / oracle["success_rate_late"], 3)
    return rows


def simulate(
    scenario: str = "independent",
    *,
    agents: int = NUM_AGENTS,
    tasks: int = NUM_TASKS,
    seed: int = SEED,
    warm_up: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Every policy on one scenario, keyed by policy name (Agora's two settings first); each row
    carries its late success relative to the oracle's. `warm_up` defaults to a fifth of the tasks."""
    warm = tasks // 5 if warm_up is None else warm_up
    if not 0 <= warm < tasks:
        raise ValueError(f"warm_up must be in [0, tasks), got {warm}")
    population, task_list, rng = build(scenario, seed, agents, tasks)
    tallies = [
        asyncio.run(run_agora(population, task_list)),
        asyncio.run(
            run_agora(population, task_list, name=REFERENCE_UCB1, exploration_weight=REFERENCE_EXPLORATION)
        ),
        asyncio.run(run_agora(population, task_list, name=CLAIM_ALONE, calibration=claim_alone)),
    ]
    tallies += [
        run_simple(name, population, task_list, f) for name, f in naive_policies(population, rng).items()
    ]
    rows = [t.summary(warm) for t in tallies]
    oracle = next(r for r in rows if r["policy"] == "oracle")
    return {row["policy"]: row for row in with_ratio(rows, oracle)}


JOINT_SHARED_ERROR = 0.5
"""The share of a claim's noise variance a joint rating is assumed to share across a task's
candidates (one call that errs for all alike); separate calls share none."""


def joint_ratings(seed: int = SEED) -> dict[str, list[dict[str, Any]]]:
    """The market's estimates made in one call per task rather than one per candidate: the
    claims' noise keeps its variance, but half of it is common to a task's candidates. Agora on
    each noisy scenario, with separate and with shared errors, against the oracle."""
    found = {}
    for key in ("independent-noisy", "overclaiming-noisy"):
        rows = []
        for label, shared in (("separate calls", 0.0), ("one joint call", JOINT_SHARED_ERROR)):
            agents, tasks, _ = build(key, seed, shared_error=shared)
            oracle = run_simple("oracle", agents, tasks, naive_policies(agents, random.Random(0))["oracle"])
            row = asyncio.run(run_agora(agents, tasks, name=f"agora, {label}")).summary()
            rows += with_ratio([row], oracle.summary())
        found[key] = rows
    return found


def variants(seed: int = SEED) -> list[dict[str, Any]]:
    """Agora with other EMA and exploration weights, and a diagnostic with the true calibration
    factors (not a production policy), on the first scenario."""
    agents, tasks, _ = build("independent", seed)
    oracle = run_simple("oracle", agents, tasks, naive_policies(agents, random.Random(0))["oracle"]).summary()
    runs = [
        *(
            run_agora(agents, tasks, name=f"agora ema_weight={w:g}", ema_weight=w)
            for w in (0.2, 0.1, 0.02, 0.01)
        ),
        *(
            run_agora(agents, tasks, name=f"agora exploration_weight={w:g}", exploration_weight=w)
            for w in (0.5, 0.25, 0.05, 0.0)
        ),
        run_agora(agents, tasks, name="diagnostic: true calibration factors", known_calibration=True),
    ]
    return with_ratio([asyncio.run(run).summary() for run in runs], oracle)


def improving_agent(
    seed: int = SEED,
    *,
    agents: int = NUM_AGENTS,
    tasks: int = NUM_TASKS,
    change_at: int = IMPROVED_AT,
    window: int = IMPROVED_WINDOW,
) -> dict[str, Any]:
    """The weakest agent becomes the best (true p 0.3 -> 0.95) at task `change_at`, and its claims
    follow its new skill (independent inflation, steady reports). For Agora at each exploration
    weight, and for the oracle: the share of the tasks the agent could take after the change
    that it won, and success over the last `window` tasks."""
    rng = random.Random(seed)
    before = make_agents(rng, "independent", agents)
    weakest = min(range(len(before)), key=lambda i: before[i].true_p)
    after = list(before)
    after[weakest] = replace(before[weakest], true_p=IMPROVED_P)
    task_list = make_tasks(before, rng, change_at) + make_tasks(
        after, rng, tasks - change_at, first=change_at
    )
    offered = [k for k in range(change_at, tasks) if weakest in task_list[k].affordable()]

    def row(tally: Tally, **key: Any) -> dict[str, Any]:
        won = sum(1 for k in offered if tally.choices[k] == weakest)
        late = tally.successes[-window:]
        return {
            **key,
            "share_won_after_change": round(won / len(offered), 3),
            "success_late": round(sum(late) / len(late), 4),
        }

    rows = [
        row(
            asyncio.run(run_agora(before, task_list, exploration_weight=w)),
            exploration_weight=w,
            calibration="calibrated_success",
        )
        for w in (REFERENCE_EXPLORATION, MARKET_EXPLORATION, 0.0)
    ]
    alone = run_agora(before, task_list, exploration_weight=MARKET_EXPLORATION, calibration=claim_alone)
    rows.append(row(asyncio.run(alone), exploration_weight=MARKET_EXPLORATION, calibration="claim_alone"))
    oracle = run_simple("oracle", before, task_list, naive_policies(before, rng)["oracle"])
    return {"seed": seed, "oracle": row(oracle), "agora": rows}


OVERCLAIMING_SHARE = 3
"""One agent in this many reports every run a success, whatever it did."""


def overclaiming_agents(seed: int, count: int = NUM_AGENTS) -> frozenset[int]:
    """The agents that claim success whatever they did: a third, drawn from a stream of their own
    (the same agents in every scenario of a seed)."""
    return frozenset(random.Random(f"overclaimers-{seed}").sample(range(count), count // OVERCLAIMING_SHARE))


def checked_outcomes(seed: int = SEED) -> list[dict[str, Any]]:
    """A third of the agents claim success whatever they did. Per scenario, Agora learning from
    the agents' word (today's outcomes) and from checked outcomes (the verdict is the truth),
    and the oracle, on the same agents and tasks; late success relative to the oracle."""
    liars = overclaiming_agents(seed)
    rows = []
    for key in SCENARIOS:
        agents, tasks, rng = build(key, seed)
        oracle = run_simple("oracle", agents, tasks, naive_policies(agents, rng)["oracle"]).summary()
        runs = {
            "word": run_agora(agents, tasks, overclaimers=liars),
            "checked": run_agora(agents, tasks, overclaimers=liars, checked=True),
            "honest_word": run_agora(agents, tasks),
        }
        found = {label: with_ratio([asyncio.run(run).summary()], oracle)[0] for label, run in runs.items()}
        rows.append(
            {
                "scenario": key,
                "seed": seed,
                "overclaimers": sorted(agents[i].profile.agent_id for i in liars),
                "oracle_late": oracle["success_rate_late"],
                **{f"{label}_vs_oracle": row["vs_oracle_late"] for label, row in found.items()},
                **{f"{label}_late": row["success_rate_late"] for label, row in found.items()},
            }
        )
    return rows


def seed_ranges(runs: Sequence[Sequence[dict[str, Any]]]) -> dict[str, tuple[float, float]]:
    """Per policy, the lowest and highest late success relative to the oracle across runs."""
    ratios: dict[str, list[float]] = {}
    for rows in runs:
        for row in rows:
            ratios.setdefault(row["policy"], []).append(row["vs_oracle_late"])
    return {policy: (min(values), max(values)) for policy, values in ratios.items()}


def affordable_share(seed: int = SEED) -> float:
    _, tasks, _ = build("independent", seed)
    return sum(len(t.affordable()) for t in tasks) / sum(len(t.capable) for t in tasks)


def print_rows(rows: Sequence[dict[str, Any]]) -> None:
    header = (
        "policy",
        "success",
        f"last {NUM_TASKS - WARM_UP}",
        "vs oracle",
        "mean cost $",
        "regret",
        "rejected",
    )
    print("{:<38} {:>7} {:>9} {:>9} {:>11} {:>7} {:>8}".format(*header))
    for r in rows:
        print(
            f"{r['policy']:<38} {r['success_rate']:>7.3f} {r['success_rate_late']:>9.3f} "
            f"{r['vs_oracle_late']:>9.3f} {r['mean_cost_usd']:>11.4f} "
            f"{r['regret']:>7.1f} {r['rejected']:>8}"
        )


def main() -> None:
    start = time.perf_counter()
    scenarios: dict[str, dict[str, Any]] = {}
    for key, setting in SCENARIOS.items():
        rows = list(simulate(key, seed=SEED).values())
        other_seeds = {str(seed): list(simulate(key, seed=seed).values()) for seed in OTHER_SEEDS}
        scenarios[key] = {
            "title": setting.title,
            "inflation": INFLATIONS[setting.inflation],
            "report_noise_sd": setting.report_noise_sd,
            "results": rows,
        }
        if key == "independent":
            scenarios[key]["variants"] = variants(SEED)
        scenarios[key]["other_seeds"] = other_seeds
        scenarios[key]["vs_oracle_range_over_seeds"] = seed_ranges([rows, *other_seeds.values()])
    improving = [improving_agent(seed) for seed in (SEED, *OTHER_SEEDS)]
    joint = {str(seed): joint_ratings(seed) for seed in (SEED, *OTHER_SEEDS)}
    checked = [row for seed in (SEED, *OTHER_SEEDS) for row in checked_outcomes(seed)]
    elapsed = time.perf_counter() - start
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "market allocation decision quality",
                "machine": f"{platform.machine()} Python {platform.python_version()}",
                "elapsed_s": round(elapsed, 1),
                "parameters": {
                    "seed": SEED,
                    "other_seeds": list(OTHER_SEEDS),
                    "agents": NUM_AGENTS,
                    "tasks": NUM_TASKS,
                    "warm_up": WARM_UP,
                    "late_window": NUM_TASKS - WARM_UP,
                    "min_capable": MIN_CAPABLE,
                    "true_p_range": [0.3, 0.9],
                    "max_inflation": MAX_INFLATION,
                    "per_bid_report_noise_sd": {"steady": STEADY_REPORT_SD, "noisy": NOISY_REPORT_SD},
                    "exploration_weight": MARKET_EXPLORATION,
                    "overclaim_noise": OVERCLAIM_NOISE,
                    "min_success_threshold": TaskSpec.model_fields["min_success_threshold"].default,
                    "ema_weight": DEFAULT_EMA_WEIGHT,
                    "affordable_bid_share": round(affordable_share(SEED), 3),
                },
                "scenarios": scenarios,
                "improving_agent": improving,
                "joint_ratings": {"shared_error": JOINT_SHARED_ERROR, "by_seed": joint},
                "checked_outcomes": {
                    "overclaiming_share": f"1 in {OVERCLAIMING_SHARE}",
                    "rows": checked,
                },
            },
            indent=2,
        )
        + "\n"
    )
    print(
        f"market allocation, {NUM_AGENTS} agents, {NUM_TASKS} tasks, seed {SEED}, "
        f"ema_weight {DEFAULT_EMA_WEIGHT:g}, exploration_weight {MARKET_EXPLORATION:g}"
    )
    for name, result in scenarios.items():
        print(f"\n== {result['title']}: {result['inflation']}")
        print_rows(result["results"])
        if "variants" in result:
            print("\nvariants on this scenario (vs its oracle; diagnostics are not production policies)")
            print_rows(result["variants"])
        print(f"\nother seeds ({name}), success over the last {NUM_TASKS - WARM_UP} tasks vs the oracle:")
        for seed, seed_rows in result["other_seeds"].items():
            print(
                f"  seed {seed}: " + ", ".join(f"{r['policy']} {r['vs_oracle_late']:.3f}" for r in seed_rows)
            )
        print(
            "  range over the three seeds: "
            + ", ".join(
                f"{p} {lo:.3f}-{hi:.3f}" for p, (lo, hi) in result["vs_oracle_range_over_seeds"].items()
            )
        )
    print(
        f"\nimproving agent (weakest agent's p 0.3 -> {IMPROVED_P} at task {IMPROVED_AT:,}): share of its "
        f"tasks won after the change / success over the last {IMPROVED_WINDOW:,} tasks"
    )
    for study in improving:
        print(
            f"  seed {study['seed']}: oracle {study['oracle']['share_won_after_change']:.2f} / "
            f"{study['oracle']['success_late']:.3f}; "
            + ", ".join(
                f"weight {r['exploration_weight']:g} ({r['calibration']}): "
                f"{r['share_won_after_change']:.2f} / {r['success_late']:.3f}"
                for r in study["agora"]
            )
        )
    print(
        f"\nthe market's estimates in one call per task ({JOINT_SHARED_ERROR:g} of the claims' noise "
        "variance shared by a task's candidates) against one call per candidate, noisy reports:"
    )
    for seed, by_scenario in joint.items():
        for key, rows in by_scenario.items():
            print(f"  seed {seed}, {key}: " + ", ".join(
                f"{r['policy']} {r['success_rate_late']:.4f} ({r['vs_oracle_late']:.3f} of the oracle)"
                for r in rows
            ))  # fmt: skip
    print(
        f"\na third of the agents claim success whatever they did (1 in {OVERCLAIMING_SHARE}): late success "
        "vs the oracle, learning from the agents' word / from checked outcomes / (no overclaimers)"
    )
    for r in checked:
        print(
            f"  seed {r['seed']}, {r['scenario']:<20} {r['word_vs_oracle']:.3f} / "
            f"{r['checked_vs_oracle']:.3f} / ({r['honest_word_vs_oracle']:.3f})"
        )
    print(f"\n({elapsed:.1f}s) written to {RESULTS}")


if __name__ == "__main__":
    main()
