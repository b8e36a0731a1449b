"""Passes a market task's end to the workflow that posted the task and waits for it (a plan's
subgoal, a graph's market node), as the external event its `TaskLink` names.

Each signal changes nothing until the task board agrees: an outcome is heard from the board
itself (`agora.task.outcome.recorded`, which only the board may publish, in the turn that
records it), a rejection must be what the board holds, a lapsed award must be borne out by the
task's record and end the task. Only tasks with a link are this app's to pass on; the others
are ignored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agora.core import topics
from agora.core.contracts import OutcomeReport
from agora.core.errors import NotFound
from agora.core.market import AllocationStatus
from agora.core.messages import AwardLapsed, TaskRejected
from agora.core.task_lifecycle import TaskRecord
from agora.core.task_waits import TaskEnded, TaskLink
from agora.runtime.batched_reads import BatchedReads
from agora.runtime.clients import TaskActors
from agora.runtime.pubsub import RejectMessage, Subscriptions
from agora.runtime.state import StateRepository

__all__ = ["TaskEndRelay", "end_on_board"]

RaiseEvent = Callable[[str, str, TaskEnded], Awaitable[None]]
"""Raise `event` with the task's end on the workflow instance."""


async def end_on_board(tasks: TaskActors, task_id: str) -> TaskEnded | None:
    """The task's end as the board recorded it, if it has one (a wait's look for a signal that
    may have been lost)."""
    try:
        record = await tasks(task_id).get_task()
    except NotFound:
        return None
    return TaskEnded.on_board(record)


class TaskEndRelay:
    def __init__(self, links: StateRepository[TaskLink], tasks: TaskActors, raise_event: RaiseEvent) -> None:
        self._links = links
        self._link_reads = BatchedReads(links)
        """Every task's end is asked about; those handled side by side in one read."""
        self._tasks = tasks
        self._raise = raise_event

    def subscribe(self, subscriptions: Subscriptions) -> None:
        # Only the ends of tasks this app posted (`reply_to`) reach it: not every task's.
        subscribe = subscriptions.subscribe
        subscribe(topics.TASK_OUTCOME_RECORDED, self.on_outcome_recorded, idempotent=True, replies_only=True)
        subscribe(topics.TASK_REJECTED, self.on_rejected, idempotent=True, replies_only=True)
        subscribe(topics.TASK_AWARD_LAPSED, self.on_award_lapsed, idempotent=True, replies_only=True)

    async def link(self, link: TaskLink) -> None:
        """Note which workflow waits for the task (before the task is posted)."""
        await self._links.save(link.task_id, link)

    async def on_outcome_recorded(self, report: OutcomeReport) -> None:
        outcome = report.outcome
        link = await self._link_reads.get(outcome.task_id)
        if link is None:
            return
        await self._ended(
            link.value, TaskEnded(task_id=outcome.task_id, outcome=outcome, verdict=report.verdict)
        )

    async def end_on_board(self, task_id: str) -> TaskEnded | None:
        return await end_on_board(self._tasks, task_id)

    async def _board_record(self, task_id: str) -> TaskRecord:
        """The board's record of a task a signal names; a task the board lacks is refused."""
        try:
            return await self._tasks(task_id).get_task()
        except NotFound as exc:
            raise RejectMessage(f"no task {task_id} on the board") from exc

    async def on_rejected(self, rejected: TaskRejected) -> None:
        link = await self._link_reads.get(rejected.task_id)
        if link is None:
            return
        record = await self._board_record(rejected.task_id)
        if record.status is not AllocationStatus.REJECTED:
            raise RejectMessage(f"task {rejected.task_id} is {record.status} on the board, not REJECTED")
        reason = (record.allocation.reject_reason if record.allocation else None) or rejected.reason
        await self._ended(link.value, TaskEnded(task_id=rejected.task_id, rejected_reason=reason))

    async def on_award_lapsed(self, lapse: AwardLapsed) -> None:
        """An award lapsed unacknowledged: when no other bid could take it, the board failed
        the task, and the wait ends now rather than at its timeout."""
        link = await self._link_reads.get(lapse.task_id)
        if link is None:
            return
        record = await self._board_record(lapse.task_id)
        if (problem := lapse.disagreement_with(record)) is not None:
            raise RejectMessage(problem)
        ended = TaskEnded.on_board(record)
        if ended is not None:
            await self._ended(link.value, ended)

    async def _ended(self, link: TaskLink, ended: TaskEnded) -> None:
        await self._raise(link.instance_id, link.event, ended)
