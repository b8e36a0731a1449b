"""The `SessionUncertainty` actor: one per agent session, holding its belief state.

Each observed step is scored by `UncertaintyEstimator`. PAUSE_FOR_HUMAN parks the session with
the escalation service (an `Escalation` actor) and refuses further steps until the decision
arrives on `agora.escalation.resolved`: a model step as an escalation (retry, skip, abort,
modify_prompt), a tool about to run as a checkpoint (proceed, skip, abort, modify_prompt), like
a checkpoint trigger that requires confirmation. ABORT ends the session with a typed error.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime

from agora.core import topics
from agora.core.contracts import (
    CheckpointAnswer,
    CheckpointRequest,
    Continuation,
    SessionState,
    SessionSummary,
    StepReport,
    StepVerdict,
)
from agora.core.escalation.checkpoints import (
    CheckpointContext,
    CheckpointGate,
    CheckpointTrigger,
    evaluate_checkpoint,
)
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import CheckpointAction, EscalationAction
from agora.core.escalation.record import ParkRequest, UnverifiedDecision, WaitingParty, WaitingPartyKind
from agora.core.limits import MAX_NAME_CHARS, MAX_NOTE_CHARS, MAX_TEXT_CHARS
from agora.core.messages import EscalationOutcome, EscalationResolved
from agora.core.uncertainty.aborts import SessionNotRunning, UncertaintyAbort
from agora.core.uncertainty.belief import StepUncertainty
from agora.core.uncertainty.estimator import UncertaintyEstimator
from agora.core.uncertainty.model import ConfidenceModel, ModelMessage
from agora.core.uncertainty.policy import UncertaintyAction, UncertaintyPolicy
from agora.runtime.actor_client import ActorClient
from agora.runtime.actor_host import PydanticActor, actor_endpoint
from agora.runtime.clients import escalation_actors
from agora.runtime.interfaces import SessionUncertaintyInterface
from agora.runtime.pubsub import Publisher


@dataclass(frozen=True)
class UncertaintyDeps:
    """What every `SessionUncertainty` actor of the uncertainty monitor works with."""

    actors: ActorClient
    """Parks sessions with the escalation service's `Escalation` actors."""
    publisher: Publisher | None = None
    policy: UncertaintyPolicy = field(default_factory=UncertaintyPolicy)
    checkpoint_triggers: tuple[CheckpointTrigger, ...] = ()
    model: ConfidenceModel | None = None
    retention_seconds: int | None = None
    """How long a session is kept after its last change, unless it waits for a person (None:
    for ever)."""


class SessionUncertainty(PydanticActor[SessionState, UncertaintyDeps], SessionUncertaintyInterface):
    state_model = SessionState

    async def commit(self, ttl_seconds: int | None = None) -> None:
        """A session lives on while it changes or waits for a person; left alone, it is dropped
        after the retention (a state TTL, so no reminder per session)."""
        waiting = self.state.status == "WAITING_FOR_HUMAN"
        await super().commit(ttl_seconds or (None if waiting else self.deps.retention_seconds))

    def _estimator(self) -> UncertaintyEstimator:
        if self.state.belief is None:
            estimator = UncertaintyEstimator(self.deps.policy, model=self.deps.model)
            estimator.initialize(self.id.id, "")
            return estimator
        return UncertaintyEstimator.from_belief(
            self.state.belief, policy=self.deps.policy, model=self.deps.model
        )

    def _require_running(self) -> None:
        if self.state.status != "RUNNING":
            raise SessionNotRunning(f"session {self.id.id} is {self.state.status}")

    @actor_endpoint
    async def observe_llm_response(self, report: StepReport) -> StepVerdict:
        self._require_running()
        estimator = self._estimator()
        prompt = [ModelMessage(role="user", content=report.prompt)] if report.prompt else None
        step, action = await estimator.observe_llm_response(
            report.text, report.step_id, prompt_messages=prompt, step_type=report.step_type
        )
        return await self._after(estimator, step, action, report)

    @actor_endpoint
    async def observe_tool_call(self, report: StepReport) -> StepVerdict:
        self._require_running()
        estimator = self._estimator()
        step, action = await estimator.observe_tool_call(report.tool_name or "", report.step_id)
        return await self._after(estimator, step, action, report)

    async def _after(
        self,
        estimator: UncertaintyEstimator,
        step: StepUncertainty,
        action: UncertaintyAction,
        report: StepReport,
    ) -> StepVerdict:
        self.state.belief = estimator.get_belief_state()
        if self.state.awaiting_outcome is not None and self.deps.publisher is not None:
            confident = action in (UncertaintyAction.PROCEED, UncertaintyAction.PROCEED_WITH_LOG)
            await self.deps.publisher.publish(
                topics.ESCALATION_OUTCOME,
                EscalationOutcome(escalation_id=self.state.awaiting_outcome, succeeded=confident),
                message_id=f"outcome:{self.state.awaiting_outcome}",
            )
            self.state.awaiting_outcome = None
        if action is UncertaintyAction.PAUSE_FOR_HUMAN:
            if step.step_type == "tool_call" and step.tool_name:
                await self._hold_tool_call(step, report)
            else:
                await self._park(step, report)
        elif action is UncertaintyAction.ABORT:
            self.state.status = "ABORTED"
        await self.commit()
        if action is UncertaintyAction.ABORT:
            raise UncertaintyAbort(step)
        return StepVerdict(
            step=step, action=action, status=self.state.status, escalation_id=self.state.escalation_id
        )

    @actor_endpoint
    async def checkpoint(self, request: CheckpointRequest) -> CheckpointAnswer:
        """Pre-execution checkpoint: a trigger that requires confirmation parks the session
        exactly like a low-confidence step (same escalation service, same decisions); a
        warn-only trigger answers with its message and lets the step run."""
        self._require_running()
        context = CheckpointContext(
            job_id=self.id.id, step=request.step, prompt=request.prompt, retry_count=request.retry_count
        )
        verdict = evaluate_checkpoint([*self.deps.checkpoint_triggers, *request.triggers], context)
        if verdict.gate is CheckpointGate.CONFIRM:
            parked = context.model_copy(update={"trigger": verdict.trigger})
            escalation_id = self._new_escalation_id(f"checkpoint-{request.step}")
            await self._send_to_person(escalation_id, parked, verdict.message)
            await self.commit()
        return CheckpointAnswer(
            verdict=verdict, status=self.state.status, escalation_id=self.state.escalation_id
        )

    def _new_escalation_id(self, at: str) -> str:
        """`<session>.<step>`; when the session already had that one decided (its run started
        again from its first step, after a crash), `<session>.<step>.<n>`, n past every
        decision so far, so it never names a decided escalation again. A park repeated after a
        failed call finds the same state and so the same id."""
        first = f"{self.id.id}.{at}"
        if all(c.escalation_id != first for c in self.state.continuations):
            return first
        return f"{first}.{len(self.state.continuations) + 1}"

    async def _send_to_person(
        self, escalation_id: str, context: EscalationContext | CheckpointContext, why: str
    ) -> None:
        request = ParkRequest(
            waiting_party=WaitingParty(kind=WaitingPartyKind.SESSION, id=self.id.id),
            context=context,
            who="uncertainty-monitor",
            why=why,
        )
        await escalation_actors(self.deps.actors)(escalation_id).park(request)
        self.state.status = "WAITING_FOR_HUMAN"
        self.state.escalation_id = escalation_id

    async def _park(self, step: StepUncertainty, report: StepReport) -> None:
        assert self.state.belief is not None
        escalation_id = self._new_escalation_id(step.step_id)
        context = EscalationContext(
            job_id=self.id.id,
            step=self.state.belief.total_steps,
            validation_results=[],
            confidence=step.propagated_confidence,
            retry_count=len(self.state.continuations),
            error_history=[
                f"step {step.step_id}: {step.level} uncertainty ({step.propagated_confidence:.2f})"
            ],
            prompt_used=report.prompt or "",
            output_summary=report.text[:1000] or f"tool {report.tool_name}",
        )
        await self._send_to_person(escalation_id, context, f"{step.action} at step {step.step_id}")

    async def _hold_tool_call(self, step: StepUncertainty, report: StepReport) -> None:
        """A tool about to run, held for a person's confirmation: a checkpoint, decided like
        one (proceed runs the tool, skip and abort keep it from running, modify_prompt gives
        the agent a new prompt instead)."""
        assert self.state.belief is not None and step.tool_name
        irreversible = "irreversible " if step.irreversible else ""
        why = (
            f"{step.level} uncertainty (confidence {step.propagated_confidence:.2f}) before the "
            f"{irreversible}tool {step.tool_name}"
        )
        about_to = report.text or f"calls {step.tool_name}"
        context = CheckpointContext(
            job_id=self.id.id,
            step=self.state.belief.total_steps,
            prompt=(f"{about_to}\n\nTask: {report.prompt}" if report.prompt else about_to)[:MAX_TEXT_CHARS],
            retry_count=len(self.state.continuations),
            trigger=CheckpointTrigger(
                name=f"before tool {step.tool_name}"[:MAX_NAME_CHARS], message=why[:MAX_NOTE_CHARS]
            ),
        )
        await self._send_to_person(self._new_escalation_id(step.step_id), context, why[:MAX_NOTE_CHARS])

    @actor_endpoint
    async def get_belief_state(self) -> SessionState:
        return self.state

    @actor_endpoint
    async def summary_metadata(self) -> SessionSummary:
        return SessionSummary.model_validate(
            {**self._estimator().summary_metadata(), "status": self.state.status}
        )

    @actor_endpoint
    async def reset(self) -> SessionState:
        self.state = SessionState()
        await self.commit()
        return self.state

    @actor_endpoint
    async def apply_decision(self, resolved: EscalationResolved) -> SessionState:
        """Continue (or end) the session as decided. A decision applied already changes nothing
        (a redelivery); one for an escalation this session never waited on is refused."""
        if any(c.escalation_id == resolved.escalation_id for c in self.state.continuations):
            return self.state
        if self.state.status != "WAITING_FOR_HUMAN" or resolved.escalation_id != self.state.escalation_id:
            raise UnverifiedDecision(
                f"session {self.id.id} is not waiting for escalation {resolved.escalation_id} "
                f"(it is {self.state.status}, waiting for {self.state.escalation_id or 'nothing'})"
            )
        decision = resolved.decision
        action = decision.action
        self.state.continuations.append(
            Continuation(
                escalation_id=resolved.escalation_id,
                action=action,
                next_prompt=decision.modified_prompt,
                guidance=decision.guidance,
                decided_by=resolved.decided_by,
                at=datetime.now(UTC),
            )
        )
        self.state.escalation_id = None
        if action in (EscalationAction.ABORT, CheckpointAction.ABORT):
            self.state.status = "ABORTED"
            self.state.abort_summary = resolved.abort_summary
        else:
            self.state.status = "RUNNING"
            self.state.awaiting_outcome = resolved.escalation_id
        await self.commit()
        return self.state


ACTOR_TYPE = SessionUncertainty.__name__  # the Dapr actor type is the class name
