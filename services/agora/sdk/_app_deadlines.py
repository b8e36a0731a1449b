"""Each run's deadline, held where the run goes on (an asyncio timeout) and by its workflow (a
durable timer): a run still going at its task's deadline ends FAILED with `DEADLINE_EXCEEDED` and
what it spent."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from agora.core.limits import MAX_ITEMS, MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.market import TaskOutcome
from agora.core.messages import TaskAwarded
from agora.core.task_lifecycle import deadline_exceeded, failure_summary
from agora.runtime.interfaces import TaskInterface
from agora.sdk._agent import Agent
from agora.sdk._app_meter import RunMeter, Spend
from agora.sdk._app_run import AgentRunStart, RunProgress, run_attributes
from agora.sdk._app_steps import charged
from agora.sdk._runner import AgentStateStore, RunStatus

__all__ = ["STOP_GRACE_SECONDS", "RunDeadlines", "within_deadline"]

log = logging.getLogger(__name__)

T = TypeVar("T")


async def within_deadline(
    deadline: datetime | None,
    run: Callable[[], Awaitable[T]],
    at_deadline: Callable[[], Awaitable[T]],
) -> T:
    """What `run` comes to, or when it is still going at `deadline`, `run` stopped (cancelled)
    and `at_deadline`'s result instead; a deadline already passed does not start `run`. A
    `TimeoutError` of `run`'s own goes through: only the deadline's stops it."""
    if deadline is None:
        return await run()
    left = (deadline - datetime.now(UTC)).total_seconds()
    if left <= 0:
        return await at_deadline()
    bound = asyncio.timeout(left)
    try:
        async with bound:
            return await run()
    except TimeoutError:
        if not bound.expired():
            raise
    return await at_deadline()


async def _stopped_at_deadline(
    agent: Agent, award: TaskAwarded, store: AgentStateStore, meter: RunMeter | None
) -> RunProgress:
    """The outcome of a run stopped at its task's deadline: FAILED, its summary naming
    `DEADLINE_EXCEEDED`, with what the run spent so far: as metered in this process while a turn
    of it went on here, else as its runner last saved it (a run paused for a person: all of it;
    a run lost with another process: its earlier turns). A saved state still running or waiting
    ends FAILED too, so a decision that comes later finds the run ended."""
    reason = failure_summary(deadline_exceeded(award.spec))
    saved = await store.load(agent.agent_id, award.task_id) if agent.runner is not None else None
    metered = meter.spent(agent.agent_id, award.task_id) if meter is not None else None
    last_saved = Spend.of(saved) if saved is not None else Spend()
    spend = metered if metered is not None else last_saved
    if saved is not None and saved.status in (RunStatus.RUNNING, RunStatus.WAITING_FOR_HUMAN):
        ended = saved.model_copy(
            update={"status": RunStatus.FAILED, "reason": reason[:MAX_NOTE_CHARS], "cost_usd": spend.cost_usd,
                    "input_tokens": spend.input_tokens, "output_tokens": spend.output_tokens,
                    "iterations": spend.steps}
        )  # fmt: skip
        await store.save(ended)
    return RunProgress(
        outcome=TaskOutcome(
            task_id=award.task_id,
            agent_id=award.agent_id,
            actual_success=False,
            actual_cost_usd=charged(agent, spend.cost_usd, spend.steps),
            actual_steps=spend.steps,
            summary=reason[:MAX_TEXT_CHARS],
            input_tokens=spend.input_tokens,
            output_tokens=spend.output_tokens,
            tools_called=spend.tools_called[:MAX_ITEMS],
            award_token=award.award_token,
        )
    )


STOP_GRACE_SECONDS = 5.0
"""How long a run's deadline step waits for the run, going on in its process, to stop itself."""


class RunDeadlines:
    """Each run's deadline, held where the run goes on and by its workflow.

    In the process where a run goes on (inside its award's delivery, or a step of its workflow)
    it is bounded by its deadline (`bounded`, an asyncio timeout): still going then, it is
    stopped and its task ends FAILED with `DEADLINE_EXCEEDED` and what it spent (`ended`). Its
    workflow's durable timer at the same deadline ends what no process is left to stop: a run
    paused for a person, one lost with its app, one whose step waits to be handed out
    (`passed`)."""

    def __init__(
        self,
        agents: dict[str, Agent],
        store: AgentStateStore,
        meter: RunMeter | None,
        tasks: Callable[[str], TaskInterface],
        stop_grace_seconds: float = STOP_GRACE_SECONDS,
    ) -> None:
        self._agents = agents
        self._stop_grace_seconds = stop_grace_seconds
        self._store = store
        self._meter = meter
        self._tasks = tasks
        self._runs: dict[str, asyncio.Task[Any]] = {}
        """Runs going on in this process, by workflow instance."""
        self._cancelled: set[str] = set()
        """Runs of `_runs` being stopped because their task was cancelled."""

    async def bounded(
        self,
        award: TaskAwarded,
        instance: str,
        deadline: datetime | None,
        run: Callable[[], Awaitable[RunProgress]],
    ) -> RunProgress:
        """What the run comes to, or, still going at `deadline`, its end there (`ended`)."""
        current = asyncio.current_task()
        if current is not None:
            self._runs[instance] = current
        try:
            return await within_deadline(deadline, run, lambda: self.ended(award))
        except asyncio.CancelledError:
            if instance not in self._cancelled or current is None:
                raise  # the app stopping, or the run's own
            current.uncancel()
            return RunProgress(cancelled=True)
        finally:
            if self._runs.get(instance) is current:
                del self._runs[instance]
                self._cancelled.discard(instance)
            if self._meter is not None:
                self._meter.forget(award.agent_id, award.task_id)

    def stop_cancelled(self, instance: str) -> bool:
        """Stop the run going on in this process as `instance`, its task cancelled: it ends
        without an outcome (`RunProgress.cancelled`), its agent told as any stopped run is (an
        A2A agent's task is cancelled). Whether such a run was going on here."""
        local = self._runs.get(instance)
        if local is None or local.done():
            return False
        self._cancelled.add(instance)
        local.cancel()
        return True

    async def ended(self, award: TaskAwarded) -> RunProgress:
        """The run's end at its deadline: the outcome the board holds already (the run ended, or
        was ended in another process, first: nothing more to record), else FAILED with
        `DEADLINE_EXCEEDED` and what it spent, to record."""
        board = await self._tasks(award.task_id).get_task()
        if board.outcome is not None:
            return RunProgress(outcome=board.outcome, reported=True)
        return await _stopped_at_deadline(self._agents[award.agent_id], award, self._store, self._meter)

    async def passed(self, start: AgentRunStart) -> RunProgress:
        """The run's workflow timer fired: its deadline passed before the run ended. A run going
        on in this process ends itself at its deadline and is waited for (a while: one that does
        not stop, a handler deaf to cancellation say, is ended here all the same and cancelled
        again); any other is ended here."""
        local = self._runs.get(start.instance)
        if local is not None:
            await asyncio.wait({local}, timeout=self._stop_grace_seconds)
            if not local.done():
                log.warning(
                    "a run did not stop at its deadline; its task ends without it",
                    extra=run_attributes(start.award),
                )
                ended = await self.ended(start.award)  # before the run is let go: what it spent
                local.cancel()
                return ended
        if start.handle is not None:  # paused for a person: its agent stops its side of it
            await self._agents[start.award.agent_id].stopped(start.award, start.handle)
        return await self.ended(start.award)
