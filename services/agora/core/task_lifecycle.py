"""The task lifecycle: which status may follow which, and what an outcome makes of a task.

    PENDING ─► BIDDING ─► ALLOCATED ─► COMPLETED | FAILED | PARTIAL
       │          │
       └──────────┴─────► REJECTED

PENDING → REJECTED covers tasks refused before any bid was asked for (no capable agent).
PARTIAL exists only for tasks with `allow_partial`; otherwise a partial outcome is FAILED.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field

from agora.core.errors import ConflictingTask, IllegalTransition, InvalidOutcome
from agora.core.market import AllocationResult, AllocationStatus, Bid, TaskOutcome, TaskSpec

S = AllocationStatus

LEGAL_TRANSITIONS: dict[AllocationStatus, frozenset[AllocationStatus]] = {
    S.PENDING: frozenset({S.BIDDING, S.REJECTED}),
    S.BIDDING: frozenset({S.ALLOCATED, S.REJECTED}),
    S.ALLOCATED: frozenset({S.COMPLETED, S.FAILED, S.PARTIAL}),
    S.REJECTED: frozenset(),
    S.COMPLETED: frozenset(),
    S.FAILED: frozenset(),
    S.PARTIAL: frozenset(),
}


class StatusChange(BaseModel):
    status: AllocationStatus
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class TaskRecord(BaseModel):
    """Everything the task board knows about one task."""

    spec: TaskSpec
    status: AllocationStatus = AllocationStatus.PENDING
    bids: list[Bid] = Field(default_factory=list)
    allocation: AllocationResult | None = None
    outcome: TaskOutcome | None = None
    history: list[StatusChange] = Field(
        default_factory=lambda: [StatusChange(status=AllocationStatus.PENDING)]
    )
    award_published: bool = False
    """Whether the allocator's award/rejection event went out (resumption republishes if not)."""

    @property
    def task_id(self) -> str:
        return self.spec.task_id


def check_transition(current: AllocationStatus, target: AllocationStatus) -> None:
    if target not in LEGAL_TRANSITIONS[current]:
        allowed = ", ".join(sorted(LEGAL_TRANSITIONS[current])) or "none (terminal)"
        raise IllegalTransition(f"task cannot go from {current} to {target}; allowed: {allowed}")


def move(record: TaskRecord, target: AllocationStatus) -> TaskRecord:
    check_transition(record.status, target)
    return record.model_copy(
        update={"status": target, "history": [*record.history, StatusChange(status=target)]}
    )


def post(existing: TaskRecord | None, spec: TaskSpec) -> TaskRecord:
    """Posting is idempotent for the same spec; a different spec under a used id is refused."""
    if existing is None:
        return TaskRecord(spec=spec)
    if existing.spec != spec:
        raise ConflictingTask(f"task {spec.task_id} already exists with a different specification")
    return existing


def add_bid(record: TaskRecord, bid: Bid) -> TaskRecord:
    if bid.task_id != record.task_id:
        raise InvalidOutcome(f"bid {bid.bid_id} is for task {bid.task_id}, not {record.task_id}")
    if record.status is not AllocationStatus.BIDDING:
        raise IllegalTransition(
            f"task {record.task_id} takes bids only while BIDDING (it is {record.status})"
        )
    if any(b.bid_id == bid.bid_id for b in record.bids):
        return record
    return record.model_copy(update={"bids": [*record.bids, bid]})


def allocate(record: TaskRecord, result: AllocationResult) -> TaskRecord:
    if record.allocation is not None and record.allocation.status == result.status:
        return record  # the same decision delivered again
    moved = move(record, result.status)
    return moved.model_copy(update={"allocation": result})


def outcome_status(spec: TaskSpec, outcome: TaskOutcome) -> AllocationStatus:
    if outcome.actual_success:
        return AllocationStatus.COMPLETED
    if outcome.partial and spec.allow_partial:
        return AllocationStatus.PARTIAL
    return AllocationStatus.FAILED


def counts_as_success(spec: TaskSpec, outcome: TaskOutcome) -> bool:
    return outcome_status(spec, outcome) is not AllocationStatus.FAILED


def record_outcome(record: TaskRecord, outcome: TaskOutcome) -> TaskRecord:
    if record.outcome is not None:
        if record.outcome == outcome:
            return record
        raise InvalidOutcome(f"task {record.task_id} already has an outcome")
    winner = record.allocation.winning_agent_id if record.allocation else None
    if outcome.agent_id != winner:
        raise InvalidOutcome(f"task {record.task_id} was awarded to {winner}, not {outcome.agent_id}")
    moved = move(record, outcome_status(record.spec, outcome))
    # An outcome proves the award reached the worker, even if recording that was cut short.
    return moved.model_copy(update={"outcome": outcome, "award_published": True})
