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

from agora.core import topics
from agora.core.contracts import DeadlineExtension, Decision
from agora.core.errors import NotFound
from agora.core.escalation import record as rules
from agora.core.escalation.digest import require_context
from agora.core.escalation.record import EscalationRecord, ParkRequest
from agora.core.messages import EscalationResolved
from agora.core.outcomes.learner import OutcomeLearner
from agora.escalation.outcomes import outcome_of
from agora.escalation.store import EscalationSlot, EscalationStore
from agora.runtime.actor_host import EXPIRE_REMINDER, STATE_KEY, PydanticActor, actor_endpoint
from agora.runtime.interfaces import EscalationInterface
from agora.runtime.pubsub import Publisher
from agora.runtime.state import Versioned
from agora.runtime.tracing import current_traceparent, extract_context, tracer

DEADLINE_REMINDER = "deadline"
ANNOUNCE_REMINDER = "announce"
ANNOUNCE_RETRY = timedelta(seconds=10)
MILLISECOND = timedelta(milliseconds=1)
"""How often a decision whose announcement has not gone out is announced again."""


@dataclass(frozen=True)
class EscalationDeps:
    """What every `Escalation` actor of the escalation service works with."""

    publisher: Publisher
    store: EscalationStore
    learner: OutcomeLearner | None = None
    """Learns from decided escalations (parking asks it for suggestions, in `store`)."""
    retention_seconds: int | None = None
    """How long a decided escalation is kept (None: for ever)."""


class Escalation(PydanticActor[EscalationSlot, EscalationDeps], EscalationInterface, Remindable):
    """The record is kept by `EscalationStore` under a plain key that parking writes outside
    this actor, so each turn that needs it reads it afresh (`_load`) rather than trusting
    memory."""

    state_model = EscalationSlot
    reload_every_turn = True
    _etag: str | None = None
    _loaded = False
    _written = False

    async def _on_activate(self) -> None:
        self.state, self._loaded = EscalationSlot(), False

    async def reload(self) -> None:
        self._loaded = False  # read when the turn needs it: a park does not

    async def _load(self) -> None:
        if self._loaded:
            return
        found = await self.deps.store.read(self.id.id)
        if found is None:
            found = await self._adopt_earlier_state()
        self.state, self._etag = (found.value, found.etag) if found is not None else (EscalationSlot(), None)
        self._loaded, self._written = True, False

    async def _adopt_earlier_state(self) -> Versioned[EscalationSlot] | None:
        """A record kept in this actor's own state (where earlier versions kept it) moves to
        its plain key and into the listings; None when there is none."""
        found, raw = await self._state_manager.try_get_state(STATE_KEY)
        if not found:
            return None
        slot = EscalationSlot.model_validate(raw)
        await self.deps.store.write(self.id.id, slot, None)
        if slot.record is not None:
            await self.deps.store.relist(slot.record)
        await self._state_manager.try_remove_state(STATE_KEY)
        await self._state_manager.save_state()
        return await self.deps.store.read(self.id.id)

    async def commit(self, ttl_seconds: int | None = None) -> None:
        """Save the slot over the version this turn read; a second commit in one turn first reads
        the version the first wrote (the store answers a write with no etag, and a record that
        was created by a first write takes only writes that name its version)."""
        if self._written:
            written = await self.deps.store.read(self.id.id)
            self._etag = written.etag if written is not None else None
        await self.deps.store.write(self.id.id, self.state, self._etag)
        self._written = True

    async def forget(self) -> None:
        await self.deps.store.delete(self.id.id)
        self.state, self._etag = EscalationSlot(), None

    def _record(self) -> EscalationRecord:
        return rules.require_record(self.state.record, self.id.id)

    async def _save(self, updated: EscalationRecord) -> EscalationRecord:
        previous = self.state.record
        self.state.record = updated
        await self.commit()
        if previous is not None and previous.status is not updated.status:
            # After the commit: a failure here is repaired when the decision's announcement is
            # retried (`_redeliver`), which lists the record again first.
            await self.deps.store.move(updated, previous.status)
        return updated

    @actor_endpoint
    async def park(self, request: ParkRequest) -> EscalationRecord:
        return await self.deps.store.park(self.id.id, request, current_traceparent())

    @actor_endpoint
    async def get(self) -> EscalationRecord:
        await self._load()
        return self._record()

    @actor_endpoint
    async def resolve(self, decision: Decision) -> EscalationRecord:
        await self._load()
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
        await self._load()
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
        await self._load()
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
            await self.deps.store.relist(record)
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
        await self.deps.store.unlist(record)
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
                # How long the waiting party waited for the decision.
                "agora.waited_ms": round(
                    ((record.decided_at or record.created_at) - record.created_at) / MILLISECOND
                ),
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
