"""A task's events: what happened to it, in order, read off its record.

The board's record of a task only grows: its history gains statuses in lifecycle order, its
awards gain attempts one after the other (an attempt is acknowledged or expires before the
next is made), and its allocation, outcome and failure reason are set once. So the events read
off it in a fixed order (each status, the decision after ALLOCATED or REJECTED, each award
attempt's steps after the decision, its progress notes after its acknowledgment, the outcome with
the final status) form a list that only
grows at its end, and an event's place in that list (`seq`, from 1) names it for good: a
watcher that saw up to `seq` N resumes with N + 1 and misses nothing, repeats nothing.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from agora.core.acceptance import claim_stands
from agora.core.limits import Identifier, Text
from agora.core.market import AllocationStatus
from agora.core.task_lifecycle import TaskRecord

__all__ = ["FINAL_TASK_STATUSES", "TaskEvent", "TaskEventKind", "task_events"]

FINAL_TASK_STATUSES = frozenset(
    {AllocationStatus.COMPLETED, AllocationStatus.FAILED, AllocationStatus.PARTIAL, AllocationStatus.REJECTED}
)


class TaskEventKind(StrEnum):
    STATUS = "status"
    """The task entered `status`."""
    AWARDED = "awarded"
    """The task was awarded to `agent_id` (the market's winner, or the next-best bid)."""
    ACKNOWLEDGED = "acknowledged"
    """`agent_id`'s runtime took the award up: its run began."""
    AWARD_EXPIRED = "award_expired"
    """`agent_id`'s award ended without its run ending the task (not acknowledged in time, or
    handed over by a person); `detail` says which."""
    PROGRESS = "progress"
    """What `agent_id` said of its progress while it ran the task; `detail` is the note."""
    OUTCOME = "outcome"
    """The run's end as its runtime reported it; `detail` is its summary."""


class TaskEvent(BaseModel):
    """One thing that happened to a task (`GET /v1/tasks/{id}/events`, one Server-Sent Event
    each, its `seq` the event's id)."""

    model_config = ConfigDict(frozen=True)

    task_id: Identifier
    seq: int = Field(ge=1, description="Its place in the task's events, from 1; names it for good.")
    kind: TaskEventKind
    at: datetime | None = Field(default=None, description="When it happened, when the record says.")
    status: AllocationStatus | None = Field(default=None, description="The status entered (`status` events).")
    agent_id: Identifier | None = None
    success: bool | None = Field(
        default=None,
        description="Whether the run succeeded (`outcome` events): as the task's check found where "
        "it passed or failed, else as the agent reported.",
    )
    detail: Text = ""


def task_events(record: TaskRecord) -> list[TaskEvent]:
    """Every event of the task so far, in order (see the module's docstring for why a later
    call's list starts with an earlier call's)."""
    events: list[TaskEvent] = []

    def add(kind: TaskEventKind, **fields: object) -> None:
        events.append(
            TaskEvent.model_validate(
                {"task_id": record.task_id, "seq": len(events) + 1, "kind": kind, **fields}
            )
        )

    for change in record.history:
        status = change.status
        detail = ""
        if status is AllocationStatus.REJECTED and record.allocation is not None:
            detail = record.allocation.reject_reason or ""
        elif status is AllocationStatus.FAILED and record.outcome is None:
            detail = record.failure_reason or ""
        outcome = record.outcome
        if status in FINAL_TASK_STATUSES and outcome is not None:
            add(
                TaskEventKind.OUTCOME,
                agent_id=outcome.agent_id,
                success=claim_stands(outcome.actual_success, record.verdict),
                detail=outcome.summary,
            )
        add(TaskEventKind.STATUS, status=status, at=change.at, detail=detail)
        if status is not AllocationStatus.ALLOCATED:
            continue
        for attempt in record.awards:
            add(TaskEventKind.AWARDED, agent_id=attempt.agent_id, at=attempt.awarded_at)
            if attempt.acknowledged_at is not None:
                add(TaskEventKind.ACKNOWLEDGED, agent_id=attempt.agent_id, at=attempt.acknowledged_at)
            for note in attempt.progress:  # only after the acknowledgment (`note_progress`)
                add(TaskEventKind.PROGRESS, agent_id=attempt.agent_id, at=note.at, detail=note.text)
            if attempt.expired_at is not None:
                why = (
                    f"handed over by {attempt.handed_over_by}"
                    if attempt.handed_over_by
                    else "not acknowledged in time"
                )
                add(TaskEventKind.AWARD_EXPIRED, agent_id=attempt.agent_id, at=attempt.expired_at, detail=why)
    return events
