"""The escalation record and its lifecycle: a wait for a decision (`EscalationRecord`) is
parked, then resolved by a decision or expired to its default, exactly once; an abort leaves a
summary of what completed; every step is in the audit trail. The errors these rules raise are
declared here, beside them.

    park ─► WAITING_FOR_HUMAN ─┬─ resolve(decision) ──────────────► RESOLVED
                               └─ expire(now >= deadline) ────────► EXPIRED  (default decision)
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

from agora.core.errors import AgoraError, IllegalTransition, InvalidArgument, NotFound
from agora.core.escalation.checkpoints import CheckpointContext
from agora.core.escalation.context import AnyContext, EscalationContext
from agora.core.escalation.decisions import AnyResponse, CheckpointResponse, EscalationResponse
from agora.core.limits import MAX_ID_CHARS, MAX_ITEMS, IdRef, Name, NameRef, Note, Text

__all__ = [
    "DECIDED_STATUSES",
    "SYSTEM_ACTOR",
    "AbortSummary",
    "AgentNotWaiting",
    "AuditEntry",
    "ConflictingEscalation",
    "EscalationRecord",
    "EscalationStatus",
    "InvalidDecision",
    "ParkRequest",
    "PartialProgress",
    "UnverifiedDecision",
    "WaitingParty",
    "WaitingPartyKind",
    "abort_summary",
    "complete_cleanup",
    "expire",
    "extend_deadline",
    "is_overdue",
    "park",
    "require_record",
    "resolve",
    "summarize_progress",
]


class AgentNotWaiting(AgoraError):
    """A decision arrived for an escalation that no longer waits for one (already resolved or
    expired)."""

    code = "AGENT_NOT_WAITING"
    http_status = 409


class ConflictingEscalation(AgoraError):
    """An escalation id was parked again with a different waiting party, context or deadline."""

    code = "CONFLICTING_ESCALATION"
    http_status = 409


class UnverifiedDecision(AgoraError):
    """An announced decision that its escalation's own record does not hold (forged, or
    altered on the way): the waiting party keeps waiting."""

    code = "UNVERIFIED_DECISION"
    http_status = 409


class InvalidDecision(AgoraError):
    """A decision that does not fit the escalation (a checkpoint answer to a reactive escalation,
    or the other way round)."""

    code = "INVALID_DECISION"
    http_status = 422


# `NotFound` (an unknown escalation id) is reused from agora.core.errors.

SYSTEM_ACTOR = "system"
"""The `who` of audit entries written by the system itself (expiry)."""

_ID_PATTERN = r"^[^\s|]+$"


def _check_aware(now: datetime) -> None:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be a timezone-aware datetime")


def _blank_to_none(value: str | None) -> str | None:
    return None if value is None or not value.strip() else value


class EscalationStatus(StrEnum):
    WAITING_FOR_HUMAN = "WAITING_FOR_HUMAN"
    """Parked: the waiting party is paused until a decision arrives."""
    RESOLVED = "RESOLVED"
    """A decision-maker answered; `decision` holds the answer."""
    EXPIRED = "EXPIRED"
    """The deadline passed; `decision` holds the configured default decision."""


DECIDED_STATUSES = frozenset({EscalationStatus.RESOLVED, EscalationStatus.EXPIRED})


class WaitingPartyKind(StrEnum):
    TASK = "task"
    PLAN_STEP = "plan_step"
    DEBATE = "debate"
    SESSION = "session"
    GRAPH_RUN = "graph_run"


class WaitingParty(BaseModel):
    """What is paused until the escalation is decided (the actor to resume)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: WaitingPartyKind
    id: str = Field(min_length=1, max_length=MAX_ID_CHARS)


class AuditEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    who: Name = Field(description="A person's or service's identity, or 'system'.")
    when: AwareDatetime
    what: Note = Field(min_length=1, description="What happened, e.g. 'parked', 'resolved: retry'.")
    why: Note = Field(default="", description="The reason given, if any.")


class PartialProgress(BaseModel):
    """What the waiting party had achieved when it was aborted: its partial results kept and
    what completed, so nothing done is lost with the abort."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    completed: list[Note] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Steps/items that finished."
    )
    pending: list[Note] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Steps/items that will not run."
    )
    saved: dict[str, JsonValue] = Field(default_factory=dict, description="Partial results kept.")


class AbortSummary(BaseModel):
    """Produced when an escalation ends in abort (decided or by default): why, where it stopped,
    what completed. `cleanup_completed` turns True once the waiting party reports its cleanup
    (`complete_cleanup`), so an aborted workflow is known to have cleaned up after itself."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, serialize_by_alias=True)

    escalation_id: IdRef
    waiting_party: WaitingParty
    aborted_by: NameRef
    aborted_at: AwareDatetime
    reason: Note = Field(description="Why the abort was necessary.")
    stopped_at_step: int | None = Field(
        default=None, alias="stopped_at_sheet", description="The step that was waiting."
    )
    last_error: Note | None = None
    progress: PartialProgress = Field(default_factory=PartialProgress)
    progress_summary: Text = Field(description="Human-readable summary of what completed.")
    cleanup_completed: bool = False


class ParkRequest(BaseModel):
    """What a waiting party sends the `Escalation` actor (`park`) to wait for a person."""

    waiting_party: WaitingParty
    context: AnyContext
    deadline: datetime | None = None
    default_decision: AnyResponse | None = None
    who: Name = SYSTEM_ACTOR
    why: Note = ""

    @model_validator(mode="after")
    def _default_answers_the_context(self) -> ParkRequest:
        if self.default_decision is not None and self.default_decision.kind != self.context.kind:
            raise ValueError(
                f"default_decision is a {self.default_decision.kind} answer but the context is a "
                f"{self.context.kind}"
            )
        return self


class EscalationRecord(BaseModel):
    """One wait for a decision, as the `Escalation` actor stores it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    escalation_id: str = Field(min_length=1, max_length=256, pattern=_ID_PATTERN)
    waiting_party: WaitingParty
    context: AnyContext = Field(description="Everything the decision-maker is shown.")
    status: EscalationStatus = EscalationStatus.WAITING_FOR_HUMAN
    created_at: AwareDatetime
    deadline: AwareDatetime | None = Field(
        default=None, description="When the default decision applies; set together with default_decision."
    )
    default_decision: AnyResponse | None = None
    decision: AnyResponse | None = Field(default=None, description="The decision applied (once).")
    decided_by: NameRef | None = None
    decided_at: AwareDatetime | None = None
    abort_summary: AbortSummary | None = None
    audit: list[AuditEntry] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Who did what when: parked, deadlines extended, decided (or expired), cleaned up.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> EscalationRecord:
        kind = self.context.kind
        for name, response in (("decision", self.decision), ("default_decision", self.default_decision)):
            if response is not None and response.kind != kind:
                raise ValueError(f"{name} is a {response.kind} answer but the context is a {kind}")
        if (self.deadline is None) != (self.default_decision is None):
            raise ValueError("deadline and default_decision are set together (a deadline needs a default)")
        if self.deadline is not None and self.deadline <= self.created_at:
            raise ValueError("deadline must be later than created_at")
        decided = self.status in DECIDED_STATUSES
        if decided != (self.decision is not None) or decided != (self.decided_at is not None):
            raise ValueError("decision and decided_at are set exactly when the status is RESOLVED or EXPIRED")
        if self.status is EscalationStatus.EXPIRED and self.decision != self.default_decision:
            raise ValueError("an EXPIRED escalation applied its default_decision")
        aborted = self.decision is not None and self.decision.action == "abort"
        if aborted != (self.abort_summary is not None):
            raise ValueError("abort_summary is present exactly when the decision is abort")
        return self

    @property
    def waiting(self) -> bool:
        return self.status is EscalationStatus.WAITING_FOR_HUMAN


def _evolve(record: EscalationRecord, **update: Any) -> EscalationRecord:
    """A copy with `update` applied and the record's invariants checked again."""
    return EscalationRecord.model_validate({**dict(record), **update})


def require_record(record: EscalationRecord | None, escalation_id: str) -> EscalationRecord:
    """The stored record, or NotFound for an unknown escalation id."""
    if record is None:
        raise NotFound(f"no escalation {escalation_id}")
    return record


def park(
    escalation_id: str,
    waiting_party: WaitingParty,
    context: EscalationContext | CheckpointContext,
    *,
    now: datetime,
    who: str = SYSTEM_ACTOR,
    why: str = "",
    deadline: datetime | None = None,
    default_decision: EscalationResponse | CheckpointResponse | None = None,
    existing: EscalationRecord | None = None,
) -> EscalationRecord:
    """A new record WAITING_FOR_HUMAN, with a "parked" audit entry.

    Idempotent: given the record already stored under this id (`existing`), parking again with
    the same waiting party, context, deadline and default returns it unchanged (whatever its
    status: a redelivered park must not reopen a decided escalation); anything different raises
    ConflictingEscalation. `now` and `deadline` are timezone-aware datetimes.
    """
    if existing is not None:
        same = (
            existing.escalation_id == escalation_id
            and existing.waiting_party == waiting_party
            and existing.context == context
            and existing.deadline == deadline
            and existing.default_decision == default_decision
        )
        if not same:
            raise ConflictingEscalation(
                f"escalation {escalation_id} is already parked with a different party, context or deadline"
            )
        return existing
    try:
        return EscalationRecord(
            escalation_id=escalation_id,
            waiting_party=waiting_party,
            context=context,
            created_at=now,
            deadline=deadline,
            default_decision=default_decision,
            audit=[AuditEntry(who=who, when=now, what="parked", why=why)],
        )
    except ValidationError as exc:
        # A request whose parts do not make one record (a deadline without its default, one
        # already past): refused with why, as any invalid request.
        problems = "; ".join(str(error["msg"]) for error in exc.errors()[:5])
        raise InvalidArgument(f"escalation {escalation_id} cannot be parked: {problems}") from None


def _context_step_and_error(context: EscalationContext | CheckpointContext) -> tuple[int, str | None]:
    errors = context.error_history if isinstance(context, EscalationContext) else context.previous_errors
    return context.step, (errors[-1] if errors else None)


def summarize_progress(progress: PartialProgress, stopped_at_step: int | None, reason: str) -> str:
    """A one-line, deterministic account of an abort: what completed, what will not run, where it
    stopped and why."""
    parts = [f"completed: {', '.join(progress.completed) if progress.completed else 'nothing'}"]
    if progress.pending:
        parts.append(f"not run: {', '.join(progress.pending)}")
    if stopped_at_step is not None:
        parts.append(f"stopped at step {stopped_at_step}")
    parts.append(f"reason: {reason}")
    return "; ".join(parts)


def abort_summary(
    record: EscalationRecord,
    *,
    who: str,
    now: datetime,
    reason: str,
    progress: PartialProgress | None = None,
) -> AbortSummary:
    """The summary of an escalation ending in abort (built by `resolve` and `expire`)."""
    progress = progress or PartialProgress()
    step, last_error = _context_step_and_error(record.context)
    return AbortSummary(
        escalation_id=record.escalation_id,
        waiting_party=record.waiting_party,
        aborted_by=who,
        aborted_at=now,
        reason=reason,
        stopped_at_step=step,
        last_error=last_error,
        progress=progress,
        progress_summary=summarize_progress(progress, step, reason),
    )


def _apply(
    record: EscalationRecord,
    response: EscalationResponse | CheckpointResponse,
    *,
    status: EscalationStatus,
    who: str,
    what: str,
    why: str,
    now: datetime,
    progress: PartialProgress | None,
) -> EscalationRecord:
    summary = None
    if response.action == "abort":
        reason = why.strip() or (response.guidance or "").strip() or f"aborted by {who}"
        summary = abort_summary(record, who=who, now=now, reason=reason, progress=progress)
    return _evolve(
        record,
        status=status,
        decision=response,
        decided_by=who,
        decided_at=now,
        abort_summary=summary,
        audit=[*record.audit, AuditEntry(who=who, when=now, what=what, why=why)],
    )


def resolve(
    record: EscalationRecord,
    response: EscalationResponse | CheckpointResponse,
    who: str,
    why: str,
    now: datetime,
    *,
    progress: PartialProgress | None = None,
) -> EscalationRecord:
    """Apply a decision, exactly once: WAITING_FOR_HUMAN -> RESOLVED, with an audit entry.

    Raises AgentNotWaiting when the record was already resolved or expired (also for the same
    decision delivered twice: the caller decides whether that is harmless), and InvalidDecision
    when the answer's kind does not match the context (checkpoint vs escalation). A decision that
    arrives after the deadline but before `expire` ran is still applied: a person's answer wins
    over the default until the default has actually been applied. An abort also builds the
    record's AbortSummary from `progress` (what the waiting party reported, if anything).
    """
    if not record.waiting:
        raise AgentNotWaiting(
            f"escalation {record.escalation_id} is {record.status}, not waiting for a decision"
        )
    if response.kind != record.context.kind:
        raise InvalidDecision(
            f"escalation {record.escalation_id} waits for a {record.context.kind} answer, "
            f"got a {response.kind} answer"
        )
    return _apply(
        record,
        response,
        status=EscalationStatus.RESOLVED,
        who=who,
        what=f"resolved: {response.action}",
        why=why,
        now=now,
        progress=progress,
    )


def is_overdue(record: EscalationRecord, now: datetime) -> bool:
    """Whether the record still waits and its deadline is reached (now >= deadline)."""
    _check_aware(now)
    return record.waiting and record.deadline is not None and now >= record.deadline


def expire(
    record: EscalationRecord,
    now: datetime,
    *,
    who: str = SYSTEM_ACTOR,
    progress: PartialProgress | None = None,
) -> EscalationRecord:
    """Apply the default decision if the deadline is reached: WAITING_FOR_HUMAN -> EXPIRED.

    A no-op (the same record is returned) when there is no deadline, it is not reached yet, or
    the record was already decided, so a late or repeated deadline reminder is harmless. The
    deadline counts as passed from the deadline instant itself (now >= deadline), so a reminder
    firing exactly on time applies the default.
    """
    if not is_overdue(record, now):
        return record
    default, deadline = record.default_decision, record.deadline
    if default is None or deadline is None:  # unreachable: is_overdue needs a deadline, which needs a default
        return record
    return _apply(
        record,
        default,
        status=EscalationStatus.EXPIRED,
        who=who,
        what=f"expired: default {default.action} applied",
        why=f"deadline {deadline.isoformat()} passed without a decision",
        now=now,
        progress=progress,
    )


def extend_deadline(
    record: EscalationRecord, deadline: datetime, *, who: str, why: str, now: datetime
) -> EscalationRecord:
    """Move a waiting escalation's deadline later (its default decision unchanged), with an
    audit entry. Raises AgentNotWaiting once it is decided, and IllegalTransition when it has
    no deadline (a deadline needs a default decision, set at park), when `deadline` is not
    later than both the current one and `now`, or when its audit trail is full."""
    _check_aware(now)
    if not record.waiting:
        raise AgentNotWaiting(
            f"escalation {record.escalation_id} is {record.status}, not waiting for a decision"
        )
    if record.deadline is None:
        raise IllegalTransition(
            f"escalation {record.escalation_id} has no deadline to extend (it waits until decided)"
        )
    if deadline <= record.deadline or deadline <= now:
        raise IllegalTransition(
            f"the new deadline {deadline.isoformat()} is not later than the current one "
            f"({record.deadline.isoformat()}) and now"
        )
    if len(record.audit) >= MAX_ITEMS - 2:  # room is kept for the decision and a cleanup
        raise IllegalTransition(f"escalation {record.escalation_id} has had its deadline moved too often")
    entry = AuditEntry(who=who, when=now, what=f"deadline extended to {deadline.isoformat()}", why=why)
    return _evolve(record, deadline=deadline, audit=[*record.audit, entry])


CLEANUP_COMPLETED = "cleanup completed"


def complete_cleanup(
    record: EscalationRecord,
    *,
    who: str,
    now: datetime,
    progress: PartialProgress | None = None,
    progress_summary: str | None = None,
) -> EscalationRecord:
    """Record that the aborted party finished its cleanup (saved partial progress, documented
    what completed). `progress` replaces the progress known at abort time; `progress_summary`
    replaces the generated summary (otherwise it is regenerated from the progress). Repeating it
    is harmless: the repeat's audit entry replaces the earlier cleanup's, so the trail keeps one.
    Raises IllegalTransition when the escalation did not end in abort."""
    summary = record.abort_summary
    if summary is None:
        raise IllegalTransition(
            f"escalation {record.escalation_id} did not end in abort; nothing to clean up"
        )
    new_progress = progress or summary.progress
    text = _blank_to_none(progress_summary) or summarize_progress(
        new_progress, summary.stopped_at_step, summary.reason
    )
    updated = summary.model_copy(
        update={"progress": new_progress, "progress_summary": text, "cleanup_completed": True}
    )
    entry = AuditEntry(who=who, when=now, what=CLEANUP_COMPLETED, why=text)
    earlier = [e for e in record.audit if e.what != CLEANUP_COMPLETED]
    return _evolve(record, abort_summary=updated, audit=[*earlier, entry])
