"""Agent capacity: how many runs an agent takes at once, the runs it holds, and the tasks that
wait for one of its run slots.

An agent's profile declares `max_concurrent_runs`. A run holds one of the agent's slots from
its award until its turn ends: its outcome is recorded, its award lapses, a person hands it to
another agent, or the task is cancelled. The market never awards an agent a run past its
limit: the award goes to the best eligible bidder with a free slot, and when every eligible
bidder is full the task waits (QUEUED), recorded as a waiter of each of its best
`MAX_BIDDERS_WAITED_ON` bidders in the order it came, and is awarded when one of them frees a
slot.

`AgentRunsState` is one agent's book of runs and waiters, kept by a turn-based actor, so a
claim is one call with no lock and no lost update. Every change is keyed by the task, so a
claim or release asked again (a retried call, a redelivered award) changes nothing.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from agora.core.limits import MAX_ITEMS, Identifier, Note

DEFAULT_MAX_CONCURRENT_RUNS = 4
"""Runs an agent whose profile does not say takes at once (the SDK's agents say what they take)."""
MAX_CONCURRENT_RUNS = 10_000
MAX_BIDDERS_WAITED_ON = 8
"""A task whose eligible bidders are all full waits for the best this many of them: claiming
a slot of every one of up to `MAX_CANDIDATES` bidders would cost a call each."""
MAX_WAITERS = 100_000
"""Tasks one agent keeps waiting (the oldest first); a task past it is not refused, it waits
for its other bidders and its retries."""
STALE_CLAIM_SECONDS = 60.0
"""A run held this long is checked against its task's record by the market's sweep (a claim
whose award was never committed, a release that failed, leave a slot taken otherwise)."""


class RunHeld(BaseModel):
    """A run the agent holds: the task and which of its awards (`turn`, 1 for the first)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: Identifier
    turn: int = Field(ge=1)
    since: datetime


class Waiter(BaseModel):
    """A task waiting for one of the agent's slots, since when."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: Identifier
    since: datetime


class RunClaim(BaseModel):
    """`AgentRuns.claim`: a slot of the agent for this turn of the task, under the agent's
    limit as its profile declared it when the task was allocated. `wait`: when the agent is
    full, keep the task as a waiter, woken when a slot frees."""

    model_config = ConfigDict(extra="forbid")

    task_id: Identifier
    turn: int = Field(ge=1)
    limit: int = Field(ge=1, le=MAX_CONCURRENT_RUNS)
    wait: bool = False


class RunRelease(BaseModel):
    """`AgentRuns.release`: the turn of the task ended; its slot is free again."""

    model_config = ConfigDict(extra="forbid")

    task_id: Identifier
    turn: int = Field(ge=1)


class WaitersForgotten(BaseModel):
    """`AgentRuns.forget_waiters`: tasks that no longer wait (awarded elsewhere, ended)."""

    model_config = ConfigDict(extra="forbid")

    task_ids: list[Identifier] = Field(max_length=MAX_ITEMS)


class RunsView(BaseModel):
    """An agent's runs in flight and the tasks waiting for it (the oldest `MAX_ITEMS`), with
    the limit last claimed under; the answer of every `AgentRuns` call."""

    model_config = ConfigDict(extra="forbid")

    agent_id: Identifier
    limit: int = Field(ge=1, le=MAX_CONCURRENT_RUNS)
    runs: list[RunHeld] = Field(default_factory=list, max_length=MAX_CONCURRENT_RUNS)
    waiting: list[Waiter] = Field(default_factory=list, max_length=MAX_ITEMS)
    """The oldest waiters, first come first."""
    waiting_count: int = Field(default=0, ge=0)
    granted: bool = False
    """For a claim: whether the slot is the task's."""

    @property
    def free(self) -> int:
        return max(0, self.limit - len(self.runs))


class AgentRunsState(BaseModel):
    """One agent's book: its runs in flight by task id and the tasks waiting, oldest first."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=DEFAULT_MAX_CONCURRENT_RUNS, ge=1, le=MAX_CONCURRENT_RUNS)
    runs: dict[str, RunHeld] = Field(default_factory=dict)
    waiting: list[Waiter] = Field(default_factory=list)

    def claim(self, claim: RunClaim, now: datetime) -> tuple[bool, bool]:
        """Give the task a slot if it holds one already for this turn or one is free; otherwise,
        with `claim.wait`, keep it waiting (once). Changes the state in place; answers whether
        the slot is the task's, and whether anything changed."""
        changed = claim.limit != self.limit
        self.limit = claim.limit
        held = self.runs.get(claim.task_id)
        if held is not None and held.turn == claim.turn:
            return True, changed
        if held is None and len(self.runs) >= self.limit:
            if claim.wait and len(self.waiting) < MAX_WAITERS and not self.is_waiting(claim.task_id):
                self.waiting.append(Waiter(task_id=claim.task_id, since=now))
                changed = True
            return False, changed
        # A new turn of a task the agent held before (handed back to it) takes its old slot.
        self.runs[claim.task_id] = RunHeld(task_id=claim.task_id, turn=claim.turn, since=now)
        self.forget({claim.task_id})
        return True, True

    def release(self, release: RunRelease) -> bool:
        """Free the task's slot if it is held for that turn (True when one was freed)."""
        held = self.runs.get(release.task_id)
        if held is None or held.turn != release.turn:
            return False
        del self.runs[release.task_id]
        return True

    def is_waiting(self, task_id: str) -> bool:
        return any(w.task_id == task_id for w in self.waiting)

    def forget(self, task_ids: set[str]) -> bool:
        kept = [w for w in self.waiting if w.task_id not in task_ids]
        changed = len(kept) != len(self.waiting)
        self.waiting = kept
        return changed

    def view(self, agent_id: str, granted: bool = False) -> RunsView:
        return RunsView(
            agent_id=agent_id,
            limit=self.limit,
            runs=sorted(self.runs.values(), key=lambda r: (r.since, r.task_id)),
            waiting=self.waiting[:MAX_ITEMS],
            waiting_count=len(self.waiting),
            granted=granted,
        )


class RunFreed(BaseModel):
    """The task board's notice that an agent with tasks waiting freed a slot (`agora.agent.run_freed`,
    event id `run_freed:<task>.<turn>`): the board awards the oldest waiters their slots."""

    model_config = ConfigDict(extra="forbid")

    agent_id: Identifier
    task_id: Identifier
    """The task whose turn ended."""
    turn: int = Field(ge=1)

    @property
    def message_id(self) -> str:
        return f"run_freed:{self.task_id}.{self.turn}"


class QueueWait(BaseModel):
    """Why and since when a task waits for a run slot (its record, while QUEUED and after)."""

    model_config = ConfigDict(extra="forbid")

    since: datetime
    reason: Note
    """Which capable agents are full, with their runs and limits: "3 capable agents, 0 free: ..."."""
    waiting_on: list[Identifier] = Field(default_factory=list, max_length=MAX_BIDDERS_WAITED_ON)
    """The bidders the task waits for, best first."""
    tries: int = Field(default=1, ge=1)
    """Times the board tried to award it a slot."""


def full_reason(capable: int, full: dict[str, RunsView]) -> str:
    """ "N capable agents, 0 free: a 2 of 2 runs, b 4 of 4 runs" (the full ones named, best first)."""
    named = ", ".join(f"{agent} {len(view.runs)} of {view.limit} runs" for agent, view in full.items())
    return f"{capable} capable agent{'s' if capable != 1 else ''}, 0 free: {named}"[:2048]
