"""What a workflow that posted a market task waits for: which workflow waits for which task
(`TaskLink`), and the task's end as the board recorded it (`TaskEnded`), the external event a
plan's subgoal or a graph's market node is woken with."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agora.core.acceptance import Verdict, VerdictStatus, claim_stands
from agora.core.limits import MAX_NOTE_CHARS, Note
from agora.core.market import AllocationStatus, TaskOutcome
from agora.core.task_lifecycle import TaskRecord

__all__ = ["TaskEnded", "TaskLink"]


class TaskLink(BaseModel):
    """Which workflow waits for a market task's end, and the event that wakes it."""

    task_id: str
    instance_id: str
    event: str
    approach: str = ""
    """How the task was posted to be done (a plan's look-ahead chose it; empty: as described):
    kept so that posting the task again posts it the same way."""


class TaskEnded(BaseModel):
    """A market task's end as the task board recorded it: its outcome, or why it has none."""

    task_id: str
    outcome: TaskOutcome | None = None
    rejected_reason: Note | None = None
    verdict: Verdict | None = Field(
        default=None,
        description="What the task's check found of the outcome (None: no check); it, not the "
        "agent's claim, says whether the task succeeded where it passed or failed.",
        exclude_if=lambda verdict: verdict is None,
    )

    @property
    def succeeded(self) -> bool:
        """Whether the task's outcome counts as a success (`claim_stands`)."""
        return self.outcome is not None and claim_stands(self.outcome.actual_success, self.verdict)

    @property
    def check_failed(self) -> bool:
        return self.verdict is not None and self.verdict.status is VerdictStatus.FAILED

    @classmethod
    def on_board(cls, record: TaskRecord) -> TaskEnded | None:
        """The task's end as its board record tells it (None while it has none): its outcome,
        its rejection, or its failure without an outcome (no agent acknowledged the award)."""
        if record.outcome is not None:
            return cls(task_id=record.task_id, outcome=record.outcome, verdict=record.verdict)
        if record.status is AllocationStatus.REJECTED:
            reason = (record.allocation.reject_reason if record.allocation else None) or "rejected"
            return cls(task_id=record.task_id, rejected_reason=str(reason)[:MAX_NOTE_CHARS])
        if record.status is AllocationStatus.FAILED:
            reason = record.failure_reason or "the task failed"
            return cls(task_id=record.task_id, rejected_reason=reason[:MAX_NOTE_CHARS])
        return None
