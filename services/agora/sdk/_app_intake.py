"""How an agent app takes the awards its agents win: an award on its first delivery is run at
once, an older one (a redelivery, or one that waited in the broker) is checked with the board
first (`verify_award`); the run goes on in the award's delivery for a while, and when it lasts
longer (or pauses, or fails there) the `agent_run` workflow takes it over and the award is
acknowledged. A task a person cancels while one of its agents runs it (`agora.task.cancelled`)
has its run stopped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from agora.core.errors import AgoraError
from agora.core.messages import AwardAcknowledgement, TaskAwarded, TaskCancelled
from agora.core.task_lifecycle import TaskRecord, run_deadline
from agora.runtime.interfaces import TaskInterface
from agora.runtime.pubsub import RejectMessage
from agora.runtime.tracing import current_traceparent
from agora.runtime.workflows import WorkflowHost
from agora.sdk._agent import Agent
from agora.sdk._app_activities import RunActivities
from agora.sdk._app_run import AGENT_RUN, AgentRunReport, AgentRunStart, RunProgress, run_instance

__all__ = ["FRESH_AWARD_SECONDS", "AwardIntake", "first_delivery", "unless_refused"]

log = logging.getLogger(__name__)


class AwardIntake:
    """Takes the awards of this app's agents (`agora.task.awarded`), each once: run in its
    delivery for up to `inline_run_seconds` (its outcome, recorded on the board, acknowledges
    it), else handed to its workflow and acknowledged."""

    def __init__(
        self,
        agents: dict[str, Agent],
        tasks: Callable[[str], TaskInterface],
        host: WorkflowHost,
        activities: RunActivities,
        spawn: Callable[[Coroutine[Any, Any, Any], str], asyncio.Task[Any]],
        inline_run_seconds: float,
    ) -> None:
        self._agents = agents
        self._tasks = tasks
        self._host = host
        self._activities = activities
        self._spawn = spawn
        self._inline_run_seconds = inline_run_seconds

    async def on_award(self, award: TaskAwarded) -> None:
        if award.agent_id not in self._agents:
            return  # another app's agent
        if first_delivery(award):
            attempt, acknowledged = award.attempt, False
        else:
            board = await self.checked_with_board(award)
            if board is None:
                return
            attempt, acknowledged = len(board.awards), board.awards[-1].acknowledged_at is not None
        start = AgentRunStart(
            award=award,
            traceparent=current_traceparent(),
            instance_id=run_instance(award.task_id, attempt),
            # A board that does not date its awards: the run's budget counts from now.
            deadline=run_deadline(award.spec, award.awarded_at or datetime.now(UTC)),
        )
        if acknowledged:
            # Only a run a workflow holds is acknowledged before its outcome: a redelivery
            # of its award finds it there (and starts it, should that have been cut short).
            await self._host.start_once(AGENT_RUN, start.instance, start)
            return
        inline_seconds = min(self._inline_run_seconds, award.acknowledge_within_ms / 3000)
        if not self._agents[award.agent_id].runs_inline:
            inline_seconds = 0
        if inline_seconds > 0 and await self.ran_inline(start, inline_seconds):
            return  # ended, recorded on the board and announced
        await self._host.start_once(AGENT_RUN, start.instance, start)
        # The workflow holds the run now, however long it takes: the award is taken.
        held = AwardAcknowledgement(agent_id=award.agent_id, award_token=award.award_token)
        await unless_refused(
            self._tasks(award.task_id).acknowledge_award(held),
            "the award passed on before its run was taken; its outcome will be refused",
            {"task_id": award.task_id, "agent_id": award.agent_id},
        )

    async def on_cancelled(self, cancelled: TaskCancelled) -> None:
        """A person cancelled a task one of this app's agents runs, as the board's record bears
        out: the run going on in this process is stopped (it ends without an outcome) and its
        workflow ended, so a run paused for a person waits no more. A run going on in another
        replica of the app finishes; the board refuses its outcome."""
        if cancelled.agent_id not in self._agents:
            return  # another app's agent
        disagreement = cancelled.disagreement_with(await self._tasks(cancelled.task_id).get_task())
        if disagreement is not None:
            raise RejectMessage(f"the task board's record does not bear the cancel out: {disagreement}")
        instance = run_instance(cancelled.task_id, cancelled.attempt)
        stopped_here = self._activities.stop_cancelled(instance)
        ended = await self._host.terminate_if_running(instance, f"cancelled by {cancelled.cancelled_by}")
        log.info(
            "a cancelled task's run was stopped",
            extra={"task_id": cancelled.task_id, "agent_id": cancelled.agent_id,
                   "stopped_in_this_process": stopped_here, "workflow_ended": ended},
        )  # fmt: skip

    async def checked_with_board(self, award: TaskAwarded) -> TaskRecord | None:
        """The board's record of an award that may have been handled before (a redelivery,
        or one that waited in the broker), if the award is still this agent's to run: it
        holds the award (its token, its turn not passed on) and the event agrees with it."""
        held = AwardAcknowledgement(agent_id=award.agent_id, award_token=award.award_token)
        try:
            board = await self._tasks(award.task_id).verify_award(held)
        except AgoraError as exc:
            if not exc.permanent:
                raise
            raise RejectMessage(f"{exc.code}: {exc.message}") from exc
        winning = board.allocation.winning_bid if board.allocation else None
        if board.spec != award.spec or winning != award.bid:
            raise RejectMessage(f"award for {award.task_id} does not match the task board's record")
        if board.outcome is not None:
            # A redelivery of an award whose task is done: nothing to run. The board
            # announced the outcome as it recorded it, unless it went down in between and its
            # reporter too; recording the same outcome again has the board announce it again
            # (its subscribers take each task's outcome once).
            if board.outcome.agent_id == award.agent_id:
                await self._activities.report(
                    AgentRunReport(outcome=board.outcome, traceparent=current_traceparent())
                )
            return None
        return board

    async def ran_inline(self, start: AgentRunStart, seconds: float) -> bool:
        """Run the award in its delivery for up to `seconds`; whether it ended with its
        outcome recorded and announced. A run still going is stopped (its workflow runs it
        from the start, on whichever replica the engine picks, so it never runs twice at
        once); a paused or broken one is left to its workflow too, which finds it paused or
        retries."""
        run = self._spawn(self._activities.execute(start), f"run {start.instance}")
        await asyncio.wait({run}, timeout=seconds)
        if not run.done():
            if start.instance not in self._activities.reporting:
                run.cancel()
                await asyncio.wait({run})
                return False
            # Its outcome may be on the board already: stopping it now could leave that
            # outcome unannounced, and a second run's outcome refused. It finishes.
            await asyncio.wait({run})
        failure = None if run.cancelled() else run.exception()
        if failure is not None:
            log.warning(
                "a run failed in its award's delivery; its workflow runs it again",
                extra={"task_id": start.award.task_id, "reason": repr(failure)[:300]},
            )
            return False
        if run.cancelled():
            return False
        progress: RunProgress = run.result()
        return progress.reported or progress.cancelled


async def unless_refused(call: Awaitable[object], refused: str, extra: dict[str, str]) -> None:
    """Await a call on the board; its permanent refusal is logged as `refused` with the reason
    (a transient failure raises, so the delivery or workflow step is tried again)."""
    try:
        await call
    except AgoraError as exc:
        if not exc.permanent:
            raise
        log.warning(refused, extra={**extra, "reason": f"{exc.code}: {exc.message}"})


FRESH_AWARD_SECONDS = 5.0
"""An award delivered within this time of being made is its first delivery: the broker hands a
message out again only once it has gone unacknowledged for its processing timeout (15 s), well
past this, with room for the clocks of two hosts to differ."""


def first_delivery(award: TaskAwarded, now: datetime | None = None) -> bool:
    """Whether the award is run at once, without asking the board first: only the board may
    publish awards (its topic's scopes), and it refuses an outcome without the award's token,
    so what the check would add for an award this young is the answer to "was this handled
    before?", which only a redelivery needs."""
    if award.awarded_at is None:
        return False  # from a board that does not say when it made the award
    age = ((now or datetime.now(UTC)) - award.awarded_at).total_seconds()
    return -FRESH_AWARD_SECONDS < age < FRESH_AWARD_SECONDS
