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
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, Field, ValidationError

from agora.core.errors import AgoraError, CrewMemberFailed, InvalidArgument
from agora.core.limits import MAX_TEXT_CHARS
from agora.sdk._runner import AgentDefinition, AgentRunner, ExecutionResult, RunStatus

__all__ = ["MAX_CREW_MEMBERS", "SUPERVISOR_ROLE", "Crew", "CrewMember", "CrewPattern", "CrewResult"]

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
