"""The task lifecycle: which status may follow which, and what an outcome makes of a task.

    PENDING ─► BIDDING ─► ALLOCATED ─► COMPLETED | FAILED | PARTIAL
       │          │   ▲
       │          ▼   │
       │        QUEUED ─┐
       └──────────┴─────┴► REJECTED

A decision is recorded in one step (`allocate`): the bids, the scores and the winner are one
`AllocationResult`, and a task still PENDING passes through BIDDING in its history on the way
(bidding is the allocator's work between the posting and the decision).

PENDING → REJECTED covers tasks refused before any bid was asked for (no capable agent).

An award never gives an agent more runs than its profile's `max_concurrent_runs`
(`agora.core.capacity`): the board claims a run slot of the winner before it commits the award,
and of the next eligible bidder when that one is full (`full`, the bidders known to be full,
are passed over wherever an award is chosen). A task whose eligible bidders are all full waits
QUEUED, with the reason (`QueueWait`), and is ALLOCATED when one of them frees a slot, or
REJECTED when its deadline passes first (`queue_deadline_passed`) or a person cancels it.
PARTIAL exists only for tasks with `allow_partial`; otherwise a partial outcome is FAILED.

An award must be acknowledged by the winning agent's runtime within the acknowledgment window
(`ack_window_seconds`). An award nobody acknowledges passes to the next-best eligible bid
(`expire_award`); when none is left the task FAILS with the reason.

A task's `deadline_ms` is the wall-clock budget of each run of it (`run_deadline`): a run still
going at its deadline is stopped by the agent's runtime, and its outcome is FAILED, its summary
naming `DEADLINE_EXCEEDED` (`DeadlineExceeded`), with what the run spent so far.

A person may cancel a task that has not ended (`cancel`): one not decided yet is REJECTED, one an
agent holds FAILS without an outcome (its award's token is void, the agent's runtime is told to
stop the run); either way its reason reads `CANCELLED by <who>: <why>`, and a decision or outcome
that comes later is not recorded.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, Field

from agora.core.acceptance import (
    DEFAULT_DISPUTE_WINDOW_S,
    AskedCheck,
    BoardCheck,
    CheckerApp,
    Dispute,
    DisputeVerdict,
    JudgeCheck,
    OnFailedCheck,
    PublisherCheck,
    Verdict,
    VerdictStatus,
    judge_output,
    standing_verdict,
)
from agora.core.capacity import (
    DEFAULT_MAX_CONCURRENT_RUNS,
    MAX_BIDDERS_WAITED_ON,
    QueueWait,
    RunsView,
    full_reason,
)
from agora.core.checks import ValidationResult
from agora.core.errors import (
    AgoraError,
    ConflictingTask,
    Forbidden,
    IllegalTransition,
    InvalidArgument,
    InvalidOutcome,
    error_table,
)
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.escalation.record import ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.limits import MAX_CANDIDATES, MAX_NOTE_CHARS, Identifier, Name, Note
from agora.core.market import AllocationResult, AllocationStatus, BidScore, TaskOutcome, TaskSpec

S = AllocationStatus

DEFAULT_ACK_SECONDS = 30.0
"""How long a winning agent's runtime has to acknowledge an award, unless the task's own
`deadline_ms` is shorter."""
MAX_ACK_SECONDS = 86_400.0
"""The longest acknowledgment window a task board may be set to (a day)."""


class NotDisputable(AgoraError):
    """A dispute of a task that has no outcome to dispute, whose window has passed, or that was
    disputed already (a task's outcome is disputed once)."""

    code = "NOT_DISPUTABLE"
    http_status = 409


class AwardNotHeld(AgoraError):
    """An acknowledgment or outcome from an agent that does not hold the task's award (never
    won it, lost it when its acknowledgment window ran out, or presented the wrong token)."""

    code = "AWARD_NOT_HELD"
    http_status = 409


class DeadlineExceeded(AgoraError):
    """A task's run was still going at the task's deadline (`deadline_ms` after its award): it
    was stopped, and its outcome is FAILED with what the run spent until then."""

    code = "DEADLINE_EXCEEDED"
    http_status = 504


class TaskNotCancellable(AgoraError):
    """A task that has ended cannot be cancelled (its record keeps how it ended)."""

    code = "TASK_ENDED"
    http_status = 409


class Cancellation(BaseModel):
    """Who cancelled a task, when and why."""

    by: Name
    reason: Note = ""
    at: datetime

    @property
    def summary(self) -> str:
        """The task's failure or rejection reason: `CANCELLED by <who>: <why>`."""
        return f"CANCELLED by {self.by}" + (f": {self.reason}" if self.reason else "")


MAX_RUN_DEADLINE = timedelta(days=3650)
"""The furthest a run's deadline is set from its award: `deadline_ms` has no upper bound of its
own, and a date past the calendar's end cannot be computed (ten years is no deadline at all in
practice)."""


MAX_PROGRESS_NOTES = 50
"""Progress notes kept per award: a run that says more keeps its first ones (a task's history
only grows at its end, so none is dropped later)."""


class ProgressMade(BaseModel):
    """One progress note of the agent holding the award, as the board keeps it."""

    at: datetime
    text: Note


class AwardAttempt(BaseModel):
    """One agent's turn at a task: awarded, then acknowledged by its runtime or expired."""

    agent_id: Identifier
    awarded_at: datetime
    acknowledged_at: datetime | None = None
    expired_at: datetime | None = None
    handed_over_by: Note | None = None
    """Who had the agent give the task up for another bidder (a person's reassignment)."""
    progress: list[ProgressMade] = Field(default_factory=list, max_length=MAX_PROGRESS_NOTES)
    """What the agent said of its progress during this turn, in order (the first
    `MAX_PROGRESS_NOTES`; later ones are not kept)."""
    outcome: TaskOutcome | None = Field(default=None, exclude_if=lambda outcome: outcome is None)
    """The turn's outcome, kept here when its check failed and the task passed to the next bid
    (`on_failure: next_bid`); the task's own `outcome` is its last turn's."""
    verdict: Verdict | None = Field(default=None, exclude_if=lambda verdict: verdict is None)
    """The failed verdict of that outcome."""


LEGAL_TRANSITIONS: dict[AllocationStatus, frozenset[AllocationStatus]] = {
    S.PENDING: frozenset({S.BIDDING, S.REJECTED}),
    S.BIDDING: frozenset({S.ALLOCATED, S.QUEUED, S.REJECTED}),
    S.QUEUED: frozenset({S.ALLOCATED, S.REJECTED}),
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
    allocation: AllocationResult | None = None
    """The decision with every bid and score (`all_bids`, `all_scores`)."""
    outcome: TaskOutcome | None = None
    history: list[StatusChange] = Field(
        default_factory=lambda: [StatusChange(status=AllocationStatus.PENDING)],
        # The lifecycle only moves forward, so each status appears at most once.
        max_length=len(AllocationStatus),
    )
    award_published: bool = False
    """Whether the current award/rejection event went out (resumption republishes if not)."""
    awards: list[AwardAttempt] = Field(default_factory=list, max_length=MAX_CANDIDATES)
    """Every agent the task was awarded to, in order; the last one holds it (one per eligible
    bid at most, and a task gets at most `MAX_CANDIDATES` bids)."""
    failure_reason: Note | None = None
    """Why the task FAILED without an outcome (no agent acknowledged its award, or it was
    cancelled), or with one its check failed (`check_failure_reason`)."""
    cancellation: Cancellation | None = None
    """Set when a person cancelled the task (`cancel`)."""
    verdict: Verdict | None = None
    """What the task's check found of its outcome, beside the agent's own claim
    (`outcome.actual_success`); None when the task has no check the board runs. A dispute
    replaces it (`dispute`), keeping the one before in the dispute."""
    dispute: Dispute | None = None
    """The publisher's dispute of the outcome, once, within the task's dispute window."""
    queued: QueueWait | None = Field(default=None, exclude_if=lambda wait: wait is None)
    """Why and since when the task waited for a run slot (kept once it was awarded one)."""

    @property
    def current_award(self) -> AwardAttempt | None:
        return self.awards[-1] if self.awards and self.status is AllocationStatus.ALLOCATED else None

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


def allocate(
    record: TaskRecord,
    result: AllocationResult,
    now: datetime | None = None,
    *,
    full: Mapping[str, RunsView] | None = None,
) -> TaskRecord:
    """The task as the market's decision leaves it. An award goes to the best eligible bidder
    not in `full` (the bidders whose run slots are all taken, with their runs); when every
    eligible bidder is full the task is QUEUED with the reason. A task already QUEUED takes
    any decision afresh (a slot freed, or new bids)."""
    queued = record.status is AllocationStatus.QUEUED
    if not queued and record.allocation is not None and record.allocation.status == result.status:
        return record  # the same decision delivered again
    if record.cancellation is not None:
        return record  # the market decided after a person cancelled the task: too late
    if result.task_id != record.task_id or any(b.task_id != record.task_id for b in result.all_bids):
        raise InvalidOutcome(f"the allocation is for another task than {record.task_id}")
    at = now or _now()
    if result.status is AllocationStatus.ALLOCATED and full:
        chosen = next_best(result, set(), full)
        if chosen is None:
            return _queued(record, result, full, at)
        result = won_by(result, chosen)
    if queued:
        moved = move(record, result.status)
    else:
        bid_for = result.status is AllocationStatus.ALLOCATED or bool(result.all_bids)
        if record.status is AllocationStatus.PENDING and bid_for:
            record = move(record, AllocationStatus.BIDDING)
        moved = move(record, result.status)
    update: dict[str, object] = {"allocation": result}
    if result.winning_agent_id is not None:
        update["awards"] = [AwardAttempt(agent_id=result.winning_agent_id, awarded_at=at)]
    return moved.model_copy(update=update)


def run_limit(allocation: AllocationResult, agent_id: str) -> int:
    """The runs `agent_id` takes at once, as its profile said when the task was allocated."""
    return allocation.run_limits.get(agent_id, DEFAULT_MAX_CONCURRENT_RUNS)


def won_by(allocation: AllocationResult, score: BidScore) -> AllocationResult:
    """The allocation with `score`'s agent as its winner."""
    bid = next(b for b in allocation.all_bids if b.agent_id == score.agent_id)
    return allocation.model_copy(
        update={"winning_agent_id": score.agent_id, "winning_bid": bid, "winning_score": score}
    )


def _queued(
    record: TaskRecord, result: AllocationResult, full: Mapping[str, RunsView], now: datetime
) -> TaskRecord:
    capable = sum(1 for s in result.all_scores if s.final_score >= 0.0)
    reason = full_reason(capable, dict(full))
    waiting_on = list(full)[:MAX_BIDDERS_WAITED_ON]
    if record.status is AllocationStatus.QUEUED:
        assert record.queued is not None
        wait = record.queued.model_copy(
            update={"reason": reason, "waiting_on": waiting_on, "tries": record.queued.tries + 1}
        )
        return record.model_copy(update={"allocation": result, "queued": wait})
    if record.status is AllocationStatus.PENDING:
        record = move(record, AllocationStatus.BIDDING)
    moved = move(record, AllocationStatus.QUEUED)
    wait = QueueWait(since=now, reason=reason, waiting_on=waiting_on)
    return moved.model_copy(update={"allocation": result, "queued": wait})


def queue_deadline(record: TaskRecord) -> datetime | None:
    """When a task waiting for a run slot gives up: its `deadline_ms` after it was posted."""
    if record.spec.deadline_ms is None:
        return None
    return record.history[0].at + timedelta(milliseconds=record.spec.deadline_ms)


def queue_deadline_passed(record: TaskRecord, now: datetime) -> TaskRecord:
    """A task still QUEUED at its deadline is REJECTED, saying how long it waited and for whom;
    unchanged otherwise."""
    deadline = queue_deadline(record)
    if record.status is not AllocationStatus.QUEUED or deadline is None or now < deadline:
        return record
    assert record.queued is not None and record.allocation is not None
    waited = (now - record.queued.since).total_seconds()
    reason = (
        f"{deadline_exceeded(record.spec).code}: waited {waited:.0f} s for a run slot until its "
        f"deadline; {record.queued.reason}"
    )
    rejected = record.allocation.model_copy(
        update={
            "status": AllocationStatus.REJECTED,
            "winning_agent_id": None,
            "winning_bid": None,
            "winning_score": None,
            "reject_reason": reason[:MAX_NOTE_CHARS],
        }
    )
    return move(record, AllocationStatus.REJECTED).model_copy(
        update={"allocation": rejected, "award_published": False}
    )


def ack_window_seconds(spec: TaskSpec, default_seconds: float = DEFAULT_ACK_SECONDS) -> float:
    """The acknowledgment window: the default, or the task's deadline when that is shorter (a
    run that cannot be taken up within its deadline is of no use; the run itself is bounded by
    `run_deadline`)."""
    if spec.deadline_ms is not None:
        return min(default_seconds, spec.deadline_ms / 1000)
    return default_seconds


def run_deadline(spec: TaskSpec, awarded_at: datetime) -> datetime | None:
    """When the run of an award of the task must have ended: `deadline_ms` after the award
    (None: the task has no deadline).

    The reference gives `deadline_ms` as the task's "wall-clock budget" beside `budget_usd`,
    its hard cost cap: both bound what the task's owner accepts of a run, and an award's run
    gets the whole cost budget, so it gets the whole time budget too. It counts from the award,
    not from the task's posting: the market's own time before it (bids asked, a decision queued
    behind others) is not the run's, no agent could answer for it, and the agent bid on having
    the whole budget. The board counts the award's acknowledgment window from the same instant,
    and every award carries it (`awarded_at`), so a runtime needs no read of the board to know
    its deadline. An award passed on to the next-best bid is a new run with a budget of its own,
    as it has a cost budget of its own."""
    if spec.deadline_ms is None:
        return None
    longest_ms = MAX_RUN_DEADLINE // timedelta(milliseconds=1)
    return awarded_at + timedelta(milliseconds=min(spec.deadline_ms, longest_ms))


def deadline_exceeded(spec: TaskSpec) -> DeadlineExceeded:
    """Why a run still going at its deadline was stopped."""
    return DeadlineExceeded(
        f"the run was still going at its deadline, {spec.deadline_ms} ms after its award; it was stopped",
        deadline_ms=spec.deadline_ms,
    )


def failure_summary(error: AgoraError) -> str:
    """The summary of an outcome whose run ended on an error: the error's code, then its message
    (`BUDGET_EXCEEDED: ...`, `DEADLINE_EXCEEDED: ...`), as `failure_code` reads it back."""
    return f"{error.code}: {error.message}"


def failure_code(outcome: TaskOutcome) -> str | None:
    """The error a failed outcome names as what ended its run (`failure_summary`: the code of a
    known error, then its message), or None: the outcome succeeded, is partial, or failed for a
    reason of the agent's own."""
    if outcome.actual_success or outcome.partial:
        return None
    code, colon, _ = outcome.summary.partition(":")
    return code if colon and code in error_table() else None


def check_award(record: TaskRecord, agent_id: str) -> AwardAttempt:
    """The award `agent_id` holds (its latest turn, not passed on); refused otherwise."""
    holder = record.awards[-1] if record.awards else None
    if holder is None or holder.agent_id != agent_id or holder.expired_at is not None:
        raise AwardNotHeld(f"task {record.task_id} is not awarded to {agent_id}")
    return holder


def acknowledge(record: TaskRecord, agent_id: str, now: datetime) -> TaskRecord:
    """The winning agent's runtime took the award. Idempotent; an agent that does not hold the
    award is refused."""
    holder = check_award(record, agent_id)
    if holder.acknowledged_at is not None or record.status is not AllocationStatus.ALLOCATED:
        return record
    acknowledged = holder.model_copy(update={"acknowledged_at": now})
    # An acknowledged award went out, whatever the record knew of its publish.
    return record.model_copy(update={"awards": [*record.awards[:-1], acknowledged], "award_published": True})


def note_progress(record: TaskRecord, agent_id: str, text: str, now: datetime) -> TaskRecord:
    """A progress note of the award's holder, kept on its turn while the task runs. A note
    acknowledges the award as an outcome does (its run is under way), so notes always follow
    the acknowledgment in the task's history. A note beyond `MAX_PROGRESS_NOTES` is not kept
    (the record comes back unchanged, or only acknowledged)."""
    if record.status is not AllocationStatus.ALLOCATED:
        raise AwardNotHeld(f"task {record.task_id} is {record.status}: its run has ended")
    taken = acknowledge(record, agent_id, now)
    holder = taken.awards[-1]
    if len(holder.progress) >= MAX_PROGRESS_NOTES:
        return taken
    noted = holder.model_copy(update={"progress": [*holder.progress, ProgressMade(at=now, text=text)]})
    return taken.model_copy(update={"awards": [*taken.awards[:-1], noted]})


def next_best(allocation: AllocationResult, tried: set[str], full: Collection[str] = ()) -> BidScore | None:
    """The best eligible score (final ≥ 0, the rule the award itself used) of an agent not
    tried yet and not `full`; scores are kept best first. None once `MAX_BIDDERS_WAITED_ON`
    bidders were found full: a task waits for its best ones, not for every bidder."""
    if len(full) >= MAX_BIDDERS_WAITED_ON:
        return None
    return next(
        (
            s
            for s in allocation.all_scores
            if s.final_score >= 0.0 and s.agent_id not in tried and s.agent_id not in full
        ),
        None,
    )


def expire_award(record: TaskRecord, now: datetime, full: Collection[str] = ()) -> TaskRecord:
    """The acknowledgment window of the current award ran out: award the next-best eligible
    bid with a free run slot, or FAIL the task with the reason. Unchanged when the award was
    acknowledged (or the task moved on) in the meantime."""
    holder = record.current_award
    if holder is None or holder.acknowledged_at is not None or holder.expired_at is not None:
        return record
    assert record.allocation is not None
    expired = holder.model_copy(update={"expired_at": now})
    tried = {attempt.agent_id for attempt in record.awards}
    successor = next_best(record.allocation, tried, full)
    awards = [*record.awards[:-1], expired]
    if successor is None:
        names = ", ".join(a.agent_id for a in awards)
        failed = move(record, AllocationStatus.FAILED)
        reason = f"no agent acknowledged the award in time (tried {names})"
        if full:
            reason += f"; the other bidders had no free run slot ({', '.join(full)})"
        return failed.model_copy(update={"awards": awards, "failure_reason": reason})
    allocation = won_by(record.allocation, successor)
    return record.model_copy(
        update={
            "allocation": allocation,
            "awards": [*awards, AwardAttempt(agent_id=successor.agent_id, awarded_at=now)],
            "award_published": False,
        }
    )


def successor(record: TaskRecord, to_agent: str | None, full: Collection[str] = ()) -> BidScore:
    """Who a reassignment of the task hands it to: `to_agent`, one of the task's bidders other
    than its holder, or without one the next-best eligible bid not tried yet. Refused (with
    why) when the task is not held by an agent that took it, or there is nobody to hand it to."""
    holder = record.current_award
    if holder is None or holder.acknowledged_at is None or record.outcome is not None:
        raise IllegalTransition(
            f"task {record.task_id} is not being run by an agent (it is {record.status}): "
            "only a task an agent took can be handed to another"
        )
    if len(record.awards) >= MAX_CANDIDATES:
        raise IllegalTransition(f"task {record.task_id} was awarded {len(record.awards)} times already")
    assert record.allocation is not None
    if to_agent is not None:
        if to_agent == holder.agent_id:
            raise InvalidArgument(f"task {record.task_id} is already {to_agent}'s")
        scores = record.allocation.all_scores
        named = next((score for score in scores if score.agent_id == to_agent), None)
        if named is None:
            others = ", ".join(score.agent_id for score in scores if score.agent_id != holder.agent_id)
            raise InvalidArgument(
                f"agent {to_agent} did not bid for task {record.task_id}; "
                f"its other bidders: {others or 'none'}"
            )
        if to_agent in full:
            raise InvalidArgument(f"agent {to_agent} has no free run slot now")
        return named
    nearest = next_best(record.allocation, {attempt.agent_id for attempt in record.awards}, full)
    if nearest is None:
        left = f" (the others have no free run slot: {', '.join(full)})" if full else ""
        raise InvalidArgument(f"task {record.task_id} has no eligible bid left that was not tried{left}")
    return nearest


def hand_over(
    record: TaskRecord,
    agent_id: str,
    to_agent: str | None,
    who: str,
    now: datetime,
    full: Collection[str] = (),
) -> TaskRecord:
    """The agent running the task gives it up, as a person decided: the task is awarded to
    `successor`. The same hand-over again (a redelivery, once the task went on) changes nothing."""
    holder = record.current_award
    if (
        holder is not None
        and holder.agent_id != agent_id
        and any(a.agent_id == agent_id and a.handed_over_by is not None for a in record.awards)
    ):
        return record
    if holder is None or holder.agent_id != agent_id:
        raise AwardNotHeld(f"task {record.task_id} is not awarded to {agent_id}")
    if record.outcome is not None:
        raise InvalidOutcome(f"task {record.task_id} has its outcome already; its check is under way")
    chosen = successor(record, to_agent, full)
    assert record.allocation is not None
    allocation = won_by(record.allocation, chosen)
    given_up = holder.model_copy(update={"handed_over_by": who})
    return record.model_copy(
        update={
            "allocation": allocation,
            "awards": [*record.awards[:-1], given_up, AwardAttempt(agent_id=chosen.agent_id, awarded_at=now)],
            "award_published": False,
        }
    )


def cancel(record: TaskRecord, by: str, reason: str, now: datetime) -> TaskRecord:
    """A person cancels the task: one not decided yet is REJECTED (the rejection is the board's
    decision, announced as any), one an agent holds FAILS without an outcome. Cancelling a
    cancelled task changes nothing; an ended one is refused (`TaskNotCancellable`)."""
    if record.cancellation is not None:
        return record
    if record.status in (AllocationStatus.COMPLETED, AllocationStatus.FAILED, AllocationStatus.PARTIAL,
                         AllocationStatus.REJECTED):  # fmt: skip
        raise TaskNotCancellable(
            f"task {record.task_id} has ended ({record.status}); there is nothing to cancel"
        )
    cancellation = Cancellation(by=by, reason=reason, at=now)
    if record.status is AllocationStatus.ALLOCATED:
        failed = move(record, AllocationStatus.FAILED)
        ended = {"cancellation": cancellation, "failure_reason": cancellation.summary}
        return failed.model_copy(update=ended)
    rejected = allocate(
        record,
        AllocationResult(
            task_id=record.task_id, status=AllocationStatus.REJECTED, reject_reason=cancellation.summary
        ),
        now,
    )
    return rejected.model_copy(update={"cancellation": cancellation})


def _now() -> datetime:
    return datetime.now(UTC)


def outcome_status(spec: TaskSpec, outcome: TaskOutcome, verdict: Verdict | None = None) -> AllocationStatus:
    """How the task ended: as the check found, where it passed or failed; else as the agent
    reported (a partial outcome is PARTIAL when the task allows it)."""
    if verdict is not None and verdict.status is VerdictStatus.PASSED:
        return AllocationStatus.COMPLETED
    if verdict is not None and verdict.status is VerdictStatus.FAILED:
        return AllocationStatus.FAILED
    if outcome.actual_success:
        return AllocationStatus.COMPLETED
    if outcome.partial and spec.allow_partial:
        return AllocationStatus.PARTIAL
    return AllocationStatus.FAILED


def counts_as_success(spec: TaskSpec, outcome: TaskOutcome, verdict: Verdict | None = None) -> bool:
    return outcome_status(spec, outcome, verdict) is not AllocationStatus.FAILED


CHECKED_BY_THE_BOARD = "taskboard"
"""Who ran a check the task board runs itself (its app id)."""


def verdict_on(spec: TaskSpec, outcome: TaskOutcome, now: datetime) -> Verdict | None:
    """The verdict of the task's own check on the outcome's output, where the board runs it
    itself (an output schema, an expected answer, the publisher's standing word:
    `standing_verdict`); None when the task has no such check. A run
    that ended on an error of the market's (its deadline, its budget) is no answer to check: its
    failure stands as reported."""
    acceptance = spec.acceptance
    if acceptance is None or failure_code(outcome) is not None:
        return None
    if isinstance(acceptance.check, PublisherCheck):
        window = acceptance.dispute_window_s
        return standing_verdict(outcome.actual_success, window, now, CHECKED_BY_THE_BOARD)
    if not isinstance(acceptance.check, BoardCheck):
        return None
    verdict = judge_output(acceptance.check, outcome.summary, CHECKED_BY_THE_BOARD)
    return verdict.model_copy(update={"at": now})


def asked_check_of(spec: TaskSpec, outcome: TaskOutcome) -> AskedCheck | None:
    """The checker app or judge to ask about the outcome before the task ends; None when the
    task names neither, or the run ended on the market's own error (nothing to check)."""
    acceptance = spec.acceptance
    if acceptance is None or not isinstance(acceptance.check, AskedCheck):
        return None
    return acceptance.check if failure_code(outcome) is None else None


def awaiting_verdict(record: TaskRecord) -> bool:
    """Whether the outcome is recorded and the task waits for its checker app's or judge's
    verdict."""
    return (
        record.status is AllocationStatus.ALLOCATED and record.outcome is not None and record.verdict is None
    )


def awaiting_person(record: TaskRecord) -> bool:
    """Whether the task's check failed its outcome and the task waits for a person to decide
    what follows (`on_failure: person`)."""
    return (
        record.status is AllocationStatus.ALLOCATED
        and record.outcome is not None
        and record.verdict is not None
        and record.verdict.status is VerdictStatus.FAILED
    )


CHECK_ESCALATION_PREFIX = "check-"


def check_escalation_id(record: TaskRecord) -> str:
    """The escalation a person decides a failed check of the task's current turn in:
    `check-<task>.<turn>`, one per turn."""
    return f"{CHECK_ESCALATION_PREFIX}{record.task_id}.{len(record.awards)}"


PERSON_VERDICT = "person"
"""A verdict's kind when a person accepted an output its check failed."""

PERSON_ACTIONS = (EscalationAction.SKIP, EscalationAction.ABORT, EscalationAction.REASSIGN)
"""What a person may answer a failed check with: accept the output, fail the task, hand it to
another bidder."""


def check_person_action(action: EscalationAction) -> None:
    """Refused, saying what fits, unless `action` answers a failed check."""
    if action not in PERSON_ACTIONS:
        raise InvalidArgument(
            f"a failed check is answered with skip (accept the output all the same), abort (the task "
            f"fails) or reassign (another bidder takes it), not {action}"
        )


def person_park_request(record: TaskRecord) -> ParkRequest:
    """The escalation a failed check waits in (`on_failure: person`): the task, the output and
    the check's reason, for a person to decide on. The same record gives the same request, so
    parking it again is the same escalation."""
    assert record.outcome is not None and record.verdict is not None
    verdict = record.verdict
    context = EscalationContext(
        job_id=record.task_id,
        step=len(record.awards),
        validation_results=[
            ValidationResult(
                kind="acceptance",
                subject=verdict.kind,
                passed=False,
                detail=f"checked by {verdict.checked_by}",
                failure_reason=verdict.reason,
            )
        ],
        confidence=verdict.confidence if verdict.confidence is not None else 0.0,
        retry_count=len(record.awards) - 1,
        error_history=[check_failure_reason(verdict)],
        prompt_used=record.spec.description,
        output_summary=record.outcome.summary or "(no output)",
    )
    who = record.outcome.agent_id
    return ParkRequest(
        waiting_party=WaitingParty(kind=WaitingPartyKind.TASK, id=record.task_id),
        context=context,
        who=CHECKED_BY_THE_BOARD,
        why=f"the {verdict.kind} check failed {who}'s output: skip accepts it, abort fails the task, "
        "reassign hands it to another bidder"[:MAX_NOTE_CHARS],
    )


def person_decided(
    record: TaskRecord,
    decision: EscalationResponse,
    by: str,
    why: str,
    now: datetime,
    full: Collection[str] = (),
) -> TaskRecord:
    """The task as a person's decision on its failed check leaves it: `skip` COMPLETES it on
    the person's word (a passed verdict of kind `person`, naming who, why and the check that
    failed), `abort` FAILS it with the check's reason, `reassign` passes it to the named bidder
    or the next-best bid not tried yet, within the task's budget and deadline (else FAILED with
    why). A task that no longer waits for a person is left as it is; an action that answers no
    failed check (retry, modify_prompt) fails it as abort does, saying so."""
    if not awaiting_person(record):
        return record
    assert record.verdict is not None and record.outcome is not None
    failed = record.verdict
    if decision.action is EscalationAction.SKIP:
        accepted = Verdict(
            status=VerdictStatus.PASSED,
            kind=PERSON_VERDICT,
            reason=f"accepted by {by} though the {failed.kind} check failed ({failed.reason}): {why}"[
                :MAX_NOTE_CHARS
            ],
            checked_by=CHECKED_BY_THE_BOARD,
            at=now,
        )
        return move(record, AllocationStatus.COMPLETED).model_copy(update={"verdict": accepted})
    if decision.action is EscalationAction.REASSIGN:
        passed = _pass_to(record, failed, now, decision.reassign_to, full)
        if passed is not None:
            return passed
        slot = " with a free run slot" if full else ""
        why = f"{why}; no bid could take it over within its budget and deadline{slot}"
    elif decision.action is not EscalationAction.ABORT:
        why = f"{why}; {decision.action} answers no failed check, so the task fails"
    reason = f"{check_failure_reason(failed)}; {by} decided: {why}"[:MAX_NOTE_CHARS]
    return move(record, AllocationStatus.FAILED).model_copy(update={"failure_reason": reason})


def asked_verdict(
    check: AskedCheck, passed: bool, reason: str, now: datetime, confidence: float | None = None
) -> Verdict:
    """What the checker app or the judge answered, as the verdict of its check: signed by the
    checker app, or by the board whose model judged (with the judge's confidence)."""
    return Verdict(
        status=VerdictStatus.PASSED if passed else VerdictStatus.FAILED,
        kind=check.kind,
        reason=reason[:MAX_NOTE_CHARS],
        checked_by=check.app_id if isinstance(check, CheckerApp) else CHECKED_BY_THE_BOARD,
        at=now,
        confidence=confidence if isinstance(check, JudgeCheck) else None,
    )


def unchecked(check: AskedCheck, why: str, now: datetime) -> Verdict:
    """A check that could not be carried out: the outcome stays unchecked, with the reason."""
    who = f"checker app {check.app_id}" if isinstance(check, CheckerApp) else "the judge"
    return Verdict(
        status=VerdictStatus.UNCHECKED,
        kind=check.kind,
        reason=f"{who}: {why}"[:MAX_NOTE_CHARS],
        checked_by=CHECKED_BY_THE_BOARD,
        at=now,
    )


def apply_verdict(
    record: TaskRecord, verdict: Verdict, now: datetime, full: Collection[str] = ()
) -> TaskRecord:
    """The task ends as its checker app's or judge's verdict says (`ended_as_checked`). A task
    that no longer waits for one (a person cancelled it meanwhile, or the verdict was applied
    before) is left as it is."""
    if not awaiting_verdict(record):
        return record
    return ended_as_checked(record, verdict, now, full)


def ended_as_checked(
    record: TaskRecord, verdict: Verdict | None, now: datetime, full: Collection[str] = ()
) -> TaskRecord:
    """The task, its outcome recorded, as its verdict leaves it: ended (`outcome_status`), or,
    when the check failed and the task says `on_failure: next_bid`, passed to the next bid
    (`passed_on`) where one is left within the task's budget and deadline."""
    assert record.outcome is not None
    if verdict is not None and verdict.status is VerdictStatus.FAILED:
        acceptance = record.spec.acceptance
        if acceptance is not None and acceptance.on_failure is OnFailedCheck.PERSON:
            return record.model_copy(update={"verdict": verdict})  # `awaiting_person`
        passed = passed_on(record, verdict, now, full)
        if passed is not None:
            return passed
    moved = move(record, outcome_status(record.spec, record.outcome, verdict))
    update: dict[str, object] = {"verdict": verdict}
    if verdict is not None and verdict.status is VerdictStatus.FAILED:
        update["failure_reason"] = check_failure_reason(verdict)
    return moved.model_copy(update=update)


def passed_on(
    record: TaskRecord, verdict: Verdict, now: datetime, full: Collection[str] = ()
) -> TaskRecord | None:
    """The task passed to the next-best bid not tried yet after its check failed the current
    turn's outcome, when the task says `on_failure: next_bid` (`_pass_to`); None otherwise."""
    acceptance = record.spec.acceptance
    if acceptance is None or acceptance.on_failure is not OnFailedCheck.NEXT_BID:
        return None
    return _pass_to(record, verdict, now, None, full)


def next_turn_for(record: TaskRecord, to_agent: str | None, full: Collection[str] = ()) -> BidScore:
    """Who takes the task over after its check failed: `to_agent`, a bidder not tried yet, or
    without one the next-best eligible bid not tried yet; refused with why otherwise."""
    assert record.allocation is not None
    tried = {attempt.agent_id for attempt in record.awards}
    if to_agent is None:
        nearest = next_best(record.allocation, tried, full)
        if nearest is None:
            raise InvalidArgument(f"task {record.task_id} has no eligible bid left that was not tried")
        return nearest
    named = next((s for s in record.allocation.all_scores if s.agent_id == to_agent), None)
    if named is None or to_agent in tried or to_agent in full:
        untried = ", ".join(s.agent_id for s in record.allocation.all_scores if s.agent_id not in tried)
        raise InvalidArgument(
            f"agent {to_agent} is no bidder of task {record.task_id} that was not tried; "
            f"those left: {untried or 'none'}"
        )
    return named


def _pass_to(
    record: TaskRecord,
    verdict: Verdict,
    now: datetime,
    to_agent: str | None = None,
    full: Collection[str] = (),
) -> TaskRecord | None:
    """The task passed to `to_agent` (or the next-best bid not tried yet) after its check
    failed the current turn's outcome (kept on that turn, with the verdict); None when no such
    bid is left, the budget would not cover its estimate on top of what the turns so far cost,
    or the deadline (from the first award) has passed."""
    assert record.allocation is not None and record.outcome is not None and record.awards
    if len(record.awards) >= MAX_CANDIDATES:
        return None
    try:
        nearest = next_turn_for(record, to_agent, full)
    except InvalidArgument:
        return None
    bid = next(b for b in record.allocation.all_bids if b.agent_id == nearest.agent_id)
    spent = record.outcome.actual_cost_usd + sum(
        turn.outcome.actual_cost_usd for turn in record.awards if turn.outcome is not None
    )
    budget = record.spec.budget_usd
    if budget is not None and spent + bid.estimated_cost_usd > budget:
        return None
    deadline = run_deadline(record.spec, record.awards[0].awarded_at)
    if deadline is not None and now >= deadline:
        return None
    checked = record.awards[-1].model_copy(update={"outcome": record.outcome, "verdict": verdict})
    allocation = won_by(record.allocation, nearest)
    return record.model_copy(
        update={
            "allocation": allocation,
            "awards": [*record.awards[:-1], checked, AwardAttempt(agent_id=nearest.agent_id, awarded_at=now)],
            "outcome": None,
            "verdict": None,
            "award_published": False,
        }
    )


def turn_of(record: TaskRecord, outcome: TaskOutcome) -> AwardAttempt | None:
    """The earlier turn whose outcome this is (a redelivery of an outcome the task passed on
    from), if any."""
    earlier = (turn for turn in record.awards if turn.outcome is not None and turn.outcome == outcome)
    return next(earlier, None)


def was_passed_on(before: TaskRecord, after: TaskRecord) -> bool:
    """Whether a change passed the task to the next bid after a failed check."""
    return len(after.awards) > len(before.awards) and after.awards[-2].outcome is not None


def check_failure_reason(verdict: Verdict) -> str:
    """A task that failed its check: why, as its record says."""
    return f"CHECK_FAILED: the {verdict.kind} check by {verdict.checked_by} failed: {verdict.reason}"[
        :MAX_NOTE_CHARS
    ]


def record_outcome(
    record: TaskRecord, outcome: TaskOutcome, now: datetime, full: Collection[str] = ()
) -> TaskRecord:
    """The task's end as its award's holder reports it (once). The outcome acknowledges an
    award that was not acknowledged yet: a run that ends within the acknowledgment window
    needs no acknowledgment of its own."""
    if record.outcome is not None:
        if record.outcome == outcome:
            return record
        raise InvalidOutcome(f"task {record.task_id} already has an outcome")
    if turn_of(record, outcome) is not None:
        return record  # an earlier turn's, which the task passed on from
    winner = record.allocation.winning_agent_id if record.allocation else None
    if outcome.agent_id != winner or record.status is not AllocationStatus.ALLOCATED:
        raise AwardNotHeld(
            f"task {record.task_id} is not awarded to {outcome.agent_id} (it is {record.status})"
        )
    taken = acknowledge(record, outcome.agent_id, now)
    if asked_check_of(record.spec, outcome) is not None:
        # Recorded, and the task ends when its checker app's or judge's verdict is in
        # (`apply_verdict`).
        return taken.model_copy(update={"outcome": outcome, "award_published": True})
    # An outcome proves the award reached the worker, even if recording that was cut short.
    recorded = taken.model_copy(update={"outcome": outcome, "award_published": True})
    return ended_as_checked(recorded, verdict_on(record.spec, outcome, now), now, full)


DISPUTED_BY_THE_PUBLISHER = "dispute"
"""A verdict's kind when a dispute set it."""


def dispute_window_seconds(spec: TaskSpec) -> int:
    return spec.acceptance.dispute_window_s if spec.acceptance is not None else DEFAULT_DISPUTE_WINDOW_S


def ended_at(record: TaskRecord) -> datetime:
    """When the task reached its end (its last status change)."""
    return record.history[-1].at


def check_app_dispute(record: TaskRecord, app_id: str, by: str) -> None:
    """An app (not a person's tool) may dispute only a task that answers to it (its `reply_to`:
    the app that published it and waits for its end), and only in its own name; refused with
    why otherwise."""
    if record.spec.reply_to != app_id:
        answers_to = record.spec.reply_to or "no app"
        raise Forbidden(
            f"app {app_id} may dispute only the tasks that answer to it (reply_to); "
            f"task {record.task_id} answers to {answers_to}"
        )
    if by != app_id:
        raise Forbidden(f"an app disputes in its own name: disputed_by must be {app_id}, not {by}")


def dispute(record: TaskRecord, by: str, reason: str, verdict: DisputeVerdict, now: datetime) -> TaskRecord:
    """The publisher disputes the task's outcome within its window: the verdict becomes the
    dispute's, the task's end follows it (COMPLETED for passed, FAILED for failed), and the
    dispute is kept with the verdict it replaced. The same dispute again changes nothing; any
    other second dispute, one past the window, or one of a task without an outcome is refused."""
    if record.dispute is not None:
        if record.dispute.by == by and record.dispute.reason == reason and record.dispute.verdict is verdict:
            return record
        raise NotDisputable(f"task {record.task_id} was disputed already, by {record.dispute.by}")
    if record.outcome is None:
        raise NotDisputable(f"task {record.task_id} has no outcome to dispute (it is {record.status})")
    window = dispute_window_seconds(record.spec)
    if now > ended_at(record) + timedelta(seconds=window):
        raise NotDisputable(f"task {record.task_id}'s dispute window of {window} s has passed")
    status = VerdictStatus.PASSED if verdict is DisputeVerdict.PASSED else VerdictStatus.FAILED
    replaced = Verdict(
        status=status,
        kind=DISPUTED_BY_THE_PUBLISHER,
        reason=f"disputed by {by}: {reason}"[:MAX_NOTE_CHARS],
        checked_by=CHECKED_BY_THE_BOARD,
        at=now,
    )
    target = AllocationStatus.COMPLETED if verdict is DisputeVerdict.PASSED else AllocationStatus.FAILED
    update: dict[str, object] = {
        "verdict": replaced,
        "dispute": Dispute(by=by, reason=reason, at=now, verdict=verdict, before=record.verdict),
        "failure_reason": None if target is AllocationStatus.COMPLETED else replaced.reason,
    }
    if target is not record.status:
        # The one move out of an end: a dispute decides what the outcome was.
        update["status"] = target
        update["history"] = [*record.history, StatusChange(status=target, at=now)]
    return record.model_copy(update=update)
