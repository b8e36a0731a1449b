"""The `Escalation` actor: one per escalation id, holding its record until a decision.

A decision is applied once (the actor serializes calls; a second one gets AGENT_NOT_WAITING).
An optional deadline is an actor reminder (kept by the Dapr scheduler, so it survives
restarts of the app and its sidecar) that applies the configured default decision. Either
way the waiting party is told through `agora.escalation.resolved`.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dapr.actor import Remindable
from opentelemetry import trace
from opentelemetry.trace import Link
from pydantic import BaseModel

from agora.core import topics
from agora.core.contracts import DeadlineExtension, Decision
from agora.core.errors import NotFound
from agora.core.escalation import record as rules
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.digest import require_context
from agora.core.escalation.record import EscalationRecord, EscalationStatus, ParkRequest
from agora.core.messages import EscalationResolved
from agora.core.outcomes.learner import OutcomeLearner
from agora.escalation.outcomes import outcome_of, suggestions_for
from agora.runtime.actor import EXPIRE_REMINDER, PydanticActor, actor_endpoint
from agora.runtime.interfaces import EscalationInterface
from agora.runtime.pubsub import Publisher
from agora.runtime.status_index import StatusIndex
from agora.runtime.tracing import current_traceparent, extract_context, tracer

DEADLINE_REMINDER = "deadline"
ANNOUNCE_REMINDER = "announce"
ANNOUNCE_RETRY = timedelta(seconds=10)
"""How often a decision whose announcement has not gone out is announced again."""


class EscalationSlot(BaseModel):
    record: EscalationRecord | None = None
    traceparent: str | None = None
    """Trace context of the parking call: the decision continues that trace, so the whole
    path (step → pause → person → continuation) is one trace even days later."""
    announced: bool = False
    """Whether the decision went out on `agora.escalation.resolved`. It is committed with the
    decision first and published after, so a failed publish is retried (see `_redeliver`)."""


@dataclass(frozen=True)
class EscalationDeps:
    """What every `Escalation` actor of the escalation service works with."""

    publisher: Publisher
    status_index: StatusIndex | None = None
    learner: OutcomeLearner | None = None
    """Learns from decided escalations and suggests past resolutions to new ones."""
    retention_seconds: int | None = None
    """How long a decided escalation is kept (None: for ever)."""


class Escalation(PydanticActor[EscalationSlot, EscalationDeps], EscalationInterface, Remindable):
    state_model = EscalationSlot

    def _record(self) -> EscalationRecord:
        return rules.require_record(self.state.record, self.id.id)

    async def _save(self, updated: EscalationRecord) -> EscalationRecord:
        previous = self.state.record.status if self.state.record else None
        self.state.record = updated
        await self.commit()
        await self._reindex(previous, updated)
        return updated

    async def _reindex(self, old: EscalationStatus | None, record: EscalationRecord) -> None:
        """Move the id to the record's status's listing; a record new to the listings (`old`
        None) is also listed by creation, for the listing of every status."""
        index = self.deps.status_index
        if index is None:
            return
        if old is None:
            await index.add(self.id.id, str(record.status), record.created_at)
        else:
            await index.move(self.id.id, str(old), str(record.status))

    @actor_endpoint
    async def park(self, request: ParkRequest) -> EscalationRecord:
        now = datetime.now(UTC)
        context = request.context
        existing = self.state.record
        learner = self.deps.learner
        if isinstance(context, EscalationContext) and not context.historical_suggestions:
            if existing is not None and isinstance(existing.context, EscalationContext):
                # The same request again: it is compared with the record as first parked, which
                # carries the suggestions found then.
                suggested = existing.context.historical_suggestions
                context = context.model_copy(update={"historical_suggestions": suggested})
            elif existing is None and learner is not None:
                similar = await suggestions_for(learner, context)
                context = context.model_copy(update={"historical_suggestions": similar})
        record = rules.park(
            self.id.id,
            request.waiting_party,
            context,
            now=now,
            who=request.who,
            why=request.why,
            deadline=request.deadline,
            default_decision=request.default_decision,
            existing=existing,
        )
        if record != existing:
            self.state.traceparent = current_traceparent()
            record = await self._save(record)
        else:
            # Parked before: the same request again, perhaps the retry of one that failed after
            # its commit. Redo the steps that follow the commit (both are idempotent), so such a
            # failure cannot leave a waiting escalation unlisted or without its deadline.
            await self._reindex(None, record)
        if record.status is EscalationStatus.WAITING_FOR_HUMAN and record.deadline is not None:
            # One-shot: fires once at the deadline (no period).
            await self.register_reminder(DEADLINE_REMINDER, b"", max(record.deadline - now, timedelta(0)))
        return record

    @actor_endpoint
    async def get(self) -> EscalationRecord:
        return self._record()

    @actor_endpoint
    async def resolve(self, decision: Decision) -> EscalationRecord:
        await self._redeliver()
        record = self._record()
        if record.waiting:  # a decided one is refused by resolve, saying by whom
            require_context(record, decision.context_digest)
        resolved = rules.resolve(
            record,
            decision.response,
            decision.who,
            decision.why,
            datetime.now(UTC),
            progress=decision.progress,
        )
        return await self._conclude(resolved)

    @actor_endpoint
    async def extend_deadline(self, extension: DeadlineExtension) -> EscalationRecord:
        """A later deadline: the deadline reminder is registered again for it (the default
        applies then, not at the old deadline)."""
        await self._redeliver()
        record = self._record()
        if record.waiting:
            require_context(record, extension.context_digest)
        now = datetime.now(UTC)
        extended = rules.extend_deadline(
            record, extension.deadline, who=extension.who, why=extension.why, now=now
        )
        extended = await self._save(extended)
        assert extended.deadline is not None
        await self.register_reminder(DEADLINE_REMINDER, b"", max(extended.deadline - now, timedelta(0)))
        return extended

    async def on_reminder(self, name: str, state: bytes) -> None:
        if name == EXPIRE_REMINDER:
            await self.expired()
            return
        if name == ANNOUNCE_REMINDER:
            await self._redeliver()
            await self._announcement_done()
            return
        if name != DEADLINE_REMINDER or self.state.record is None:
            return
        await self._redeliver()
        expired = rules.expire(self.state.record, datetime.now(UTC))
        if expired != self.state.record:
            await self._conclude(expired)

    async def _redeliver(self) -> None:
        """Announce a decision whose publish failed after it was committed. A person retrying
        the resume that failed lands here (and is then told the escalation is decided)."""
        record = self.state.record
        if record is not None and not record.waiting and not self.state.announced:
            await self._announce_decision(record)

    async def _conclude(self, record: EscalationRecord) -> EscalationRecord:
        self.state.announced = False
        # Until the decision's announcement is out, a reminder (kept by the scheduler) tries it
        # again: a publish that fails, or a crash between the commit and the publish, must not
        # leave the waiting party waiting when nobody resumes again and no deadline is set.
        await self.register_reminder(ANNOUNCE_REMINDER, b"", ANNOUNCE_RETRY, ANNOUNCE_RETRY)
        record = await self._save(record)
        await self._announce_decision(record)
        await self._announcement_done()
        assert record.decision is not None
        if self.deps.learner is not None and str(record.decision.action) in ("skip", "abort"):
            learnt = outcome_of(record, succeeded=False)  # nothing follows: learnt at once
            if learnt is not None:
                await self.deps.learner.record(learnt)
        if record.deadline is not None:
            await self.drop_reminder(DEADLINE_REMINDER)
        if self.deps.retention_seconds is not None:
            await self.expire_in(self.deps.retention_seconds)
        return record

    async def expired(self) -> None:
        record = self.state.record
        if record is None or record.waiting:
            return
        await self._redeliver()  # a decision whose publish failed goes out before the record goes
        if self.deps.status_index is not None:
            await self.deps.status_index.discard(self.id.id, str(record.status), record.created_at)
        await self.forget()

    async def _announcement_done(self) -> None:
        record = self.state.record
        if record is None or record.waiting or self.state.announced:
            await self.drop_reminder(ANNOUNCE_REMINDER)

    async def _announce_decision(self, record: EscalationRecord) -> None:
        assert record.decision is not None
        parked = extract_context({"traceparent": self.state.traceparent}) if self.state.traceparent else None
        with tracer("agora.escalation").start_as_current_span(
            "escalation.resolve",
            context=parked,
            links=[Link(trace.get_current_span().get_span_context())],
            attributes={
                "agora.escalation_id": record.escalation_id,
                "agora.decision": str(record.decision.action),
                "agora.decided_by": record.decided_by or rules.SYSTEM_ACTOR,
                "agora.status": str(record.status),
            },
        ):
            await self.deps.publisher.publish(
                topics.ESCALATION_RESOLVED,
                EscalationResolved.of(record),
                message_id=f"resolved:{record.escalation_id}",
            )
        self.state.announced = True
        await self.commit()


ACTOR_TYPE = Escalation.__name__  # the Dapr actor type is the class name

__all__ = ["ACTOR_TYPE", "Decision", "Escalation", "NotFound", "ParkRequest"]
