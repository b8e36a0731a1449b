"""The `WorkerAgent` actor: one per registered agent, executing the tasks awarded to it.

Execution is a small ReAct loop through the model client, bounded by the agent's `max_steps`;
the actor remembers the tasks it executed last, so an award redelivered before its outcome
reached the board is not run twice (the worker skips an award whose task the board already
holds an outcome for). Before the award's delivery is acknowledged, the worker registers a
reminder for the run (kept by the Dapr scheduler, carrying the award); the run removes it once
its outcome is announced or the task is parked. An award that arrives while the worker has as
many runs under way as it allows waits as that reminder, which starts it. When the worker or
its sidecar dies mid-run, the reminder starts the run again once the actor is back, or
announces an outcome committed but not yet announced. A run started again after the monitor
had parked it finds the session waiting and parks under that escalation; if the person decided
meanwhile, the run goes on as the session now stands (running again, or ended by an abort).

With uncertainty checks on, every step is reported to the uncertainty monitor (session = task
id). When the monitor pauses the session, the task is parked here with its transcript and
stays ALLOCATED on the board; the person's decision (`agora.escalation.resolved`) resumes it:
retry runs the step again, modify_prompt continues with the new instruction, skip ends the
task as partial, abort ends it as failed. Like an award, the decision is kept as a reminder on
the agent (`decided:<escalation_id>`, carrying it) before its delivery is acknowledged, and
removed once applied, so a crash or a call that timed out cannot lose it.

With failure triage on, an attempt that ends without success is classified from its
trajectory (`agora.core.triage`): the recovery the policy picks (retry, replan, a hint...) is
tried automatically as a new attempt with the hint in the transcript, until the policy
escalates (an unclassifiable failure, or the same failure type again after its repeat
limit); then the task is parked for a person exactly like an uncertain step. Between the two,
failed attempts climb the escalation ladder (`agora.core.escalation.ladder.next_level`): the first
attempts are retried automatically, the next one after the agent has analysed the failure,
the next with a notice to the people watching, and from then on a person decides; after the
ladder's last attempt the task is aborted. A low-confidence failure (after the first attempt)
goes straight to a person.

Every agent learns from its own recent runs (`agora.core.outcomes`): before a task, the
patterns its recent outcomes show that are relevant to the task are added to its prompt; the
outcome of each run is kept with the patterns that were applied, so their effectiveness (success
with the pattern against without) can be read from `GET /v1/agents/{agent_id}/learning`.
"""

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from dapr.actor import Remindable
from opentelemetry import trace
from pydantic import BaseModel, Field

from agora.core import topics
from agora.core.checks import RecordedError
from agora.core.contracts import AgentLearning, StepReport
from agora.core.errors import AgoraError
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.ladder import (
    DEFAULT_ESCALATION_CONFIG,
    EscalationConfig,
    EscalationLevel,
    next_level,
)
from agora.core.escalation.record import ParkRequest, WaitingParty, WaitingPartyKind
from agora.core.market import TaskOutcome
from agora.core.messages import EscalationResolved, TaskAwarded
from agora.core.models import CapabilityProfile
from agora.core.outcomes.effectiveness import pattern_effectiveness
from agora.core.outcomes.patterns import DetectedPattern, detect_patterns
from agora.core.outcomes.prompts import format_patterns_for_prompt, select_relevant_patterns
from agora.core.outcomes.record import OutcomeStatus, SheetOutcome
from agora.core.triage import (
    DEFAULT_REPEAT_LIMIT,
    FailureType,
    TriageDecision,
    build_failure_context,
    triage,
)
from agora.core.triage import Step as TriageStep
from agora.core.uncertainty import SessionNotRunning, UncertaintyAbort
from agora.llm import ChatMessage, ModelClient, ModelOutputInvalid, complete_json
from agora.runtime.actor import ActorClient, Actors, PydanticActor, actor_endpoint
from agora.runtime.clients import UncertaintyClient, escalation_actors
from agora.runtime.interfaces import WorkerAgentInterface
from agora.runtime.pubsub import Publisher
from agora.runtime.sidecar import DaprError, DaprSidecar
from agora.runtime.tracing import tracer

log = logging.getLogger(__name__)

EXECUTED_KEPT = 50
"""Recent outcomes kept to recognise a redelivered award (later ones: the board has the outcome)."""
LEARNING_KEPT = 50
"""Recent runs an agent learns from (its own; bounded, as they are saved with its state)."""
PATTERNS_REFRESHED_EVERY = 5
"""Runs after which the agent looks for patterns in its history again (not on every task)."""
PATTERNS_APPLIED = 3
"""Most patterns added to one task's prompt."""
SESSION_ABORTED = "\x00aborted"
"""What `_check` answers when the monitor ended the task's session (never an escalation id,
which cannot hold control characters)."""
RUN_REMINDER_PREFIX = "run:"
DECISION_REMINDER_PREFIX = "decided:"
"""A person's decision on a parked task, kept as a reminder (carrying the decision) from before
its delivery is acknowledged until the agent applied it."""
RUN_WATCHDOG = timedelta(seconds=30)
"""How soon a run that did not start on delivery (the worker was busy) or was cut short by a
crash of the worker (or its sidecar) starts: a reminder kept by the Dapr scheduler fires this
long after the award came, and every period after, until the run's outcome is announced or
the task is parked. A run still going when it fires holds
the actor's turn, so the reminder waits for it and then finds the run over."""


class ReactStep(BaseModel):
    thought: str = Field(max_length=1000)
    action: Literal["work", "finish"]
    observation: str = Field(max_length=1000)
    succeeded: bool
    """Only read on `finish`: whether the agent judges the task done."""
    confidence: float = Field(ge=0.0, le=1.0)
    """How sure the agent is of this step (reported to the uncertainty monitor)."""


class ParkedTask(BaseModel):
    award: TaskAwarded
    transcript: list[ChatMessage]
    steps: int
    escalation_id: str
    step_limit: int = 0
    """Where the interrupted attempt would have stopped (0: a new attempt on resume)."""
    attempt_history: list[tuple[FailureType, str]] = Field(default_factory=list)
    """Triage's record of the recoveries tried so far for this task."""
    patterns_applied: list[str] = Field(default_factory=list)
    """What the agent's learning added to the task's prompt."""
    started_at: float = 0.0
    """Wall-clock seconds when the task's first attempt started."""


class FailureAnalysis(BaseModel):
    """The agent's own analysis of a failed attempt (the ladder's agent-analysis rung)."""

    cause: str = Field(max_length=500)
    next_approach: str = Field(max_length=500)


class Attempt(BaseModel):
    """How one run of the ReAct loop ended: an outcome, or None when parked for a person."""

    outcome: TaskOutcome | None
    trajectory: list[TriageStep]


class WorkerState(BaseModel):
    executed: dict[str, TaskOutcome] = Field(default_factory=dict)
    parked: dict[str, ParkedTask] = Field(default_factory=dict)
    learning: list[SheetOutcome] = Field(default_factory=list)
    """The agent's most recent runs (at most `LEARNING_KEPT`), oldest first."""


@dataclass
class Run:
    """One task's run across its attempts: what the prompt was given and what went wrong."""

    patterns_applied: list[str]
    started_at: float
    history: list[tuple[FailureType, str]] = field(default_factory=list)
    aborted: bool = False
    """Ended by an abort (a person's decision, or the ladder's last rung)."""


@dataclass(frozen=True)
class WorkerDeps:
    """What every `WorkerAgent` actor of a worker works with."""

    profiles: dict[str, CapabilityProfile]
    model: ModelClient
    publisher: Publisher
    sidecar: DaprSidecar
    uncertainty_app_id: str | None = None
    """The uncertainty monitor that checks every step; None: no per-step checks."""
    triage_failures: bool = False
    """Classify failed attempts and recover or escalate them."""
    triage_repeat_limit: int = DEFAULT_REPEAT_LIMIT
    escalation: EscalationConfig = DEFAULT_ESCALATION_CONFIG
    """The escalation ladder failed attempts climb (with triage on)."""


class WorkerAgent(PydanticActor[WorkerState, WorkerDeps], WorkerAgentInterface, Remindable):
    state_model = WorkerState
    _found_patterns: list[DetectedPattern] | None = None
    """The patterns in the agent's recent runs, as last looked for (per activation, not saved)."""
    _runs_since_patterns: int = 0

    @actor_endpoint
    async def execute(self, award: TaskAwarded) -> TaskOutcome | None:
        return await self._execute(award)

    async def _execute(self, award: TaskAwarded) -> TaskOutcome | None:
        if award.task_id in self.state.parked:
            return None  # waiting for a person
        done = self.state.executed.get(award.task_id)
        if done is not None:
            await self._announce(done)
            await self._run_ended(award.task_id)
            return done
        patterns = [
            p.description
            for p in select_relevant_patterns(
                self._patterns(), {"text": award.spec.description}, PATTERNS_APPLIED
            )
        ]
        run = Run(patterns_applied=patterns, started_at=time.time())
        done = await self._attempt(award, self._opening(award, patterns), 0, self._step_budget(award), run)
        if done is not None:
            await self._finish(award, done, run)
        await self._run_ended(award.task_id)
        return done

    @actor_endpoint
    async def resume(self, resolved: EscalationResolved) -> TaskOutcome | None:
        return await self._resume(resolved)

    async def _resume(self, resolved: EscalationResolved) -> TaskOutcome | None:
        """Go on with a parked task as the person decided. The decision's reminder (registered
        before its delivery was acknowledged) is removed only once this is done, so a crash
        anywhere in between brings the decision back."""
        parked = self.state.parked.get(resolved.waiting_party.id)
        if parked is None or parked.escalation_id != resolved.escalation_id:
            log.info(
                "decision for no parked task of this agent (resumed already, or not ours)",
                extra={"escalation_id": resolved.escalation_id, "agent_id": self.id.id},
            )
            await self._decision_taken(resolved.escalation_id)
            return None
        # From here the task is a run again: its reminder first, so a crash once the task is no
        # longer parked starts it afresh rather than losing it.
        await self.register_reminder(
            run_reminder(parked.award.task_id),
            parked.award.model_dump_json().encode(),
            RUN_WATCHDOG,
            RUN_WATCHDOG,
        )
        del self.state.parked[resolved.waiting_party.id]
        await self.commit()
        task, action = parked.award, str(resolved.decision.action)
        run = Run(parked.patterns_applied, parked.started_at or time.time(), list(parked.attempt_history))
        done: TaskOutcome | None
        if action in ("abort", "skip"):
            run.aborted = action == "abort"
            done = self._outcome(task, parked.steps, succeeded=False, partial=action == "skip",
                                 summary=f"{action} by {resolved.decided_by}")  # fmt: skip
        else:
            transcript = list(parked.transcript)
            if resolved.decision.modified_prompt:
                transcript.append(ChatMessage(role="user", content=resolved.decision.modified_prompt))
            elif resolved.decision.guidance:
                transcript.append(ChatMessage(role="user", content=resolved.decision.guidance))
            limit = parked.step_limit or parked.steps + self._step_budget(task)
            done = await self._attempt(task, transcript, parked.steps, limit, run)
        if done is not None:
            await self._finish(task, done, run)
        await self._run_ended(task.task_id)
        await self._decision_taken(resolved.escalation_id)
        return done

    async def on_reminder(self, name: str, state: bytes) -> None:
        if name.startswith(DECISION_REMINDER_PREFIX):
            resolved = EscalationResolved.model_validate_json(state)
            try:
                await self._resume(resolved)
            except (AgoraError, DaprError) as exc:
                self.doubt_state()  # it may have stopped between a change and its save
                log.warning(
                    "a decision taken up by its reminder cannot be applied yet; trying later",
                    extra={"escalation_id": resolved.escalation_id, "agent_id": self.id.id,
                           "reason": str(exc)[:300]},
                )  # fmt: skip
            return
        if not name.startswith(RUN_REMINDER_PREFIX):
            return
        task_id = name.removeprefix(RUN_REMINDER_PREFIX)
        done = self.state.executed.get(task_id)
        if done is not None:
            await self._announce(done)  # committed, then perhaps cut short before it went out
        elif task_id not in self.state.parked:
            award = TaskAwarded.model_validate_json(state)
            # The worker was busy when the award came (it waited here), or the run was cut short
            # by a crash: either way it starts now, from its first step.
            log.info("run started by its reminder", extra={"task_id": task_id, "agent_id": self.id.id})
            try:
                await self._execute(award)
            except (AgoraError, DaprError) as exc:
                self.doubt_state()  # it may have stopped between a change and its save
                log.warning(
                    "a run started by its reminder cannot go on yet; trying later",
                    extra={"task_id": task_id, "agent_id": self.id.id, "reason": str(exc)[:300]},
                )
            return
        await self._run_ended(task_id)

    async def _run_ended(self, task_id: str) -> None:
        """The outcome is out or the task is parked: nothing to start again after a crash."""
        await self.drop_reminder(run_reminder(task_id))

    async def _decision_taken(self, escalation_id: str) -> None:
        """The decision was applied (or is not for this agent): nothing to take up again."""
        await self.drop_reminder(decision_reminder(escalation_id))

    @actor_endpoint
    async def learning(self) -> AgentLearning:
        history = self.state.learning
        return AgentLearning(
            agent_id=self.id.id,
            outcomes=len(history),
            patterns=[p.description for p in detect_patterns(history)],
            effectiveness=pattern_effectiveness(history),
        )

    def _patterns(self) -> list[DetectedPattern]:
        """The patterns in the agent's recent runs, looked for again every few runs."""
        if self._found_patterns is None or self._runs_since_patterns >= PATTERNS_REFRESHED_EVERY:
            self._found_patterns = detect_patterns(self.state.learning)
            self._runs_since_patterns = 0
        return self._found_patterns

    def _opening(self, task: TaskAwarded, patterns: list[str]) -> list[ChatMessage]:
        profile = self.deps.profiles[task.agent_id]
        lessons = format_patterns_for_prompt(patterns)
        return [
            ChatMessage(
                role="system",
                content=(
                    f"You are {profile.agent_name}, skilled in {', '.join(profile.skill_tags)}. "
                    "Work on the task step by step. Each turn, think, then either keep working "
                    "(action 'work') or finish (action 'finish', saying whether you succeeded). "
                    "Report what you observed and how confident you are."
                    + (f"\n\n{lessons}" if lessons else "")
                ),
            ),
            ChatMessage(role="user", content=f"Task {task.task_id}: {task.spec.description}"),
        ]

    def _step_budget(self, task: TaskAwarded) -> int:
        """Steps one attempt may take: twice the bid's estimate, within the agent's maximum."""
        return min(self.deps.profiles[task.agent_id].max_steps, max(1, task.bid.estimated_steps) * 2)

    async def _attempt(
        self, task: TaskAwarded, transcript: list[ChatMessage], steps: int, limit: int, run: Run
    ) -> TaskOutcome | None:
        """Run the task; with triage on, failed attempts climb the escalation ladder (None:
        parked for a person)."""
        while True:
            attempt = await self._run(task, transcript, steps, limit, run)
            done = attempt.outcome
            if done is None or done.actual_success or not self.deps.triage_failures:
                return done
            context = build_failure_context(
                attempt.trajectory,
                original_task=task.spec.description,
                raw_error=None if attempt.trajectory else "the attempt ended before its first step",
                attempt_history=run.history,
            )
            decision = triage(context, repeat_limit=self.deps.triage_repeat_limit)
            failed_attempt = decision.attempt_number + 1
            confidence = _last_confidence(attempt.trajectory)
            level = next_level(failed_attempt, confidence=confidence, config=self.deps.escalation)
            if decision.escalated and level is not EscalationLevel.ABORT:
                level = EscalationLevel.REQUIRE_DECISION  # automated recovery has nothing left to try
            trace.get_current_span().add_event(
                "triage",
                {
                    "agora.failure_type": decision.failure_type.value,
                    "agora.recovery": decision.action.kind.value,
                    "agora.attempt": decision.attempt_number,
                    "agora.escalation_level": level.value,
                },
            )
            run.history = [*run.history, decision.history_entry]
            note = f"Attempt {failed_attempt} failed ({decision.failure_type.value})."
            if level is EscalationLevel.ABORT:
                run.aborted = True
                summary = f"aborted after {failed_attempt} failed attempts ({decision.failure_type.value})"
                return self._outcome(task, done.actual_steps, succeeded=False, partial=False, summary=summary)
            if level is EscalationLevel.REQUIRE_DECISION:
                await self._park_failed(task, transcript, done, decision, run, confidence or 0.0)
                return None
            guidance = decision.action.hint or "Try again."
            if level is EscalationLevel.AGENT_ANALYSIS:
                guidance = await self._analyse(transcript, note) or guidance
            elif level is EscalationLevel.NOTIFY:
                log.warning(
                    "task keeps failing; continuing without waiting for a person",
                    extra={"task_id": task.task_id, "agent_id": task.agent_id, "attempt": failed_attempt,
                           "failure_type": decision.failure_type.value, "escalation_level": level.value},
                )  # fmt: skip
            transcript = [*transcript, ChatMessage(role="user", content=f"{note} {guidance}")]
            steps, limit = done.actual_steps, done.actual_steps + self._step_budget(task)

    async def _analyse(self, transcript: list[ChatMessage], note: str) -> str | None:
        """The ladder's agent-analysis rung: the agent studies its failed attempt before the
        next one; its analysis guides that attempt (None: no usable analysis, plain retry)."""
        ask = ChatMessage(
            role="user",
            content=f"{note} Before trying again, analyse the failure: what caused it, and what "
            "you will do differently.",
        )
        try:
            analysis, _ = await complete_json(self.deps.model, [*transcript, ask], FailureAnalysis)
        except ModelOutputInvalid:
            return None
        return f"Your analysis: {analysis.cause} Next approach: {analysis.next_approach}"

    async def _park_failed(
        self,
        task: TaskAwarded,
        transcript: list[ChatMessage],
        done: TaskOutcome,
        decision: TriageDecision,
        run: Run,
        confidence: float,
    ) -> None:
        """Hand a task automated recovery could not fix to a person (waiting party: the task)."""
        escalation_id = f"{task.task_id}.attempt-{decision.attempt_number + 1}"
        request = ParkRequest(
            waiting_party=WaitingParty(kind=WaitingPartyKind.TASK, id=task.task_id),
            context=EscalationContext(
                job_id=task.task_id,
                sheet_num=decision.attempt_number + 1,
                validation_results=[],
                confidence=confidence,
                retry_count=decision.attempt_number,
                error_history=[f"{kind.value} -> {action}" for kind, action in run.history],
                prompt_used=task.spec.description,
                output_summary=done.summary or f"failed after {done.actual_steps} steps",
            ),
            who=f"worker:{task.agent_id}",
            why=decision.action.reason or f"{decision.failure_type.value}: automated recovery exhausted",
        )
        await escalation_actors(ActorClient(self.deps.sidecar))(escalation_id).park(request)
        self.state.parked[task.task_id] = ParkedTask(
            award=task,
            transcript=transcript,
            steps=done.actual_steps,
            escalation_id=escalation_id,
            attempt_history=run.history,
            patterns_applied=run.patterns_applied,
            started_at=run.started_at,
        )
        await self.commit()

    async def _run(
        self, task: TaskAwarded, transcript: list[ChatMessage], steps: int, limit: int, run: Run
    ) -> Attempt:
        """Run steps until finish, the step limit, or a pause (no outcome: parked for a person)."""
        model = self.deps.model
        assert model is not None
        succeeded, summary = False, ""
        trajectory: list[TriageStep] = []
        with tracer("agora.worker").start_as_current_span(
            "worker.execute",
            attributes={"task_id": task.task_id, "agent_id": task.agent_id, "agora.max_steps": limit},
        ) as span:
            while steps < limit:
                steps += 1
                step, _ = await complete_json(model, transcript, ReactStep)
                transcript.append(ChatMessage(role="assistant", content=step.model_dump_json()))
                transcript.append(ChatMessage(role="user", content=f"Step {steps} recorded. Continue."))
                summary = step.observation
                trajectory.append(
                    TriageStep(
                        index=len(trajectory),
                        action=f"{step.action}: {step.thought}",
                        llm_output=step.observation,
                        metadata={"confidence": step.confidence},
                    )
                )
                escalation_id = await self._check(task, steps, step)
                if escalation_id is SESSION_ABORTED:
                    span.set_attribute("agora.aborted_by_monitor", True)
                    summary = f"stopped by the uncertainty monitor at step {steps}: {summary}"
                    break
                if escalation_id is not None:
                    span.set_attribute("agora.parked_for", escalation_id)
                    self.state.parked[task.task_id] = ParkedTask(
                        award=task,
                        transcript=transcript,
                        steps=steps,
                        escalation_id=escalation_id,
                        step_limit=limit,
                        attempt_history=run.history,
                        patterns_applied=run.patterns_applied,
                        started_at=run.started_at,
                    )
                    await self.commit()
                    return Attempt(outcome=None, trajectory=trajectory)
                if step.action == "finish":
                    succeeded = step.succeeded
                    break
            span.set_attribute("agora.steps", steps)
            span.set_attribute("agora.succeeded", succeeded)
        outcome = self._outcome(task, steps, succeeded=succeeded, partial=False, summary=summary)
        return Attempt(outcome=outcome, trajectory=trajectory)

    async def _check(self, task: TaskAwarded, steps: int, step: ReactStep) -> str | None:
        """Report the step to the uncertainty monitor; the escalation id when it paused us, or
        `SESSION_ABORTED` when it ended the session (critical uncertainty)."""
        if self.deps.uncertainty_app_id is None:
            return None
        report = StepReport(
            step_id=str(steps),
            text=f"{step.thought} {step.observation} Confidence: {step.confidence:.0%}",
            prompt=task.spec.description,
        )
        monitor = UncertaintyClient(self.deps.sidecar, self.deps.uncertainty_app_id)
        try:
            return (await monitor.llm_response(task.task_id, report)).parked
        except (SessionNotRunning, UncertaintyAbort):
            # The session takes no more steps: the monitor ended it, or it waits for a person
            # (a run cut short by a crash and started again after the monitor parked it).
            session = await monitor.session(task.task_id)
            if session.status == "ABORTED":
                return SESSION_ABORTED
            if session.status == "WAITING_FOR_HUMAN" and session.escalation_id:
                return session.escalation_id
            raise

    def _outcome(
        self, task: TaskAwarded, steps: int, *, succeeded: bool, partial: bool, summary: str
    ) -> TaskOutcome:
        profile = self.deps.profiles[task.agent_id]
        return TaskOutcome(
            task_id=task.task_id,
            agent_id=task.agent_id,
            actual_success=succeeded,
            actual_cost_usd=round(steps * profile.cost_per_step_usd, 6),
            actual_steps=steps,
            partial=partial,
            summary=summary[:200],
            award_token=task.award_token,
        )

    async def _finish(self, task: TaskAwarded, done: TaskOutcome, run: Run) -> None:
        if task.task_id not in self.state.executed:
            self.state.executed = dict(
                list({**self.state.executed, task.task_id: done}.items())[-EXECUTED_KEPT:]
            )
            self.state.learning = [*self.state.learning, _learnt(done, run)][-LEARNING_KEPT:]
            self._runs_since_patterns += 1
            await self.commit()
        await self._announce(done)

    async def _announce(self, done: TaskOutcome) -> None:
        await self.deps.publisher.publish(topics.TASK_OUTCOME, done, message_id=f"outcome:{done.task_id}")


def run_reminder(task_id: str) -> str:
    return RUN_REMINDER_PREFIX + task_id


def decision_reminder(escalation_id: str) -> str:
    return DECISION_REMINDER_PREFIX + escalation_id


def _last_confidence(trajectory: list[TriageStep]) -> float | None:
    """The agent's own confidence in the last step of an attempt (None: no step was taken)."""
    if not trajectory:
        return None
    confidence = trajectory[-1].metadata.get("confidence")
    return float(confidence) if isinstance(confidence, int | float) else None


def _learnt(done: TaskOutcome, run: Run) -> SheetOutcome:
    """What one run teaches the agent: how it ended, after how many failed attempts and of
    which kinds, and which patterns its prompt carried. A run has no validations, so the
    validation fields stay unset."""
    if done.actual_success:
        status = OutcomeStatus.COMPLETED
    elif done.partial:
        status = OutcomeStatus.SKIPPED
    elif run.aborted:
        status = OutcomeStatus.ABORTED
    else:
        status = OutcomeStatus.FAILED
    return SheetOutcome(
        outcome_id=f"task-{done.task_id}",
        sheet_id="1",
        job_id=done.task_id,
        execution_duration=max(0.0, time.time() - run.started_at),
        retry_count=len(run.history),
        final_status=status,
        success_without_retry=done.actual_success and not run.history,
        patterns_applied=run.patterns_applied,
        error_history=[
            RecordedError(error_code=kind.value, category=kind.value, message=f"{kind.value}: {recovery}")
            for kind, recovery in run.history
        ],
        failure_type=run.history[-1][0] if run.history else None,
        stdout_tail=done.summary[-500:],
    )


ACTOR_TYPE = WorkerAgent.__name__  # the Dapr actor type is the class name


class WorkerAgents(Actors[WorkerAgentInterface]):
    """`WorkerAgent` actors, one per agent this worker hosts: `agents(agent_id).execute(award)`,
    and the reminders registered on an agent from outside its turn."""

    def __init__(self, actors: ActorClient) -> None:
        super().__init__(actors, WorkerAgentInterface)

    async def watch(self, agent_id: str, award: TaskAwarded) -> None:
        """Register the run's reminder before the run starts (outside the agent's turn, which
        a running task may hold): from here a crash cannot lose the award."""
        name, state = run_reminder(award.task_id), award.model_dump_json().encode()
        await self.client.register_reminder(ACTOR_TYPE, agent_id, name, state, RUN_WATCHDOG, RUN_WATCHDOG)

    async def hold_decision(self, agent_id: str, resolved: EscalationResolved) -> None:
        """Keep the decision as a reminder on the agent before its delivery is acknowledged:
        it applies the decision within `RUN_WATCHDOG` unless `resume` did it first."""
        name, state = decision_reminder(resolved.escalation_id), resolved.model_dump_json().encode()
        await self.client.register_reminder(ACTOR_TYPE, agent_id, name, state, RUN_WATCHDOG, RUN_WATCHDOG)
