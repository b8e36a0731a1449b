"""What the task board does outside any actor's turn about agents' run slots: it gives the
oldest waiting tasks a slot an agent freed, and it checks the runs of an agent found full.

A `Task` actor announces a release of an agent that has tasks waiting (`agora.agent.run_freed`);
`wake` then tries the oldest of them again (`retry_queued`), one per free slot, and forgets
those that no longer wait (awarded elsewhere, ended). The broker redelivers the announcement
when this fails; trying a task again that was awarded meanwhile changes nothing.

A run slot is held from the award's commit to the release that follows the turn's end. A claim
whose award was never committed (the board stopped in between) or a release that failed would
keep a slot taken for ever, so when a `Task` actor finds an agent full, `check_runs` (at most
once per `CHECK_EVERY_SECONDS` per agent, in the background) reads the task of every run it
has held longer than `STALE_CLAIM_SECONDS` and frees the slot of a turn that is not under way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from agora.core.capacity import STALE_CLAIM_SECONDS, RunFreed, RunHeld, RunRelease, WaitersForgotten
from agora.core.errors import NotFound
from agora.core.market import AllocationStatus
from agora.core.task_lifecycle import TaskRecord
from agora.runtime.clients import AgentRunsActors, TaskActors

log = logging.getLogger(__name__)

CHECK_EVERY_SECONDS = 30.0


def run_under_way(record: TaskRecord, agent_id: str, run: RunHeld) -> bool:
    """Whether the task's record shows the run as under way: that turn is its current award, to
    this agent, with no outcome yet."""
    award = record.current_award
    return (
        award is not None
        and award.agent_id == agent_id
        and len(record.awards) == run.turn
        and record.outcome is None
    )


class RunSlots:
    def __init__(
        self,
        runs: AgentRunsActors,
        tasks: TaskActors,
        readers: TaskActors,
        spawn: Callable[[Coroutine[Any, Any, Any], str], object],
    ) -> None:
        self._runs = runs
        self._tasks = tasks
        self._readers = readers
        self._spawn = spawn
        self._checked_at: dict[str, float] = {}

    async def on_run_freed(self, freed: RunFreed) -> None:
        await self.wake(freed.agent_id)

    async def wake(self, agent_id: str) -> int:
        """Give the agent's free slots to its oldest waiting tasks; how many it took."""
        started = datetime.now(UTC)
        view = await self._runs(agent_id).view()
        free, taken, gone = view.free, 0, []
        for waiter in view.waiting:
            if free <= 0:
                break
            try:
                record = await self._tasks(waiter.task_id).retry_queued()
            except NotFound:
                gone.append(waiter.task_id)
                continue
            if record.status is not AllocationStatus.QUEUED:
                gone.append(waiter.task_id)
            award = record.current_award
            if award is not None and award.agent_id == agent_id and award.awarded_at >= started:
                free, taken = free - 1, taken + 1
        if gone:
            await self._runs(agent_id).forget_waiters(WaitersForgotten(task_ids=gone[:100]))
        return taken

    def full_agent_seen(self, agent_id: str) -> None:
        """A `Task` actor found the agent full: check its runs soon, unless that was done lately."""
        now = time.monotonic()
        if now - self._checked_at.get(agent_id, -CHECK_EVERY_SECONDS) < CHECK_EVERY_SECONDS:
            return
        self._checked_at[agent_id] = now
        self._spawn(self._check_quietly(agent_id), f"check runs of {agent_id}")

    async def _check_quietly(self, agent_id: str) -> None:
        try:
            await self.check_runs(agent_id)
        except Exception as exc:  # checked again the next time the agent is found full
            log.warning(
                "checking an agent's runs failed", extra={"agent_id": agent_id, "reason": repr(exc)[:500]}
            )

    async def check_runs(self, agent_id: str, stale_after_s: float = STALE_CLAIM_SECONDS) -> list[str]:
        """Free the slots of the agent's runs held longer than `stale_after_s` whose turn is not
        under way by their task's record; the tasks freed, and the waiters woken after."""
        view = await self._runs(agent_id).view()
        old = datetime.now(UTC) - timedelta(seconds=stale_after_s)
        freed = []
        for run in view.runs:
            if run.since > old:
                continue
            try:
                record: TaskRecord | None = await self._readers(run.task_id).get_task()
            except NotFound:
                record = None
            if record is not None and run_under_way(record, agent_id, run):
                continue
            await self._runs(agent_id).release(RunRelease(task_id=run.task_id, turn=run.turn))
            freed.append(run.task_id)
        if freed:
            log.warning(
                "freed run slots whose turns had ended without a release",
                extra={"agent_id": agent_id, "task_ids": freed},
            )
            await self.wake(agent_id)
        return freed
