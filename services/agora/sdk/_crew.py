"""Crews: several agents, each with its own runner, working on one task together.

- SEQUENTIAL: the members run one after another; each is given the task and every earlier
  member's output (the outputs accumulate).
- PARALLEL: every member runs at once on the same task.
- HIERARCHICAL: the member whose role is `supervisor` reads the task and the workers (the other
  members) and delegates a piece to each worker it names; the named workers run at once; the
  supervisor then writes the answer from their outputs.

A member whose run raises, fails or pauses for a person stops the crew with
`CrewMemberFailed` (`CREW_MEMBER_FAILED`), naming the member and why; members still running in
parallel are cancelled. Each member's run is its own session (`<session_id>.<agent name>`), so
their states never mix.

A `MarketCrew` can also put a task on the market instead (`use_market=True`): the task is posted
to the task board, the market allocates it among the capable agents (the crew's members, served
as agents of an agent app, bid for it with everyone else's), the winner's runner runs it, and its
outcome reaches the board and the winner's reputation; `run_task_with_market` waits for it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, Field, ValidationError

from agora.core import topics
from agora.core.errors import AgoraError, CrewMemberFailed, InvalidArgument, MarketAllocationFailed, NotFound
from agora.core.limits import MAX_TEXT_CHARS
from agora.core.market import TERMINAL_STATUSES, AllocationStatus, TaskSpec
from agora.core.task_lifecycle import TaskRecord
from agora.runtime.clients import TaskBoardClient
from agora.runtime.pubsub import Publisher
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprSidecar
from agora.sdk._agent import Agent
from agora.sdk._runner import AgentDefinition, AgentRunner, ExecutionResult, RunStatus

__all__ = [
    "MAX_CREW_MEMBERS",
    "SUPERVISOR_ROLE",
    "Crew",
    "CrewMember",
    "CrewPattern",
    "CrewResult",
    "DaprMarket",
    "MarketCrew",
    "MarketCrewResult",
    "MarketPort",
]

MAX_CREW_MEMBERS = 32
"""The most members one crew has (each one a run, and in a parallel crew, a run at once)."""
SUPERVISOR_ROLE = "supervisor"


class CrewPattern(StrEnum):
    SEQUENTIAL = "SEQUENTIAL"
    PARALLEL = "PARALLEL"
    HIERARCHICAL = "HIERARCHICAL"


@dataclass(frozen=True)
class CrewMember:
    """An agent of the crew: its definition, the runner that runs it, and its role (a label;
    `supervisor` makes it the one that delegates in a hierarchical crew)."""

    agent_def: AgentDefinition
    runner: AgentRunner
    role: str = "member"

    @classmethod
    def of(cls, agent: Agent, role: str = "member") -> CrewMember:
        """A crew member of an `Agent` (one with a model: a handler's agent works on the market only)."""
        if agent.runner is None:
            raise ValueError(f"agent {agent.agent_id} works through its handler: it cannot be a crew member")
        return cls(agent.definition, agent.runner, role)

    @property
    def name(self) -> str:
        return self.agent_def.name


class CrewResult(BaseModel):
    """What a crew's run produced: each member's output by agent name (a hierarchical crew's
    supervisor: the final answer), the members' runs in the order they finished, and the total
    cost and time."""

    outputs: dict[str, str]
    total_cost_usd: float
    duration_seconds: float
    pattern: CrewPattern
    runs: list[ExecutionResult] = Field(default_factory=list)

    @property
    def final_output(self) -> str:
        """The crew's answer: the last member's (sequential), the supervisor's (hierarchical),
        every member's under its name (parallel)."""
        if self.pattern is CrewPattern.PARALLEL:
            return "\n\n".join(f"{name}: {output}" for name, output in self.outputs.items())
        return self.runs[-1].output if self.runs else ""


class Delegation(BaseModel):
    """One piece of a hierarchical crew's task, given to a worker by the supervisor."""

    worker: str = Field(min_length=1, max_length=200)
    task: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)


class DelegationPlan(BaseModel):
    """The supervisor's answer when it delegates: `{"delegations": [{"worker", "task"}, ...]}`."""

    delegations: list[Delegation] = Field(min_length=1, max_length=MAX_CREW_MEMBERS)


class Crew:
    def __init__(
        self, members: Sequence[CrewMember], *, session_id: str, pattern: CrewPattern = CrewPattern.SEQUENTIAL
    ) -> None:
        if not members:
            raise ValueError("a crew needs at least one member")
        if len(members) > MAX_CREW_MEMBERS:
            raise ValueError(f"a crew has at most {MAX_CREW_MEMBERS} members, not {len(members)}")
        names = [m.name for m in members]
        if len(set(names)) != len(names):
            raise ValueError(f"crew members need distinct agent names: {names}")
        if pattern is CrewPattern.HIERARCHICAL:
            supervisors = [m for m in members if m.role == SUPERVISOR_ROLE]
            if len(supervisors) != 1 or len(members) < 2:
                raise ValueError(
                    "a hierarchical crew needs exactly one member with role 'supervisor' and a worker"
                )
        self.members = list(members)
        self.session_id = session_id
        self.pattern = pattern

    async def run(self, initial_input: str) -> CrewResult:
        """Run the crew on `initial_input` (at most `MAX_TEXT_CHARS`) in its pattern. Raises
        `CrewMemberFailed` when a member's run raises, fails or pauses for a person."""
        if len(initial_input) > MAX_TEXT_CHARS:
            raise InvalidArgument(
                f"a crew's task has at most {MAX_TEXT_CHARS} characters, not {len(initial_input)}"
            )
        started = time.monotonic()
        if self.pattern is CrewPattern.SEQUENTIAL:
            runs = await self._sequential(initial_input)
        elif self.pattern is CrewPattern.PARALLEL:
            runs = await self._together([(m, initial_input) for m in self.members])
        else:
            runs = await self._hierarchical(initial_input)
        outputs = {run.agent_id: run.output for run in runs}
        return CrewResult(
            outputs=outputs,
            total_cost_usd=sum(run.total_cost_usd for run in runs),
            duration_seconds=time.monotonic() - started,
            pattern=self.pattern,
            runs=runs,
        )

    async def _sequential(self, task: str) -> list[ExecutionResult]:
        runs: list[ExecutionResult] = []
        for member in self.members:
            runs.append(await self._run(member, _with_work_so_far(task, runs)))
        return runs

    async def _hierarchical(self, task: str) -> list[ExecutionResult]:
        supervisor = next(m for m in self.members if m.role == SUPERVISOR_ROLE)
        workers = {m.name: m for m in self.members if m is not supervisor}
        planned = await self._run(supervisor, _delegation_prompt(task, workers.values()))
        pieces = _delegations(planned.output, task, workers)
        done = await self._together([(workers[d.worker], d.task) for d in pieces])
        answer = await self._run(supervisor, _synthesis_prompt(task, done), suffix="synthesis")
        return [*done, answer]

    async def _together(self, work: Sequence[tuple[CrewMember, str]]) -> list[ExecutionResult]:
        """Run every (member, input) at once; the first failure cancels the rest and is raised."""
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self._run(member, text)) for member, text in work]
        except ExceptionGroup as failures:
            raise failures.exceptions[0] from None  # each a member's CrewMemberFailed
        return [task.result() for task in tasks]

    async def _run(self, member: CrewMember, text: str, suffix: str = "") -> ExecutionResult:
        session = f"{self.session_id}.{member.name}" + (f".{suffix}" if suffix else "")
        try:
            result = await member.runner.run(member.agent_def, text, session_id=session)
        except AgoraError as exc:
            raise _failed(member, f"{exc.code}: {exc.message}") from exc
        except Exception as exc:
            raise _failed(member, f"{type(exc).__name__}: {exc}") from exc
        if result.status is RunStatus.WAITING_FOR_HUMAN:
            raise _failed(member, f"its run waits for a person (escalation {result.escalation_id})")
        if result.status is not RunStatus.COMPLETED:
            raise _failed(member, result.reason or f"its run ended {result.status}")
        return result


def _failed(member: CrewMember, why: str) -> CrewMemberFailed:
    return CrewMemberFailed(
        f"crew member {member.name} ({member.role}) failed: {why}"[:2048], member=member.name
    )


def _quoted(runs: Sequence[ExecutionResult]) -> str:
    """The members' outputs as a prompt quotes them: each cut to its share of `MAX_TEXT_CHARS`,
    so a long crew's prompts stay bounded whatever its members wrote."""
    share = MAX_TEXT_CHARS // max(1, len(runs))
    return "\n\n".join(f"[{run.agent_id}]\n{run.output[:share]}" for run in runs)


def _with_work_so_far(task: str, runs: Sequence[ExecutionResult]) -> str:
    if not runs:
        return task
    return f"{task}\n\nThe crew's work so far:\n\n{_quoted(runs)}"


def _delegation_prompt(task: str, workers: Iterable[CrewMember]) -> str:
    listed = "\n".join(
        f"- {m.name} ({m.role}): {m.agent_def.instructions or 'no instructions'}" for m in workers
    )
    return (
        f"You lead a crew. The task:\n{task}\n\nYour workers:\n{listed}\n\n"
        'Delegate: answer with JSON {"delegations": [{"worker": "<name>", "task": "<their piece>"}]}, '
        "naming each worker at most once."
    )


def _delegations(answer: str, task: str, workers: dict[str, CrewMember]) -> list[Delegation]:
    """The supervisor's delegations to workers of this crew (each once, the first piece named
    for it). An answer that is not a delegation plan, or names no worker of the crew, gives
    every worker the whole task."""
    try:
        plan = DelegationPlan.model_validate(json.loads(answer))
    except (ValueError, ValidationError):
        plan = None
    chosen: dict[str, Delegation] = {}
    for piece in plan.delegations if plan else []:
        if piece.worker in workers and piece.worker not in chosen:
            chosen[piece.worker] = piece
    return list(chosen.values()) or [Delegation(worker=name, task=task) for name in workers]


def _synthesis_prompt(task: str, done: Sequence[ExecutionResult]) -> str:
    return f"The task:\n{task}\n\nYour workers' results:\n\n{_quoted(done)}\n\nWrite the final answer."


DEFAULT_MIN_SUCCESS_THRESHOLD: float = TaskSpec.model_fields["min_success_threshold"].default
"""A market task's threshold unless its poster says otherwise: `TaskSpec`'s (the moral-hazard
guard on: a bid whose calibrated success is below it cannot win)."""
MARKET_POLL_FIRST_S = 0.05
MARKET_POLL_AT_MOST_S = 2.0
DEFAULT_MARKET_WAIT_S = 900.0


class MarketCrewResult(BaseModel):
    """How a task put on the market by a `MarketCrew` ended: the board's record of it (the
    decision with every bid and score, and the winner's outcome with its cost and steps)."""

    task: TaskRecord

    @property
    def winner(self) -> str | None:
        return self.task.allocation.winning_agent_id if self.task.allocation else None

    @property
    def succeeded(self) -> bool:
        return self.task.status is AllocationStatus.COMPLETED

    @property
    def output(self) -> str:
        return self.task.outcome.summary if self.task.outcome else ""


class MarketCrew(Crew):
    """A crew that may put its task on the market (`use_market=True`) rather than run its
    members itself; with `use_market=False`, `run` is a plain crew's."""

    def __init__(
        self,
        members: Sequence[CrewMember],
        *,
        session_id: str,
        pattern: CrewPattern = CrewPattern.SEQUENTIAL,
        use_market: bool = False,
        market: MarketPort | None = None,
    ) -> None:
        super().__init__(members, session_id=session_id, pattern=pattern)
        if use_market and market is None:
            raise ValueError("a crew that uses the market needs one: market=DaprMarket(<sidecar HTTP port>)")
        self.use_market = use_market
        self.market = market
        self._posted = 0

    async def run_task_with_market(
        self,
        task_description: str,
        required_skills: Sequence[str],
        *,
        budget_usd: float | None = None,
        preferred_skills: Sequence[str] = (),
        min_success_threshold: float = DEFAULT_MIN_SUCCESS_THRESHOLD,
        deadline_ms: int | None = None,
        allow_partial: bool = False,
        wait_s: float = DEFAULT_MARKET_WAIT_S,
    ) -> MarketCrewResult:
        """Post the task (`<session_id>.market.<n>`), let the market allocate it, and wait (at
        most `wait_s`) until its winner's outcome, or the market's rejection, is on the board.
        The task's fields default as `TaskSpec`'s do (a bid needs a calibrated success of 0.5).
        `MarketAllocationFailed` when the market rejects it; `TimeoutError` when it has not ended
        in time (it goes on on the board)."""
        if not self.use_market or self.market is None:
            raise InvalidArgument("this crew does not use the market (use_market=False)")
        self._posted += 1
        spec = TaskSpec(
            task_id=f"{self.session_id}.market.{self._posted}",
            description=task_description[:MAX_TEXT_CHARS],
            required_skills=list(required_skills),
            preferred_skills=list(preferred_skills),
            budget_usd=budget_usd,
            min_success_threshold=min_success_threshold,
            deadline_ms=deadline_ms,
            allow_partial=allow_partial,
        )
        await self.market.post(spec)
        deadline = time.monotonic() + wait_s
        pause = MARKET_POLL_FIRST_S
        while True:
            record = await self.market.task(spec.task_id)
            if record is not None and record.status is AllocationStatus.REJECTED:
                reason = record.allocation.reject_reason if record.allocation else None
                why = reason or "rejected"
                raise MarketAllocationFailed(f"the market found no agent for {spec.task_id}: {why}")
            if record is not None and (record.outcome is not None or record.status in TERMINAL_STATUSES):
                return MarketCrewResult(task=record)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"task {spec.task_id} has not ended within {wait_s} s")
            await asyncio.sleep(pause)
            pause = min(pause * 2, MARKET_POLL_AT_MOST_S)


class MarketPort(Protocol):
    """Where a `MarketCrew` posts tasks and reads them: the market through a Dapr sidecar."""

    async def post(self, spec: TaskSpec) -> None: ...

    async def task(self, task_id: str) -> TaskRecord | None: ...


class DaprMarket:
    """The market through a Dapr sidecar: tasks published on `agora.tasks`, read from the task
    board by service invocation."""

    def __init__(
        self, dapr_http_port: int, *, dapr_host: str = "127.0.0.1", taskboard_app_id: str = "taskboard"
    ) -> None:
        settings = ServiceSettings(app_id="market-crew", dapr_host=dapr_host, dapr_http_port=dapr_http_port)
        self._sidecar = DaprSidecar(settings)
        self._publisher = Publisher(self._sidecar, settings)
        self._board = TaskBoardClient(self._sidecar, taskboard_app_id)

    async def post(self, spec: TaskSpec) -> None:
        await self._publisher.publish(topics.TASKS, spec, message_id=spec.task_id)

    async def task(self, task_id: str) -> TaskRecord | None:
        try:
            return await self._board.get(task_id)
        except NotFound:
            return None

    async def aclose(self) -> None:
        await self._sidecar.aclose()
