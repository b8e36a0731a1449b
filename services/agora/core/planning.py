"""Long-horizon planning, the pure part: a plan is a DAG of subgoals run in waves.

A task estimated at more steps than `PlanningConfig.complexity_threshold` gets a plan: a list
of `SubGoal`s whose `dependencies` form a DAG. `validate_plan` refuses what cannot run (a
duplicate or malformed id, an unknown dependency, a cycle, more than `max_subgoals`) with one
`InvalidPlan` naming every problem, so the planner model can be asked to fix them all at
once. `execution_waves` sorts the DAG into waves: every subgoal sits in the first wave after
all its dependencies, so the subgoals of one wave are independent and may run concurrently.

Each run of a subgoal is verified against its `success_criterion` (`apply_verification`):
PASS completes it; PARTIAL sends it back for another attempt while it has retries left
(`max_retries` counts the retries after the first attempt), then fails it; FAIL fails it.
A failed subgoal's dependents cannot run (`skip_blocked`: they are SKIPPED, transitively). A
replan keeps every completed subgoal as it is and bumps `version` (`merge_replan`); running
continues from the first wave that still has work (`next_wave`). `plan_result` assembles the
outcome: `success` only when every subgoal completed.

Choices made:

* statuses are upper-case strings (`"COMPLETED"`), like every other status in Agora;
* a subgoal id is a snake_case slug: a lower-case letter, then lower-case letters, digits and
  underscores, at most 20 characters;
* a subgoal depending on itself is a cycle;
* a replan may not change a completed subgoal: one proposed under a completed id is replaced by
  the completed one, and a completed subgoal the proposal left out is kept;
* SKIPPED subgoals count among `failed_subgoals` of the result (they could not be completed);
* the planner's model calls go to the tiers `PlanningConfig` names (`model_tier`): verification
  to `verifier_model_tier`, the others to `planner_model_tier`; `executor_model_tier` picks no
  model, since subgoals run on the market's agents, each on its own model.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agora.core.errors import AgoraError
from agora.core.limits import MAX_ITEMS, MAX_NOTE_CHARS, MAX_SKILL_TAG_CHARS, Text
from agora.core.models import ModelTier

SUBGOAL_ID_CHARS = 20
SUBGOAL_ID_PATTERN = r"^[a-z][a-z0-9_]*$"
MAX_PLAN_SUBGOALS = 50
"""The most subgoals any plan may hold, whatever `max_subgoals` says (the bound on a plan's size
as a message); `PlanningConfig.max_subgoals` caps it lower."""

SubGoalId = Annotated[str, Field(min_length=1, max_length=SUBGOAL_ID_CHARS, pattern=SUBGOAL_ID_PATTERN)]
Summary = Annotated[str, Field(max_length=MAX_NOTE_CHARS)]


class SubGoalStatus(StrEnum):
    PENDING = "PENDING"
    """Not yet started."""
    RUNNING = "RUNNING"
    """Currently executing."""
    COMPLETED = "COMPLETED"
    """Success criterion met."""
    FAILED = "FAILED"
    """Could not be completed after all retries."""
    SKIPPED = "SKIPPED"
    """Skipped (e.g. a dependency failed)."""


DONE = frozenset({SubGoalStatus.COMPLETED, SubGoalStatus.FAILED, SubGoalStatus.SKIPPED})


class VerificationResult(StrEnum):
    PASS = "PASS"
    """Criterion clearly met."""
    PARTIAL = "PARTIAL"
    """Progress made; criterion not fully met (retry)."""
    FAIL = "FAIL"
    """Criterion not met; retry unlikely to help."""


class PlanningConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_subgoals: int = Field(
        default=12, ge=1, le=MAX_PLAN_SUBGOALS, description="Hard cap on subgoals per plan."
    )
    max_replans: int = Field(default=3, ge=0, description="Maximum replan cycles before the plan fails.")
    complexity_threshold: int = Field(
        default=4, ge=0, description="Skip planning when estimated steps ≤ this."
    )
    enable_lookahead: bool = Field(
        default=True, description="FLARE-style path simulation before each subgoal."
    )
    lookahead_paths: int = Field(
        default=2, ge=1, le=8, description="Candidate paths generated per lookahead call."
    )
    enable_parallel_subgoals: bool = Field(default=True, description="Run independent subgoals concurrently.")
    cost_budget_usd: float | None = Field(
        default=None, ge=0.0, allow_inf_nan=False, description="Hard cost cap across all planning calls."
    )
    planner_model_tier: ModelTier = Field(
        default=ModelTier.POWERFUL, description="Model tier for plan generation."
    )
    executor_model_tier: ModelTier = Field(
        default=ModelTier.BALANCED, description="Model tier for subgoal execution."
    )
    verifier_model_tier: ModelTier = Field(
        default=ModelTier.FAST, description="Model tier for postcondition verification."
    )


class PlanningCall(StrEnum):
    """The planner's own model calls (subgoals themselves run on the market's agents)."""

    ESTIMATE = "estimate"
    """How many steps the task needs: plan it or not."""
    PLAN = "plan"
    """The plan's first draft."""
    REPLAN = "replan"
    """The next plan version after a subgoal failed."""
    LOOKAHEAD = "lookahead"
    """Ways to carry out a subgoal, simulated before each attempt."""
    VERIFY = "verify"
    """Whether an attempt's result meets the subgoal's success criterion."""
    SYNTHESIZE = "synthesize"
    """The final answer from the completed subgoals."""


def model_tier(config: PlanningConfig, call: PlanningCall) -> ModelTier:
    """The model tier a planning call goes to: verification to `verifier_model_tier`, every other
    planning call (estimate, plan, replan, lookahead, synthesis) to `planner_model_tier`.
    `executor_model_tier` picks no model here: a subgoal is a market task, run by whichever agent
    wins it, on that agent's own model."""
    return config.verifier_model_tier if call is PlanningCall.VERIFY else config.planner_model_tier


class SubGoal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: SubGoalId = Field(description="Short snake_case slug, ≤ 20 chars.")
    description: Text = Field(min_length=1, description="What this step should accomplish.")
    success_criterion: Text = Field(min_length=1, description="Verifiable completion condition.")
    dependencies: list[SubGoalId] = Field(
        default_factory=list,
        max_length=MAX_PLAN_SUBGOALS,
        description="IDs of subgoals that must complete first.",
    )
    tool_hints: list[Annotated[str, Field(max_length=MAX_SKILL_TAG_CHARS)]] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Suggested tool names (advisory)."
    )
    fallback_strategy: Text = Field(default="", description="Alternative approach if primary fails.")
    max_retries: int = Field(default=2, ge=0, le=10, description="PARTIAL retries before declaring FAIL.")
    status: SubGoalStatus = Field(default=SubGoalStatus.PENDING, description="Current execution status.")
    output_summary: Summary = Field(default="", description="1-2 sentence summary filled after completion.")
    attempts: int = Field(default=0, ge=0, description="Total execution attempts so far.")
    failure_reason: Summary = Field(default="", description="Last failure reason (filled on FAIL).")


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: Text = Field(min_length=1, description="Original user task.")
    subgoals: list[SubGoal] = Field(
        max_length=MAX_PLAN_SUBGOALS, description="Ordered list; the DAG is implied by dependencies."
    )
    total_estimated_steps: int = Field(ge=0, description="The planner's estimate of total tool calls.")
    created_at: datetime = Field(
        default_factory=lambda: datetime.now(UTC), description="When the plan was made."
    )
    version: int = Field(default=1, ge=1, description="Increments on each replan (starts at 1).")

    def subgoal(self, subgoal_id: str) -> SubGoal:
        for subgoal in self.subgoals:
            if subgoal.id == subgoal_id:
                return subgoal
        raise KeyError(subgoal_id)


class TokenUsage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class PlanResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: Text
    plan: Plan = Field(description="Final plan version executed.")
    final_output: Text = Field(description="Synthesized answer from all completed subgoals.")
    completed_subgoals: list[SubGoalId] = Field(
        max_length=MAX_PLAN_SUBGOALS, description="IDs of successfully completed subgoals."
    )
    failed_subgoals: list[SubGoalId] = Field(
        max_length=MAX_PLAN_SUBGOALS, description="IDs of subgoals that could not be completed."
    )
    replans_triggered: int = Field(ge=0, description="Number of replan cycles that occurred.")
    total_token_usage: TokenUsage | None = Field(default=None, description="Accumulated token usage.")
    duration_seconds: float = Field(ge=0.0, description="Wall-clock duration.")
    success: bool = Field(description="True when all subgoals completed.")


class PlanNotMade(AgoraError):
    """The model did not produce a valid plan within the attempts allowed."""

    code = "PLAN_NOT_MADE"
    http_status = 502


class InvalidPlan(AgoraError):
    """A plan that cannot run; `problems` names each reason (all of them, so a planner model can
    be asked to fix them in one go)."""

    code = "INVALID_PLAN"
    http_status = 422

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("invalid plan: " + "; ".join(problems))
        self.problems = list(problems)

    @classmethod
    def from_message(cls, message: str, details: Mapping[str, JsonValue] | None = None) -> InvalidPlan:
        return cls(message.removeprefix("invalid plan: ").split("; "))


def needs_plan(estimated_steps: int, config: PlanningConfig) -> bool:
    """Whether a task estimated at `estimated_steps` is planned (more than the threshold) rather
    than handed to one agent as it is."""
    return estimated_steps > config.complexity_threshold


def validate_plan(plan: Plan, config: PlanningConfig) -> None:
    """Raise `InvalidPlan` naming every reason `plan` cannot run. Linear in the plan's size."""
    problems: list[str] = []
    if not plan.subgoals:
        problems.append("the plan has no subgoals")
    if len(plan.subgoals) > config.max_subgoals:
        problems.append(f"{len(plan.subgoals)} subgoals, more than the limit of {config.max_subgoals}")
    seen: set[str] = set()
    for subgoal in plan.subgoals:
        if subgoal.id in seen:
            problems.append(f"subgoal id {subgoal.id!r} is used twice")
        seen.add(subgoal.id)
    for subgoal in plan.subgoals:
        for dependency in subgoal.dependencies:
            if dependency not in seen:
                problems.append(f"subgoal {subgoal.id!r} depends on unknown subgoal {dependency!r}")
    cycle = _find_cycle(plan.subgoals, seen)
    if cycle:
        problems.append("dependency cycle: " + " -> ".join(cycle))
    if problems:
        raise InvalidPlan(problems)


def _find_cycle(subgoals: Sequence[SubGoal], known: set[str]) -> list[str]:
    """One dependency cycle as a path (first id repeated at the end), or [] (iterative DFS)."""
    depends_on: dict[str, list[str]] = {}
    for subgoal in subgoals:  # a duplicated id's dependencies are all kept
        depends_on.setdefault(subgoal.id, []).extend(d for d in subgoal.dependencies if d in known)
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for root in depends_on:
        if root in state:
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            node, next_edge = stack.pop()
            if next_edge == 0:
                state[node] = 1
                path.append(node)
            edges = depends_on[node]
            if next_edge < len(edges):
                stack.append((node, next_edge + 1))
                child = edges[next_edge]
                if state.get(child) == 1:
                    return [*path[path.index(child) :], child]
                if child not in state:
                    stack.append((child, 0))
            else:
                state[node] = 2
                path.pop()
    return []


def execution_waves(plan: Plan) -> list[list[str]]:
    """The subgoal ids in waves: each subgoal in the first wave after all its dependencies
    (its longest dependency chain), in plan order within a wave. The plan must be valid."""
    wave_of: dict[str, int] = {}
    remaining = {s.id: len(set(s.dependencies)) for s in plan.subgoals}
    dependents: dict[str, list[str]] = {s.id: [] for s in plan.subgoals}
    for subgoal in plan.subgoals:
        for dependency in set(subgoal.dependencies):
            dependents[dependency].append(subgoal.id)
    ready = [s.id for s in plan.subgoals if remaining[s.id] == 0]
    for subgoal_id in ready:
        wave_of[subgoal_id] = 0
    while ready:
        following: list[str] = []
        for subgoal_id in ready:
            for dependent in dependents[subgoal_id]:
                wave_of[dependent] = max(wave_of.get(dependent, 0), wave_of[subgoal_id] + 1)
                remaining[dependent] -= 1
                if remaining[dependent] == 0:
                    following.append(dependent)
        ready = following
    if len(wave_of) != len(plan.subgoals):
        raise InvalidPlan(["dependency cycle"])
    waves: list[list[str]] = [[] for _ in range(max(wave_of.values(), default=-1) + 1)]
    for subgoal in plan.subgoals:
        waves[wave_of[subgoal.id]].append(subgoal.id)
    return waves


def next_wave(plan: Plan, waived: Collection[str] = ()) -> list[str]:
    """The subgoals to start now: the runnable ones (PENDING, every dependency completed or
    `waived`) of the first wave that has any, so a wave's subgoals start together and a later
    wave's only once no earlier wave has one left to start. Empty when nothing can start (the
    plan is done, waits for running subgoals, or is blocked)."""
    by_id = {s.id: s for s in plan.subgoals}
    for wave in execution_waves(plan):
        runnable = [
            subgoal_id
            for subgoal_id in wave
            if by_id[subgoal_id].status is SubGoalStatus.PENDING
            and all(
                by_id[d].status is SubGoalStatus.COMPLETED or d in waived
                for d in by_id[subgoal_id].dependencies
            )
        ]
        if runnable:
            return runnable
    return []


def skip_blocked(plan: Plan, waived: Collection[str] = ()) -> Plan:
    """SKIP every PENDING subgoal that can no longer run because a dependency FAILED or was
    SKIPPED (transitively), naming the dependency in its failure reason. A `waived` subgoal (one
    a person decided to skip: the plan goes on without it) blocks nothing."""
    by_id = {s.id: s for s in plan.subgoals}
    changed = False
    for wave in execution_waves(plan):
        for subgoal_id in wave:
            subgoal = by_id[subgoal_id]
            if subgoal.status is not SubGoalStatus.PENDING:
                continue
            blocked = [
                d
                for d in subgoal.dependencies
                if by_id[d].status in (SubGoalStatus.FAILED, SubGoalStatus.SKIPPED) and d not in waived
            ]
            if blocked:
                word = "failed" if by_id[blocked[0]].status is SubGoalStatus.FAILED else "was skipped"
                by_id[subgoal_id] = subgoal.model_copy(
                    update={
                        "status": SubGoalStatus.SKIPPED,
                        "failure_reason": f"dependency {blocked[0]} {word}",
                    }
                )
                changed = True
    if not changed:
        return plan
    return plan.model_copy(update={"subgoals": [by_id[s.id] for s in plan.subgoals]})


def apply_verification(
    subgoal: SubGoal, verdict: VerificationResult, *, output_summary: str = "", reason: str = ""
) -> SubGoal:
    """The subgoal after one attempt was verified: PASS → COMPLETED; PARTIAL → PENDING again while
    retries remain (`attempts - 1 < max_retries`), else FAILED; FAIL → FAILED. Counts the attempt."""
    attempts = subgoal.attempts + 1
    summary = output_summary[:MAX_NOTE_CHARS]
    if verdict is VerificationResult.PASS:
        return subgoal.model_copy(
            update={
                "status": SubGoalStatus.COMPLETED,
                "attempts": attempts,
                "output_summary": summary,
                "failure_reason": "",
            }
        )
    if verdict is VerificationResult.PARTIAL and attempts - 1 < subgoal.max_retries:
        return subgoal.model_copy(
            update={"status": SubGoalStatus.PENDING, "attempts": attempts, "output_summary": summary}
        )
    why = reason or (
        "criterion not met" if verdict is VerificationResult.FAIL else "still partial after every retry"
    )
    return subgoal.model_copy(
        update={
            "status": SubGoalStatus.FAILED,
            "attempts": attempts,
            "output_summary": summary,
            "failure_reason": why[:MAX_NOTE_CHARS],
        }
    )


def merge_replan(current: Plan, proposed: Plan, config: PlanningConfig) -> Plan:
    """The next plan version: the proposal's subgoals, with every completed subgoal of `current`
    kept exactly as it is (in the proposal's place for its id, else first), `version` + 1. The
    merged plan is validated; what is not completed starts afresh (PENDING, no attempts)."""
    completed = {s.id: s for s in current.subgoals if s.status is SubGoalStatus.COMPLETED}
    proposed_ids = {s.id for s in proposed.subgoals}
    kept_first = [s for s in current.subgoals if s.id in completed and s.id not in proposed_ids]
    merged = [*kept_first]
    for subgoal in proposed.subgoals:
        if subgoal.id in completed:
            merged.append(completed[subgoal.id])
        else:
            merged.append(
                subgoal.model_copy(
                    update={
                        "status": SubGoalStatus.PENDING,
                        "attempts": 0,
                        "output_summary": "",
                        "failure_reason": "",
                    }
                )
            )
    plan = Plan(
        task=current.task,
        subgoals=merged,
        total_estimated_steps=proposed.total_estimated_steps,
        version=current.version + 1,
    )
    validate_plan(plan, config)
    return plan


def plan_result(
    plan: Plan,
    *,
    final_output: str,
    replans_triggered: int,
    duration_seconds: float,
    usage: Iterable[TokenUsage] = (),
) -> PlanResult:
    """The outcome of a plan as it ended: `success` only when every subgoal completed."""
    completed = [s.id for s in plan.subgoals if s.status is SubGoalStatus.COMPLETED]
    failed = [s.id for s in plan.subgoals if s.status in (SubGoalStatus.FAILED, SubGoalStatus.SKIPPED)]
    spent = list(usage)
    total = sum(spent, TokenUsage()) if spent else None
    return PlanResult(
        task=plan.task,
        plan=plan,
        final_output=final_output,
        completed_subgoals=completed,
        failed_subgoals=failed,
        replans_triggered=replans_triggered,
        total_token_usage=total,
        duration_seconds=duration_seconds,
        success=bool(plan.subgoals) and len(completed) == len(plan.subgoals),
    )
