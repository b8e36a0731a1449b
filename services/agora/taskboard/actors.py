"""The `Task` actor: one per task id, holding the task's spec, bids, status and outcome.

The actor runtime runs one call at a time per task, so lifecycle checks and writes never
interleave for a task; a status index (plain state keys) lets the board list tasks by status.

The actor announces its own decisions: once an allocation is committed it publishes the award
(`agora.task.awarded`) or the rejection (`agora.task.rejected`), then marks it published. An
award carries a fresh random token that only this actor and the award's subscribers see; the
winner's runtime acknowledges the award with it (its outcome, which must carry it too,
acknowledges it as well), so an outcome or acknowledgment forged by anyone who did not receive
the award is refused. Each award is listed in the board's watch on unacknowledged awards
(`award_watch`) until it is acknowledged; when its acknowledgment window ends there, the actor
announces an award whose publish failed, and passes an unacknowledged award to the next-best
bid, or fails the task with the reason. Each lapsed award is announced too
(`agora.task.award_lapsed`), so the registry suspends the agent that let it lapse from bidding
for a while. A person's cancel of a task an agent holds voids its award's token and is announced
(`agora.task.cancelled`), so the agent's runtime stops the run.

No award gives an agent more runs than it takes at once: before an award is committed the actor
claims a run slot of its agent (`AgentRuns`), passing over bidders that are full, and it
releases the slot when the turn ends. A task whose eligible bidders are all full waits QUEUED,
a waiter of each; a release of an agent with waiters is announced (`agora.agent.run_freed`), and
the board then tries the oldest of them again (`retry_queued`). A `queued` reminder tries a
waiting task again every `QUEUE_RETRY_SECONDS` (a lost announcement delays it by that much) and
rejects it at its deadline.
"""

import asyncio
import hmac
import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from math import ceil

from dapr.actor import Remindable
from opentelemetry import trace
from opentelemetry.trace import Link
from pydantic import BaseModel, Field

from agora.core import task_lifecycle as lifecycle
from agora.core import topics
from agora.core.acceptance import CHECKER_ATTEMPTS, AskedCheck, CheckerApp, Verdict, checker_backoff
from agora.core.capacity import RunClaim, RunFreed, RunRelease, RunsView
from agora.core.contracts import CheckRequest, OutcomeReport
from agora.core.errors import NotFound
from agora.core.escalation.decisions import EscalationAction, EscalationResponse
from agora.core.escalation.record import SYSTEM_ACTOR
from agora.core.market import TERMINAL_STATUSES, AllocationResult, AllocationStatus, TaskOutcome, TaskSpec
from agora.core.messages import (
    AwardAcknowledgement,
    AwardLapsed,
    AwardWindowDue,
    HandOver,
    ProgressNote,
    TaskAwarded,
    TaskCancel,
    TaskCancelled,
    TaskDecision,
    TaskDispute,
    TaskRejected,
)
from agora.core.task_lifecycle import AwardAttempt, AwardNotHeld, TaskRecord
from agora.runtime.actor_host import EXPIRE_REMINDER, PydanticActor, actor_endpoint
from agora.runtime.checkers import CheckAnswerInvalid, Checkers, CheckNotAnswered
from agora.runtime.clients import AgentRunsActors, EscalationActors
from agora.runtime.interfaces import TaskInterface
from agora.runtime.pubsub import Publisher
from agora.runtime.status_index import StatusIndex
from agora.runtime.tracing import current_traceparent, extract_context, tracer
from agora.taskboard.award_watch import AWARD_WATCH, parse_watch_entry, watch_entry
from agora.taskboard.judge import Judge
from agora.taskboard.listings import TaskListings

log = logging.getLogger(__name__)

STATUS_INDEX_NAMESPACE = "taskboard:status"
AWARD_REMINDER = "award"
"""Kept for awards an earlier version watched with a reminder each; awards are now watched by
the board's listing (`award_watch`)."""
LAPSE_REMINDER = "lapsed"
"""Armed only when announcing a lapsed award failed: it tries again."""
LAPSE_RETRY_SECONDS = 5
CHECK_REMINDER = "check"
"""Asks the task's checker app or judge about the recorded outcome: armed as the outcome is recorded, and
again, after a backoff, when a try gets no answer."""
PERSON_REMINDER = "person"
"""While a failed check waits for a person (`on_failure: person`): parks its escalation (again:
parking is idempotent) and reads the decision off the escalation's record, every
`PERSON_LOOK_SECONDS`, until one is applied. The decision's announcement applies it at once;
this is what applies it when that announcement is lost or its handling failed."""
PERSON_LOOK_SECONDS = 60
QUEUE_REMINDER = "queued"
"""While the task waits for a run slot: tries it again, and rejects it at its deadline."""
QUEUE_RETRY_SECONDS = 60
UNDER_WAY = (
    AllocationStatus.PENDING,
    AllocationStatus.BIDDING,
    AllocationStatus.QUEUED,
    AllocationStatus.ALLOCATED,
)


class TaskSlot(BaseModel):
    record: TaskRecord | None = None
    award_token: str | None = None
    """The current award's token (never part of the record the board shows)."""
    traceparent: str | None = None
    """Trace context of the decision: a reassignment made when its window ends continues it."""
    award_watch: str | None = None
    """The current award's entry in the watch on unacknowledged awards, until acknowledged."""
    lapses_to_announce: list[AwardLapsed] = Field(default_factory=list)
    """Lapsed awards not announced yet: committed with the lapse itself, so a failed publish
    (or a crash right after the commit) is announced later, never lost."""
    check_tries: int = 0
    """Tries of the task's checker app or judge that got no answer so far (`CHECK_REMINDER`)."""
    cancel_to_announce: TaskCancelled | None = None
    """The cancel of a task an agent held, not announced yet: committed with the cancel, so a
    failed publish is announced when the cancel is asked again (it answers with an error until
    then)."""


@dataclass(frozen=True)
class TaskBoardDeps:
    """What every `Task` actor of a task board works with."""

    publisher: Publisher
    status_index: StatusIndex
    """The listings by status, and the watch on unacknowledged awards."""
    checkers: Checkers
    """How the board asks a task's checker app (service invocation through its sidecar)."""
    ack_seconds: float = lifecycle.DEFAULT_ACK_SECONDS
    """How long a winner's runtime has to acknowledge an award (or the task's shorter deadline)."""
    retention_seconds: int | None = None
    """How long a task that reached its end is kept (None: for ever): its record's state TTL."""
    checker_backoff_s: tuple[float, ...] = checker_backoff()
    """The waits before each next try of a checker app or judge that did not answer."""
    judge: Judge | None = None
    """The board's model, for tasks whose check is a judge (None: such a task stays unchecked,
    with the reason)."""
    escalations: EscalationActors | None = None
    """Where a failed check waits for a person (`on_failure: person`; None: such a task fails
    with the check's reason, saying no person could be asked)."""
    person_look_seconds: float = PERSON_LOOK_SECONDS
    agent_runs: AgentRunsActors | None = None
    """Each agent's run slots (None: awards are not held to any agent's capacity)."""
    queue_retry_seconds: float = QUEUE_RETRY_SECONDS
    full_agent_seen: Callable[[str], None] = lambda agent_id: None
    """Told of an agent found full (outside the turn, the board checks whether the runs it holds
    are still under way: a slot whose turn ended without a release is freed)."""

    @cached_property
    def listings(self) -> TaskListings:
        """Where a task is listed, by its status and, once it ended, the period it ended in."""
        return TaskListings(self.retention_seconds)


class Task(PydanticActor[TaskSlot, TaskBoardDeps], TaskInterface, Remindable):
    state_model = TaskSlot

    _superseded: tuple[str, ...] = ()
    """Watch entries of awards replaced by a change not committed yet."""
    _unindexed_watch: str | None = None
    """The watch entry of an award made by a change not committed yet."""

    def _record(self) -> TaskRecord:
        if self.state.record is None:
            raise NotFound(f"no task {self.id.id!r} on the board")
        return self.state.record

    async def _save(self, updated: TaskRecord) -> TaskRecord:
        listings = self.deps.listings
        previous = listings.listed_as(self.state.record) if self.state.record else None
        if updated == self.state.record:
            # Nothing new, as when a call that failed after its commit is retried: redo the steps
            # that follow a commit, so such a failure cannot leave the task out of its listing
            # or listed under a status it left (an ended task leaves none of those again).
            await self._index_committed(None, listings.listed_as(updated), redo=True)
            await self._unlist(str(other) for other in UNDER_WAY if other is not updated.status)
            return updated
        self.state.record = updated
        await self.commit()
        await self._index_committed(previous, listings.listed_as(updated))
        return updated

    async def commit(self, ttl_seconds: int | None = None) -> None:
        """Save the state; a task that ended is kept for the rest of its retention (a state TTL,
        set again by every later write, so none extends it)."""
        record = self.state.record
        retention_left = self.deps.listings.retention_left(record, _now()) if record else None
        await super().commit(ttl_seconds or retention_left)

    async def _index_committed(self, old: str | None, new: str, *, redo: bool = False) -> None:
        """After a commit, in one write of the index: the task under its status, its award in
        the watch (before the award is announced: an award is never out unwatched) and the
        awards it replaced out of it. `redo`: list what the state holds again (idempotent)."""
        watched = self.state.award_watch if redo else self._unindexed_watch
        superseded, self._superseded, self._unindexed_watch = self._superseded, (), None
        await self.deps.status_index.change(
            [
                (self.id.id, old, new),
                *([(watched, None, AWARD_WATCH)] if watched else []),
                *((entry, AWARD_WATCH, None) for entry in superseded),
            ]
        )

    async def _unlist(self, listings: Iterable[str]) -> None:
        """Take the task out of these listings (one group commit of the index)."""
        index = self.deps.status_index
        await asyncio.gather(*(index.discard(self.id.id, listing) for listing in listings))

    async def expired(self) -> None:
        """The `expire` reminder an earlier version registered for a task that ended: drop it
        now, from every listing it may be in. (Tasks are now kept by a state TTL.)"""
        record = self.state.record
        if record is None or record.status not in TERMINAL_STATUSES:
            return
        await self._unlist(
            [*(str(status) for status in AllocationStatus), self.deps.listings.listed_as(record)]
        )
        await self.forget()

    @actor_endpoint
    async def post_task(self, spec: TaskSpec) -> TaskRecord:
        return await self._save(lifecycle.post(self.state.record, spec))

    @actor_endpoint
    async def get_task(self) -> TaskRecord:
        return self._record()

    @actor_endpoint
    async def decide(self, decision: TaskDecision) -> TaskRecord:
        """Post the task and commit its decision in one write (once), then announce it. A task
        decided before keeps its first decision (a redelivered task decided again): that one
        is announced if it has not gone out yet."""
        posted = lifecycle.post(self.state.record, decision.spec)
        if posted.status is AllocationStatus.QUEUED:
            return await self._wait_for_a_slot(posted, posted)  # its reminder armed, if that failed
        if posted.status not in (AllocationStatus.PENDING, AllocationStatus.BIDDING):
            await self._save(posted)
            return await self._announce()
        return await self._decide(posted, decision.allocation)

    @actor_endpoint
    async def record_allocation(self, result: AllocationResult) -> TaskRecord:
        """Commit the decision with every bid and score in one write (once), then announce it."""
        return await self._decide(self._record(), result)

    async def _decide(self, record: TaskRecord, result: AllocationResult) -> TaskRecord:
        now = _now()
        decided = await self._with_a_free_slot(
            record, lambda full: lifecycle.allocate(record, result, now, full=full), wait=True
        )
        if decided.status is AllocationStatus.QUEUED:
            return await self._wait_for_a_slot(record, decided)
        if decided is not record:
            self.state.traceparent = current_traceparent()
            if decided.current_award is not None:
                # Set once: a copy of this call that overlaps it (a caller that gave up and
                # sent it again) must announce the same award, not a second token.
                self.state.award_token = self.state.award_token or secrets.token_urlsafe(24)
                self._watch(decided)
        await self._save(decided)
        return await self._announce()

    @actor_endpoint
    async def announce(self) -> TaskRecord:
        """Publish the decision if its event has not gone out yet (idempotent)."""
        return await self._announce()

    @actor_endpoint
    async def acknowledge_award(self, acknowledgement: AwardAcknowledgement) -> TaskRecord:
        """The winner's runtime took the award; the answer is the board's record of the task,
        the truth the award event must agree with."""
        self._check_token(acknowledgement.agent_id, acknowledgement.award_token)
        record = self._record()
        taken = lifecycle.acknowledge(record, acknowledgement.agent_id, _now())
        if taken is not record:
            # Out of the watch once the acknowledgment is committed (an entry left behind by a
            # failure there is dropped when its window ends: the award is acknowledged by then).
            self._superseded_watch(self.state.award_watch)
            self.state.award_watch = None
        return await self._save(taken)

    @actor_endpoint
    async def verify_award(self, acknowledgement: AwardAcknowledgement) -> TaskRecord:
        """Whether the caller holds the award it names (its token, its turn not passed on),
        changing nothing: the board's record of the task, the truth an award event must agree
        with before it is run. The run's outcome acknowledges the award."""
        self._check_token(acknowledgement.agent_id, acknowledgement.award_token)
        record = self._record()
        lifecycle.check_award(record, acknowledgement.agent_id)
        return record

    @actor_endpoint
    async def note_progress(self, note: ProgressNote) -> TaskRecord:
        """Keep what the award's holder says of its progress in the task's history (notes past
        the bound are not kept). A note acknowledges the award, as its acknowledgment would."""
        self._check_token(note.agent_id, note.award_token)
        record = self._record()
        noted = lifecycle.note_progress(record, note.agent_id, note.text, _now())
        if noted is record:
            return record
        if record.awards[-1].acknowledged_at is None:
            self._superseded_watch(self.state.award_watch)
            self.state.award_watch = None
        return await self._save(noted)

    @actor_endpoint
    async def mark_outcome(self, outcome: TaskOutcome) -> TaskRecord:
        """Record the outcome (the award's holder only, once), then announce it on
        `agora.task.outcome.recorded`. Recording the same outcome again announces it again: a
        caller whose call failed after the commit retries, and its subscribers take each
        task's outcome once. So an outcome on the board is announced however its reporter
        fares after the call."""
        record = self._record()
        earlier = lifecycle.turn_of(record, outcome)
        if earlier is not None:
            await self._announce_turn(record, earlier)  # a turn the task passed on from
            return record
        if record.outcome is None or record.outcome != outcome:
            self._check_token(outcome.agent_id, outcome.award_token)
        now = _now()
        ended = await self._with_a_free_slot(
            record, lambda full: lifecycle.record_outcome(record, outcome, now, full)
        )
        if ended is not record:
            # An outcome acknowledges the award: out of the watch with the same index write.
            self._superseded_watch(self.state.award_watch)
            self.state.award_watch = None
        ended_turn = ended is not record and record.current_award is not None
        if lifecycle.was_passed_on(record, ended):
            passed = await self._pass_on(ended, release=record)
            return passed
        ended = await self._save(ended)
        if ended_turn:
            await self._release_turn(record)
        if lifecycle.awaiting_verdict(ended):
            # Armed again when the same outcome comes again: a reporter whose call failed after
            # the commit retries, and the check must not be lost with that call.
            await self.register_reminder(CHECK_REMINDER, b"", timedelta(0))
            return ended
        if lifecycle.awaiting_person(ended):
            await self._ask_a_person()
            return self._record()
        await self._announce_outcome(ended, outcome)
        return ended

    async def _pass_on(self, passed: TaskRecord, release: TaskRecord | None = None) -> TaskRecord:
        """The check failed the turn's outcome and the task went to the next bid: a new award
        token, watched like any award; the failed turn's outcome is announced (to the
        reputation, which counts it against its agent), then the new award."""
        log.info(
            "task's check failed; awarding the next-best bid",
            extra={"task_id": self.id.id, "agent_id": passed.awards[-2].agent_id,
                   "next_agent_id": passed.awards[-1].agent_id},
        )  # fmt: skip
        self.state.traceparent = current_traceparent()
        self.state.award_token = secrets.token_urlsafe(24)
        self.state.check_tries = 0
        self._watch(passed)
        await self._save(passed)
        if release is not None:
            await self._release_turn(release)  # the turn whose outcome failed its check
        await self._announce_turn(passed, passed.awards[-2])
        return await self._announce()

    async def _announce_turn(self, record: TaskRecord, turn: AwardAttempt) -> None:
        """An earlier turn's outcome, which its check failed (event id `outcome:<task>.<turn>`,
        to the reputation only: the task went on)."""
        assert turn.outcome is not None and record.allocation is not None
        number = record.awards.index(turn) + 1
        bid = next((b for b in record.allocation.all_bids if b.agent_id == turn.agent_id), None)
        await self.deps.publisher.publish(
            topics.TASK_OUTCOME_RECORDED,
            OutcomeReport(
                outcome=turn.outcome, counts_as_success=False, winning_bid=bid, verdict=turn.verdict
            ),
            message_id=f"outcome:{record.task_id}.{number}",
        )

    async def _ask_for_verdict(self) -> None:
        """One try of the task's checker app or judge. An answer ends the task as it says; no
        answer (the app or the model down, a refusal of its sidecar, a try past its time) is
        tried again after a backoff, `CHECKER_ATTEMPTS` times in all, and then the outcome
        stays UNCHECKED with the last reason. An answer out of its contract is no verdict:
        UNCHECKED at once, with what was wrong."""
        record = self._record()
        if not lifecycle.awaiting_verdict(record):
            return
        assert record.outcome is not None and record.spec.acceptance is not None
        check = record.spec.acceptance.check
        assert isinstance(check, AskedCheck)
        request = CheckRequest(
            spec=record.spec, outcome=record.outcome.model_copy(update={"award_token": None})
        )
        who = f"checker app {check.app_id}" if isinstance(check, CheckerApp) else "judge"
        with tracer("agora.taskboard").start_as_current_span(
            "taskboard.check",
            attributes={
                "task_id": self.id.id,
                "agora.check": who,
                "agora.check_try": self.state.check_tries + 1,
            },
        ) as span:
            try:
                verdict = await self._verdict_of(check, request)
            except CheckAnswerInvalid as exc:
                verdict = lifecycle.unchecked(check, str(exc), _now())
            except CheckNotAnswered as exc:
                self.state.check_tries += 1
                if self.state.check_tries < CHECKER_ATTEMPTS:
                    backoff = self.deps.checker_backoff_s
                    wait = backoff[min(self.state.check_tries, len(backoff)) - 1]
                    log.warning(
                        f"the task's {who} did not answer; asking again",
                        extra={"task_id": self.id.id, "reason": str(exc)[:500],
                               "try": self.state.check_tries, "retry_in_s": wait},
                    )  # fmt: skip
                    await self.commit()
                    await self.register_reminder(CHECK_REMINDER, b"", timedelta(seconds=wait))
                    return
                verdict = lifecycle.unchecked(
                    check, f"no answer after {CHECKER_ATTEMPTS} tries; the last: {exc}", _now()
                )
            span.set_attribute("agora.verdict", str(verdict.status))
        now = _now()
        checked = await self._with_a_free_slot(
            record, lambda full: lifecycle.apply_verdict(record, verdict, now, full)
        )
        if lifecycle.was_passed_on(record, checked):
            await self._pass_on(checked)
            return
        ended = await self._save(checked)
        log.info("task checked", extra={"task_id": self.id.id, "check": who, "verdict": str(verdict.status)})
        if lifecycle.awaiting_person(ended):
            await self._ask_a_person()
            return
        await self._announce_outcome(ended, record.outcome)

    async def _ask_a_person(self) -> None:
        """A failed check waits for a person: the reminder that parks its escalation and reads
        the decision is armed first (so a failure here is tried again), then the escalation is
        parked at once."""
        period = timedelta(seconds=self.deps.person_look_seconds)
        await self.register_reminder(PERSON_REMINDER, b"", period, period)
        try:
            await self._follow_person()
        except Exception as exc:  # the reminder parks it on its next look
            log.warning(
                "could not park the task's failed check for a person yet; trying again",
                extra={"task_id": self.id.id, "reason": str(exc)[:500],
                       "retry_in_s": self.deps.person_look_seconds},
            )  # fmt: skip

    @actor_endpoint
    async def person_decided(self) -> TaskRecord:
        """A person decided an escalation of this task (its announcement): the decision is
        read off the escalation's own record and applied, if the task waits for one."""
        await self._follow_person()
        return self._record()

    async def _follow_person(self) -> None:
        """Park the escalation of the failed check (idempotent) and apply its decision, if there
        is one yet: skip, abort or reassign (`lifecycle.person_decided`)."""
        record = self._record()
        if not lifecycle.awaiting_person(record):
            await self.drop_reminder(PERSON_REMINDER)
            return
        escalation_id = lifecycle.check_escalation_id(record)
        if self.deps.escalations is None:
            decision = EscalationResponse(action=EscalationAction.ABORT)
            by, why = lifecycle.CHECKED_BY_THE_BOARD, "no person could be asked (no escalation service)"
        else:
            escalation = await self.deps.escalations(escalation_id).park(
                lifecycle.person_park_request(record)
            )
            if escalation.decision is None:
                return
            assert isinstance(escalation.decision, EscalationResponse)
            decision, by = escalation.decision, escalation.decided_by or SYSTEM_ACTOR
            why = next((a.why for a in reversed(escalation.audit) if a.what.startswith("resolved")), "")
        now = _now()
        decided = await self._with_a_free_slot(
            record, lambda full: lifecycle.person_decided(record, decision, by, why, now, full)
        )
        log.info(
            "a person decided the task's failed check",
            extra={"task_id": self.id.id, "escalation_id": escalation_id, "action": str(decision.action),
                   "by": by},
        )  # fmt: skip
        if lifecycle.was_passed_on(record, decided):
            await self._pass_on(decided)
        else:
            await self._save(decided)
            assert record.outcome is not None
            await self._announce_outcome(decided, record.outcome)
        await self.drop_reminder(PERSON_REMINDER)

    async def _verdict_of(self, check: AskedCheck, request: CheckRequest) -> Verdict:
        if isinstance(check, CheckerApp):
            answer = await self.deps.checkers.ask(check, request)
            return lifecycle.asked_verdict(check, answer.passed, answer.reason, _now())
        if self.deps.judge is None:
            raise CheckAnswerInvalid("this task board has no model to judge with")
        opinion = await self.deps.judge.opinion(check, request)
        return lifecycle.asked_verdict(check, opinion.passed, opinion.reason, _now(), opinion.confidence)

    async def _announce_outcome(self, record: TaskRecord, outcome: TaskOutcome, *, revision: int = 0) -> None:
        """The outcome as recorded (revision 0, to the reputation and the app waiting for the
        task), or as a dispute revised its verdict (revision 1, to the reputation only: the
        waiting app had the task's end)."""
        allocation = record.allocation
        await self.deps.publisher.publish(
            topics.TASK_OUTCOME_RECORDED,
            OutcomeReport(
                outcome=outcome,
                counts_as_success=lifecycle.counts_as_success(record.spec, outcome, record.verdict),
                winning_bid=allocation.winning_bid if allocation else None,
                verdict=record.verdict,
                revision=revision,
            ),
            message_id=f"outcome:{record.task_id}" + (":disputed" if revision else ""),
            reply_to=None if revision else record.spec.reply_to,
        )

    @actor_endpoint
    async def hand_over(self, hand_over: HandOver) -> TaskRecord:
        """The agent running the task gives it up for another bidder, as a person decided on
        its paused run: the next award goes out with a new token (the old one no longer
        reports an outcome), and waits for its acknowledgment like any award."""
        record = self._record()
        if record.current_award is not None and record.current_award.agent_id == hand_over.agent_id:
            self._check_token(hand_over.agent_id, hand_over.award_token)
        now = _now()
        moved_on = await self._with_a_free_slot(
            record,
            lambda full: lifecycle.hand_over(
                record, hand_over.agent_id, hand_over.to_agent,
                f"{hand_over.decided_by} (escalation {hand_over.escalation_id})", now, full,
            ),
        )  # fmt: skip
        if moved_on is record:
            return record  # handed over before: a redelivery
        log.info(
            "task handed over by a person's decision",
            extra={"task_id": self.id.id, "agent_id": hand_over.agent_id,
                   "next_agent_id": moved_on.awards[-1].agent_id, "escalation_id": hand_over.escalation_id},
        )  # fmt: skip
        self.state.traceparent = current_traceparent()
        self.state.award_token = secrets.token_urlsafe(24)
        self._watch(moved_on)
        await self._save(moved_on)
        await self._release_turn(record)
        return await self._announce()

    @actor_endpoint
    async def cancel(self, cancel: TaskCancel) -> TaskRecord:
        """A person cancels the task (`lifecycle.cancel`): one not decided yet is rejected and
        the rejection announced as any decision; one an agent holds fails, its award's token is
        void (the run's acknowledgment, notes and outcome are refused) and the cancel announced,
        so the agent's runtime stops the run. Asked again, it announces what did not go out."""
        record = self._record()
        cancelled = lifecycle.cancel(record, cancel.cancelled_by, cancel.reason, _now())
        if cancelled is not record:
            if record.status is AllocationStatus.ALLOCATED:
                self.state.award_token = None
                self.state.cancel_to_announce = TaskCancelled.of(cancelled)
            self._superseded_watch(self.state.award_watch)
            self.state.award_watch = None
            log.info(
                "task cancelled",
                extra={"task_id": self.id.id, "status": str(record.status), "by": cancel.cancelled_by},
            )
            await self._save(cancelled)
            if record.status is AllocationStatus.ALLOCATED:
                await self._release_turn(record)
            elif record.status is AllocationStatus.QUEUED:
                await self.drop_reminder(QUEUE_REMINDER)
        await self._announce()
        pending = self.state.cancel_to_announce
        if pending is not None:
            await self.deps.publisher.publish(
                topics.TASK_CANCELLED, pending, message_id=pending.message_id, reply_to=record.spec.reply_to
            )
            self.state.cancel_to_announce = None
            await self.commit()
        return self._record()

    @actor_endpoint
    async def dispute(self, dispute: TaskDispute) -> TaskRecord:
        """A person disputes the task's outcome (`lifecycle.dispute`): the verdict and the task's
        end follow the dispute, and the outcome is announced again with its revised verdict
        (event id `outcome:<task>:disputed`, to the reputation, not to the app that waited for
        the task: it had its end). The same dispute asked again announces it again."""
        record = self._record()
        disputed = lifecycle.dispute(record, dispute.disputed_by, dispute.reason, dispute.verdict, _now())
        if disputed is not record:
            log.info(
                "task outcome disputed",
                extra={"task_id": self.id.id, "by": dispute.disputed_by, "verdict": str(dispute.verdict)},
            )
            disputed = await self._save(disputed)
        assert disputed.outcome is not None
        await self._announce_outcome(disputed, disputed.outcome, revision=1)
        return disputed

    async def _with_a_free_slot(
        self,
        before: TaskRecord,
        choose: Callable[[dict[str, RunsView]], TaskRecord],
        *,
        wait: bool = False,
    ) -> TaskRecord:
        """`choose(full)`, the task as a change leaves it with the bidders in `full` passed over,
        once the agent of the award it makes (if it makes one) has a run slot for it: a bidder
        found full goes into `full` and the change is chosen again, until an award has a slot
        or no bidder is left (`lifecycle.next_best` gives up after `MAX_BIDDERS_WAITED_ON`
        full ones). `wait`: each full bidder keeps the task as a waiter."""
        full: dict[str, RunsView] = {}
        while True:
            chosen = choose(full)
            runs = self.deps.agent_runs
            award = chosen.current_award
            if runs is None or award is None or len(chosen.awards) <= len(before.awards):
                return chosen
            assert chosen.allocation is not None
            claim = RunClaim(
                task_id=self.id.id,
                turn=len(chosen.awards),
                limit=lifecycle.run_limit(chosen.allocation, award.agent_id),
                wait=wait,
            )
            view = await runs(award.agent_id).claim(claim)
            if view.granted:
                return chosen
            full[award.agent_id] = view
            self.deps.full_agent_seen(award.agent_id)

    async def _release_turn(self, before: TaskRecord) -> None:
        """Free the run slot of `before`'s current award, whose turn just ended (committed). A
        release that fails is logged: the board's check of a full agent's runs frees it later.
        An agent with tasks waiting is announced, so the oldest of them get the slot."""
        runs, award = self.deps.agent_runs, before.current_award
        if runs is None or award is None:
            return
        turn = len(before.awards)
        try:
            view = await runs(award.agent_id).release(RunRelease(task_id=self.id.id, turn=turn))
            if view.waiting_count and view.free:
                freed = RunFreed(agent_id=award.agent_id, task_id=self.id.id, turn=turn)
                await self.deps.publisher.publish(topics.AGENT_RUN_FREED, freed, message_id=freed.message_id)
        except Exception as exc:
            log.warning(
                "could not free the run slot of a turn that ended; the board's check frees it",
                extra={"task_id": self.id.id, "agent_id": award.agent_id, "reason": repr(exc)[:500]},
            )

    async def _wait_for_a_slot(self, before: TaskRecord, queued: TaskRecord) -> TaskRecord:
        """The task waits QUEUED: committed, and its `queued` reminder armed (the first try due
        at its deadline when that comes sooner than the retry period)."""
        saved = await self._save(queued)
        if before.status is not AllocationStatus.QUEUED:
            log.info(
                "every eligible bidder is full; the task waits for a run slot",
                extra={"task_id": self.id.id, "reason": saved.queued.reason if saved.queued else ""},
            )
        period = timedelta(seconds=self.deps.queue_retry_seconds)
        deadline = lifecycle.queue_deadline(saved)
        due = period if deadline is None else max(timedelta(0), min(period, deadline - _now()))
        await self.register_reminder(QUEUE_REMINDER, b"", due, period)
        return saved

    @actor_endpoint
    async def retry_queued(self) -> TaskRecord:
        """A bidder the task waits for freed a slot: award it if one of its bidders has one now
        (the task as it stands, QUEUED still when none has)."""
        await self._retry_queued()
        return self._record()

    async def _retry_queued(self) -> None:
        """Award the waiting task a slot if one of its bidders has one, or reject it at its
        deadline. The reminder is dropped only once the change is committed, indexed and
        announced: a failure on the way leaves it, and its next call redoes what did not
        happen (the commit's index steps, the announcement)."""
        record = self._record()
        if record.status is not AllocationStatus.QUEUED:
            if record.queued is not None and record.status in (
                AllocationStatus.ALLOCATED,
                AllocationStatus.REJECTED,
            ):
                await self._save(record)  # the same record: its index steps are redone
                await self._announce()
            await self.drop_reminder(QUEUE_REMINDER)
            return
        now = _now()
        expired = lifecycle.queue_deadline_passed(record, now)
        if expired is not record:
            log.info(
                "the task's deadline passed while it waited for a run slot", extra={"task_id": self.id.id}
            )
            await self._save(expired)
            await self._announce()
            await self.drop_reminder(QUEUE_REMINDER)
            return
        assert record.allocation is not None
        allocation = record.allocation
        decided = await self._with_a_free_slot(
            record, lambda full: lifecycle.allocate(record, allocation, now, full=full), wait=True
        )
        if decided.status is AllocationStatus.QUEUED:
            return
        self.state.traceparent = current_traceparent()
        self.state.award_token = self.state.award_token or secrets.token_urlsafe(24)
        self._watch(decided)
        await self._save(decided)
        await self._announce()
        await self.drop_reminder(QUEUE_REMINDER)

    @actor_endpoint
    async def rejudge_queued(self, result: AllocationResult) -> TaskRecord:
        """New bids for a task that waits (an agent that could take it joined the market): the
        task is decided again with them, as a first decision is."""
        record = self._record()
        if record.status is not AllocationStatus.QUEUED or result.status is not AllocationStatus.ALLOCATED:
            return record  # awarded meanwhile, or the new bids would not do: it waits on the old
        return await self._decide(record, result)

    def _check_token(self, agent_id: str, token: str | None) -> None:
        expected = self.state.award_token
        if expected is None or token is None or not hmac.compare_digest(expected, token):
            raise AwardNotHeld(f"task {self.id.id}: no award to {agent_id} with that token")

    @actor_endpoint
    async def award_window_due(self, due: AwardWindowDue) -> TaskRecord:
        """The watch found this entry past its due time: close the window of the award it names
        if that is the current one, still unacknowledged; drop the entry otherwise."""
        record = self._record()
        due_ms, task_id = parse_watch_entry(due.watch_entry)
        if task_id != self.id.id:
            return record  # another task's entry: not this actor's to drop
        if due.watch_entry != self.state.award_watch:
            await self.deps.status_index.discard(due.watch_entry, AWARD_WATCH)
            return record
        if due_ms > _now().timestamp() * 1000:
            return record  # not due yet by this replica's clock: a later sweep hands it over
        await self._close_award_window()
        return self._record()

    async def on_reminder(self, name: str, state: bytes) -> None:
        if name == EXPIRE_REMINDER:
            await self.expired()
            return
        if name == LAPSE_REMINDER:
            await self._announce_lapses()
            return
        if name == CHECK_REMINDER:
            await self._ask_for_verdict()
            return
        if name == PERSON_REMINDER:
            await self._follow_person()
            return
        if name == QUEUE_REMINDER:
            await self._retry_queued()
            return
        if name != AWARD_REMINDER or self.state.record is None:
            return
        await self._close_award_window()

    async def _close_award_window(self) -> None:
        await self._announce_lapses()  # any whose publish failed before
        record = self._record()
        parent = extract_context({"traceparent": self.state.traceparent}) if self.state.traceparent else None
        with tracer("agora.taskboard").start_as_current_span(
            "taskboard.award_window_closed",
            context=parent,
            links=[Link(trace.get_current_span().get_span_context())],
            attributes={"task_id": self.id.id},
        ) as span:
            if record.current_award is not None and not record.award_published:
                self._watch(record)  # its publish failed: announce now, wait again
                await self.commit()
                listed = self.deps.listings.listed_as(record)
                await self._index_committed(listed, listed)
                await self._announce()
                return
            now = _now()
            moved_on = await self._with_a_free_slot(
                record, lambda full: lifecycle.expire_award(record, now, full)
            )
            if moved_on == record:
                await self._unwatch()  # acknowledged, or no award left to watch
                return
            attempt = len(moved_on.awards) - 1 if moved_on.current_award else len(moved_on.awards)
            expired = moved_on.awards[attempt - 1]
            span.set_attribute("agora.unacknowledged_agent", expired.agent_id)
            lapse = AwardLapsed.of(moved_on, attempt)
            self.state.lapses_to_announce = [*self.state.lapses_to_announce, lapse]
            if moved_on.current_award is not None:
                span.set_attribute("agora.next_agent", moved_on.current_award.agent_id)
                log.warning(
                    "award not acknowledged in time; awarding the next-best bid",
                    extra={"task_id": self.id.id, "agent_id": expired.agent_id,
                           "next_agent_id": moved_on.current_award.agent_id},
                )  # fmt: skip
                self.state.award_token = secrets.token_urlsafe(24)
                self._watch(moved_on)
            else:
                log.warning(
                    "award not acknowledged in time; task failed",
                    extra={"task_id": self.id.id, "reason": moved_on.failure_reason},
                )
                self.state.award_token = None
                self._superseded_watch(self.state.award_watch)
                self.state.award_watch = None
            await self._save(moved_on)
            await self._release_turn(record)
            await self._announce_lapses()
            await self._announce()

    async def _announce_lapses(self) -> None:
        """Publish the lapsed awards not announced yet (event id `lapsed:<task>.<attempt>`, so
        a notice published twice is one). A failure is logged and retried by a reminder: it
        must not hold back the award that passed to the next bid."""
        pending = self.state.lapses_to_announce
        if not pending:
            return
        try:
            for lapse in pending:
                await self.deps.publisher.publish(
                    topics.TASK_AWARD_LAPSED,
                    lapse,
                    message_id=lapse.message_id,
                    reply_to=self._record().spec.reply_to,
                )
        except Exception as exc:
            log.warning(
                "announcing a lapsed award failed; retrying",
                extra={"task_id": self.id.id, "reason": repr(exc)[:500], "retry_in_s": LAPSE_RETRY_SECONDS},
            )
            await self.register_reminder(LAPSE_REMINDER, b"", timedelta(seconds=LAPSE_RETRY_SECONDS))
            return
        self.state.lapses_to_announce = []
        await self.commit()

    def _watch(self, record: TaskRecord) -> None:
        """Watch the current award, due when its acknowledgment window ends: listed once the
        change is committed, before it is announced; the entry it replaces leaves the watch then."""
        window = lifecycle.ack_window_seconds(record.spec, self.deps.ack_seconds)
        self._superseded_watch(self.state.award_watch)
        self.state.award_watch = self._unindexed_watch = watch_entry(
            self.id.id, _now() + timedelta(seconds=window)
        )

    def _superseded_watch(self, entry: str | None) -> None:
        if entry is not None:
            self._superseded = (*self._superseded, entry)

    async def _unwatch(self) -> None:
        record = self._record()
        if self.state.award_watch is not None:
            self._superseded_watch(self.state.award_watch)
            self.state.award_watch = None
            await self.commit()
            listed = self.deps.listings.listed_as(record)
            await self._index_committed(listed, listed)

    async def _announce(self) -> TaskRecord:
        record = self._record()
        if record.award_published or record.status not in (
            AllocationStatus.ALLOCATED,
            AllocationStatus.REJECTED,
        ):
            return record
        assert record.allocation is not None
        allocation = record.allocation
        if record.status is AllocationStatus.ALLOCATED:
            assert allocation.winning_bid is not None and allocation.winning_score is not None
            assert self.state.award_token is not None
            turn = len(record.awards)
            await self.deps.publisher.publish(
                topics.TASK_AWARDED,
                TaskAwarded(
                    task_id=record.task_id,
                    agent_id=allocation.winning_bid.agent_id,
                    spec=record.spec,
                    bid=allocation.winning_bid,
                    score=allocation.winning_score,
                    award_token=self.state.award_token,
                    acknowledge_within_ms=ceil(
                        1000 * lifecycle.ack_window_seconds(record.spec, self.deps.ack_seconds)
                    ),
                    attempt=turn,
                    awarded_at=record.awards[-1].awarded_at,
                ),
                message_id=f"awarded:{record.task_id}" + (f".{turn}" if turn > 1 else ""),
            )
            # Not a commit of its own: the acknowledgment, a moment later, commits it (an
            # acknowledged award was published). Should this actor's memory be lost before, the
            # award's window announces it again under the same event id, which its subscribers
            # take once.
            self.state.record = record.model_copy(update={"award_published": True})
            return self.state.record
        else:
            await self.deps.publisher.publish(
                topics.TASK_REJECTED,
                TaskRejected(
                    task_id=record.task_id, reason=allocation.reject_reason or "rejected", result=allocation
                ),
                message_id=f"rejected:{record.task_id}",
                reply_to=record.spec.reply_to,
            )
        return await self._save(record.model_copy(update={"award_published": True}))


def _now() -> datetime:
    return datetime.now(UTC)


ACTOR_TYPE = Task.__name__  # the Dapr actor type is the class name
